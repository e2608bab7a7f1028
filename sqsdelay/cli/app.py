"""The `sqsdelay` command line.

Settings flags go before the command (`sqsdelay --endpoint-url URL send ...`) and have the
same names as the SQSDELAY_ settings they override. Exit codes: 0 success, 2 bad input or
configuration (nothing sent), 1 runtime failure.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from typer.core import TyperGroup, TyperOption

from sqsdelay.cli.settings_flags import PANEL_OF, generated_callback, print_settings
from sqsdelay.errors import InvalidInput, SqsDelayError


class _CommandsFirst(TyperGroup):
    """Help with the commands first, then the settings flags in panels by who reads them.

    Typer prints options before commands; a new user looks for the commands. The flags are
    drawn by `print_settings`, which keeps their names whole at 80 columns.
    """

    def format_help(self, ctx: Any, formatter: Any) -> None:  # typer's own click types
        flags = [p for p in self.params if isinstance(p, TyperOption) and p.name in PANEL_OF]
        for p in flags:
            p.hidden = True
        try:
            super().format_help(ctx, formatter)
        finally:
            for p in flags:
                p.hidden = False
        print_settings(Console())


app = typer.Typer(
    name="sqsdelay",
    cls=_CommandsFirst,
    help="Unrestricted delayed delivery for Amazon SQS.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def command(fn: Callable[..., int], group: typer.Typer | None = None) -> Callable[..., None]:
    """Register a command whose errors become exit codes: 2 bad input, 1 runtime failure
    (on `group`, a command group such as `schedule`, or at the top)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            code = fn(*args, **kwargs)
        except InvalidInput as exc:
            print(f"sqsdelay: error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
        except SqsDelayError as exc:
            print(f"sqsdelay: failed: {exc}", file=sys.stderr)
            raise typer.Exit(1) from None
        raise typer.Exit(code)

    (group or app).command(name=fn.__name__.rstrip("_").replace("_", "-"))(run)
    return run


app.callback()(generated_callback())
