"""Running the console: uvicorn on one address, in the foreground (`sqsdelay console`) or
from a thread (the demo's)."""

from __future__ import annotations

import threading
import time

import uvicorn

from sqsdelay.console.app import create_app
from sqsdelay.console.auth import Tokens, check_bind, load_tokens
from sqsdelay.console.service import ConsoleService
from sqsdelay.errors import ConfigError
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.console")


def serve(
    settings: Settings, tokens: Tokens, *, host: str, port: int, read_only: bool = False
) -> None:
    """Serve until SIGINT/SIGTERM (uvicorn's own handling)."""
    check_bind(host, tokens)
    app = create_app(ConsoleService(settings, read_only=read_only), tokens, bind=host)
    shown = f"[{host}]" if ":" in host else host
    log.info(
        "console.started",
        url=f"http://{shown}:{port}/",
        read_only=read_only,
        token_required=tokens.required,
    )
    # uvicorn's own access log would print every URL (page tokens, ids) in its own format:
    # the console logs its actions as events instead.
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False, log_level="warning")


class ServerThread:
    """The console served from a background thread (the demo's): `with ServerThread(...)`."""

    def __init__(self, settings: Settings, *, host: str = "127.0.0.1", port: int = 8080) -> None:
        tokens = load_tokens(settings.console_token, settings.console_token_file)
        check_bind(host, tokens)
        app = create_app(ConsoleService(settings), tokens, bind=host)
        config = uvicorn.Config(
            app, host=host, port=port, log_config=None, access_log=False, log_level="warning"
        )
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
