"""Unrestricted delayed delivery for Amazon SQS."""
