"""Development commands: the embedded emulator and the demo."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from sqsdelay.cli.app import command
from sqsdelay.extras import require


@command
def emulator(
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 4566,
) -> int:
    """Run the embedded SQS emulator on 127.0.0.1 until Ctrl-C.

    A moto server, with a runner that fires its Scheduler schedules."""
    import threading

    from sqsdelay.dev.emulator import Emulator

    with Emulator(port=port) as emu:
        print(f"SQS emulator listening on {emu.url}; export SQSDELAY_ENDPOINT_URL={emu.url}")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


@command
def demo(
    output: Annotated[Path, typer.Option(help="where events and the cost report go")] = Path(
        "demo-output"
    ),
    with_console: Annotated[
        bool,
        typer.Option("--console", help="serve the web console on the demo's data until Ctrl-C"),
    ] = False,
    console_port: Annotated[int, typer.Option(help="the console's port on 127.0.0.1")] = 8080,
) -> int:
    """The whole system end to end on the embedded emulator with a compressed cycle."""
    require("emulator", "the demo")
    if with_console:
        require("console", "the demo's console (--console)")
    from sqsdelay.dev.demo import run

    return run(output, console_port=console_port if with_console else None)
