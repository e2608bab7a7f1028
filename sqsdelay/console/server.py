"""Running the console: uvicorn on one address, in the foreground (`sqsdelay console`) or
from a thread (the demo's)."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from sqsdelay.console.app import create_app
from sqsdelay.console.auth import Sessions, Tokens, check_bind, load_tokens, public_origin
from sqsdelay.console.service import ConsoleService
from sqsdelay.errors import ConfigError
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.console")


def build(settings: Settings, tokens: Tokens, *, host: str, read_only: bool = False) -> Any:
    """The application as the settings say: its public origin, its sessions' lifetimes.
    `ConfigError` (exit 2) before anything listens."""
    check_bind(host, tokens)
    origin = public_origin(settings.console_public_origin)
    sessions = Sessions(
        idle_seconds=settings.console_session_idle_seconds,
        lifetime_seconds=settings.console_session_lifetime_seconds,
    )
    service = ConsoleService(settings, read_only=read_only)
    return create_app(service, tokens, sessions, bind=host, origin=origin)


def _uvicorn(settings: Settings, forwarded_allow_ips: str | None) -> dict[str, Any]:
    # uvicorn's own access log would print every URL (page tokens, ids) in its own format:
    # the console logs its actions as events instead. The proxy headers are believed from
    # the listed addresses only (uvicorn would read FORWARDED_ALLOW_IPS from the
    # environment otherwise).
    return {
        "log_config": None,
        "access_log": False,
        "log_level": "warning",
        "proxy_headers": True,
        "forwarded_allow_ips": forwarded_allow_ips or settings.console_forwarded_allow_ips,
    }


def serve(
    settings: Settings,
    tokens: Tokens,
    *,
    host: str,
    port: int,
    read_only: bool = False,
    forwarded_allow_ips: str | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM (uvicorn's own handling)."""
    app = build(settings, tokens, host=host, read_only=read_only)
    shown = f"[{host}]" if ":" in host else host
    options = _uvicorn(settings, forwarded_allow_ips)
    log.info(
        "console.started",
        url=f"http://{shown}:{port}/",
        public_origin=settings.console_public_origin,
        forwarded_allow_ips=options["forwarded_allow_ips"],
        read_only=read_only,
        token_required=tokens.required,
    )
    uvicorn.run(app, host=host, port=port, **options)


class ServerThread:
    """The console served from a background thread (the demo's): `with ServerThread(...)`."""

    def __init__(self, settings: Settings, *, host: str = "127.0.0.1", port: int = 8080) -> None:
        tokens = load_tokens(settings.console_token, settings.console_token_file)
        app = build(settings, tokens, host=host)
        config = uvicorn.Config(app, host=host, port=port, **_uvicorn(settings, None))
        self.server = uvicorn.Server(config)
        self.url = f"http://{host}:{port}/"
        self._thread = threading.Thread(target=self.server.run, name="console", daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:  # uvicorn sets it once the socket listens
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"the console could not listen on {self.url} (port in use?)")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
