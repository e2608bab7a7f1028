"""The pure core: rules and flows that make no calls (see docs/architecture.md)."""
