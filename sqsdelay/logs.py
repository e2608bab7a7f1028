"""structlog set-up: JSON lines by default, a console renderer for humans.

Message bodies and credentials are never logged: a processor redacts such keys whatever
the caller passes.
"""

import logging
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, TextIO

import structlog

REDACTED_KEYS = frozenset(
    {
        "body",
        "message_body",
        "messagebody",
        "aws_secret_access_key",
        "aws_session_token",
        "secret",
        "password",
        "credentials",
        "authorization",
    }
)


def redact(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if key.lower() in REDACTED_KEYS:
            event[key] = "[redacted]"
    return event


class _Tee:
    """Writes each line to the console stream and to an append-only event file."""

    def __init__(self, stream: TextIO, path: Path) -> None:
        self._stream = stream
        self._file = path.open("a", encoding="utf-8")

    def write(self, text: str) -> int:
        self._stream.write(text)
        self._file.write(text)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()
        self._file.flush()


def configure(
    fmt: str = "json",
    level: str = "INFO",
    *,
    stream: TextIO | None = None,
    file: Path | None = None,
) -> None:
    """Configure structlog. Logs go to stderr so that stdout stays for command output."""
    out: Any = stream or sys.stderr
    if file is not None:
        fmt = "json"  # the event file is machine-read (cost report), so always JSON
        out = _Tee(out, file)
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
