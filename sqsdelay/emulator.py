"""The embedded SQS emulator: a moto server in a thread, on loopback only."""

from __future__ import annotations

import logging
import time
import urllib.request
from types import TracebackType

from sqsdelay.errors import ConfigError


class Emulator:
    """`with Emulator() as emu: emu.url` runs a moto SQS server on 127.0.0.1."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError:  # pragma: no cover - depends on the install
            raise ConfigError(
                "the embedded emulator needs moto: pip install 'sqsdelay[emulator]'"
            ) from None
        self._server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
        self.url = ""

    def start(self, timeout: float = 10.0) -> str:
        # werkzeug logs every request at INFO; the emulator should be quiet.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        deadline = time.monotonic() + timeout
        while True:  # wait until it answers HTTP
            try:
                with urllib.request.urlopen(self.url + "/moto-api/", timeout=1):  # noqa: S310
                    return self.url
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Emulator:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
