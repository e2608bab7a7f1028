"""Rendering the cost report's summary: words, terminal, charts, HTML and files."""
