"""The console command: the web console on the same settings and flows as the CLI."""

from __future__ import annotations

from typing import Annotated

import typer

from sqsdelay.cli.app import command
from sqsdelay.cli.settings_flags import settings_of
from sqsdelay.extras import require


@command
def console(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option(help="address to bind; beyond loopback only with a token")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 8080,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="serve the pages without any action")
    ] = False,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            help="comma-separated addresses (or *) of the reverse proxies whose "
            "X-Forwarded-For/-Proto are believed; default SQSDELAY_CONSOLE_FORWARDED_ALLOW_IPS"
        ),
    ] = None,
) -> int:
    """Serve the web console: scheduled messages, dead letters, health (docs/console.md)."""
    require("console", "the console")
    from sqsdelay.console.auth import check_bind, load_tokens
    from sqsdelay.console.server import serve

    settings = settings_of(ctx)
    tokens = load_tokens(settings.console_token, settings.console_token_file)
    check_bind(host, tokens)  # before anything listens: exit 2 with the fix
    serve(
        settings,
        tokens,
        host=host,
        port=port,
        read_only=read_only,
        forwarded_allow_ips=forwarded_allow_ips,
    )
    return 0
