"""The `sqsdelay` command line: `app` and the settings flags (`app.py`,
`settings_flags.py`), and one module per command group, each registering its commands."""

# The help lists commands in the order they register: messages, operations, cost, dev.
# ruff: noqa: I001
from sqsdelay.cli import messages, operations, schedules, costs, dev, console
from sqsdelay.cli.app import app
from sqsdelay.cli.settings_flags import PANELS

__all__ = [
    "PANELS",
    "app",
    "console",
    "costs",
    "dev",
    "main",
    "messages",
    "operations",
    "schedules",
]


def main() -> None:
    app()
