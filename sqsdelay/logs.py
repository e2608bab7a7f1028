"""Logging: structlog events carried by the standard `logging` module.

As a library, sqsdelay logs to the `sqsdelay` logger and stays silent unless the application
configures logging (a NullHandler, as the logging HOWTO asks of libraries). Each record's
message is the event in logfmt, with its UTC `timestamp` (the cost report reads such lines:
`--format logfmt`), and the event's fields travel as `record.sqsdelay_event`.
The CLI, the worker and the Lambda call `configure()`, which writes JSON lines (or console
lines for humans) to stderr and, optionally, to an append-only event file.

Message bodies and credentials are never logged: a processor redacts such keys whatever
the caller passes, before any handler sees the event.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import structlog

ROOT = "sqsdelay"
EVENT_FIELD = "sqsdelay_event"  # the LogRecord attribute that holds the event's fields

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

logging.getLogger(ROOT).addHandler(logging.NullHandler())


def redact(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if key.lower() in REDACTED_KEYS:
            event[key] = "[redacted]"
    return event


class _Text:
    """The event in logfmt, rendered only if a handler asks for the record's message."""

    __slots__ = ("fields",)
    _render = structlog.processors.LogfmtRenderer(key_order=["event"], drop_missing=True)

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def __str__(self) -> str:
        # The text carries its own UTC time: the cost report reads these lines as logfmt
        # whatever time format the application's handler puts in front of them. Made here,
        # when a handler renders the text, not for every event (the JSON lines stamp their
        # own, `EventFormatter`).
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return str(self._render(None, "", {"timestamp": stamp, **self.fields}))


def _to_logging(
    _logger: Any, _method: str, event: MutableMapping[str, Any]
) -> tuple[tuple[str, _Text], dict[str, Any]]:
    """The `logging` call: readable text, with the fields kept apart for `EventFormatter`.

    All fields travel in one attribute, so a field named like a LogRecord attribute ("name",
    "module") cannot clash with it.
    """
    fields = dict(event)
    return ("%s", _Text(fields)), {"extra": {EVENT_FIELD: fields}}


class _Logger(structlog.stdlib.BoundLogger):
    """Drops a disabled debug or info event before any processor runs: the worker logs one
    per message moved, and a production level of WARNING should cost next to nothing."""

    def debug(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        return super().debug(event, *args, **kw) if self.isEnabledFor(logging.DEBUG) else None

    def info(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        return super().info(event, *args, **kw) if self.isEnabledFor(logging.INFO) else None


def get_logger(name: str) -> Any:
    """A structlog logger on the stdlib logger `name`, whatever the global structlog set-up."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.contextvars.merge_contextvars,
            redact,
            structlog.processors.format_exc_info,
            _to_logging,
        ],
        wrapper_class=_Logger,
        cache_logger_on_first_use=True,
    )


class EventFormatter(logging.Formatter):
    """Renders a record as one JSON (or console) line with the event's own fields."""

    def __init__(self, fmt: str = "json") -> None:
        super().__init__()
        self._render: Any = (
            structlog.processors.JSONRenderer()
            if fmt == "json"
            else structlog.dev.ConsoleRenderer(colors=False)
        )

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, EVENT_FIELD, None)
        event = dict(fields) if fields is not None else {"event": record.getMessage()}
        event["level"] = record.levelname.lower()
        stamp = datetime.fromtimestamp(record.created, tz=UTC)
        event["timestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return str(self._render(None, record.levelname.lower(), event))


class _Owned:
    """Marks the handlers `configure()` installed, so that a second call replaces them."""


def configure(
    fmt: str = "json",
    level: str = "INFO",
    *,
    stream: TextIO | None = None,
    file: Path | None = None,
) -> None:
    """Log sqsdelay's events as lines. Console lines go to stderr: stdout is for command output.

    The event file is machine-read (by the cost report), so it always gets JSON lines.
    """
    logger = logging.getLogger(ROOT)
    for old in [h for h in logger.handlers if isinstance(h, _Owned)]:
        logger.removeHandler(old)
        old.close()
    console = _OwnedStream(stream or sys.stderr)
    console.setFormatter(EventFormatter(fmt))
    logger.addHandler(console)
    if file is not None:
        events = _OwnedFile(file, encoding="utf-8")
        events.setFormatter(EventFormatter("json"))
        logger.addHandler(events)
    logger.setLevel(level)
    # the application's own handlers (if any) do not print the same line a second time
    logger.propagate = False


class _OwnedStream(logging.StreamHandler[TextIO], _Owned):
    pass


class _OwnedFile(logging.FileHandler, _Owned):
    pass
