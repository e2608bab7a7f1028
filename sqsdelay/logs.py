"""Logging: structlog events carried by the standard `logging` module.

As a library, sqsdelay logs to the `sqsdelay` logger and stays silent unless the application
configures logging (a NullHandler, as the logging HOWTO asks of libraries). Each record's
message is the event in logfmt, with its UTC `timestamp` (the cost report reads such lines:
`--format logfmt`), and the event's fields travel as `record.sqsdelay_event`.
The CLI, the worker and the Lambda call `configure()`, which writes JSON lines (or console
lines for humans) to stderr and, optionally, to an append-only event file.

Once `configure()` has installed its handlers and nothing else listens on the way to them
(no other handler or filter, and `logging`'s record factory and `Logger.callHandlers` are
the standard library's own, not replaced by, say, Sentry's logging integration), an event
skips `logging`'s records and handler chain: it is rendered once and written to their
streams (the worker logs an event per message moved; the LogRecord, its caller's frame and
the formatter were most of the worker's logging cost, issue 63). The lines are the same
either way.

Message bodies and credentials are never logged: a processor redacts such keys whatever
the caller passes, before any handler sees the event.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
from collections.abc import Iterator, MutableMapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO, cast

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

_root = logging.getLogger(ROOT)
_root.addHandler(logging.NullHandler())


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
        return str(self._render(None, "", {"timestamp": _stamp(time.time()), **self.fields}))


_second: tuple[int, str] = (-1, "")  # one assignment: threads never see half of it


def _stamp(now: float) -> str:
    """`now` as UTC ISO 8601 with microseconds and a Z; the date and time of day made once a
    second (strftime was a tenth of an event's cost)."""
    global _second
    whole = int(now)
    second, text = _second
    if whole != second:
        text = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second = (whole, text)
    # rounded half to even, as datetime.fromtimestamp rounds (truncating gave 1 us less for
    # half of all times): a micro-second of 1,000,000 is the next second's first
    micro = round((now - whole) * 1_000_000)
    if micro == 1_000_000:
        return _stamp(float(whole + 1))
    return f"{text}.{micro:06d}Z"


def _fallback(value: Any) -> Any:
    """What JSON cannot say, as structlog's JSONRenderer says it."""
    try:
        return value.__structlog__()
    except AttributeError:
        return repr(value)


_json = json.JSONEncoder(default=_fallback).encode


_standard_call_handlers: Any = None  # Logger.callHandlers, once seen to be logging's own


def _logging_unhooked(logger: logging.Logger) -> bool:
    """Whether `logging` would make and hand on `logger`'s record as the standard library
    does: a hook there (Sentry's logging integration replaces Logger.callHandlers; an
    application may set a record factory or a Logger class) must see every record. Checked
    for each event, not at import: such hooks are set up at any time, often after this
    module's import."""
    global _standard_call_handlers
    if type(logger) is not logging.Logger or logging.getLogRecordFactory() is not logging.LogRecord:
        return False
    call = logging.Logger.callHandlers
    if call is _standard_call_handlers:
        return True
    code = getattr(call, "__code__", None)  # a wrapper keeps the name, not the code
    if code is None or code.co_filename != logging.__file__ or code.co_name != "callHandlers":
        return False
    _standard_call_handlers = call
    return True


def _owned_handlers(logger: logging.Logger, level: int) -> list[logging.Handler] | None:
    """The handlers `configure()` installed, if a record of `logger` at `level` would reach
    only them (and NullHandlers) with no filter or hook on the way: then an event may be
    written to them directly. None otherwise (an application's own handler, filter, record
    factory or Logger.callHandlers, a logger outside `sqsdelay`, a propagating root):
    `logging` carries it."""
    if not _logging_unhooked(logger):
        return None
    at = logger
    while at is not _root:
        if at.handlers or at.filters or not at.propagate or at.disabled:
            return None
        parent = at.parent
        if parent is None:
            return None
        at = parent
    if _root.filters or _root.propagate or _root.disabled:
        return None
    handlers = _root.handlers
    for h in handlers:
        if h.filters or h.level > level:
            return None
        if isinstance(h, _Owned):
            if type(h.formatter) is not EventFormatter:
                return None
        elif not isinstance(h, logging.NullHandler):
            return None
    return handlers


_METHODS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


class _Logger:
    """A structlog-style bound logger on the stdlib logger `name`: `log.info(event, **fields)`.

    A disabled level costs one cached check (the worker logs an event per message moved, and
    a production level of WARNING should cost next to nothing)."""

    __slots__ = ("_logger",)

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)

    def debug(self, event: str, *args: Any, **kw: Any) -> None:
        if self._logger.isEnabledFor(logging.DEBUG):
            self._emit(logging.DEBUG, "debug", event, args, kw)

    def info(self, event: str, *args: Any, **kw: Any) -> None:
        if self._logger.isEnabledFor(logging.INFO):
            self._emit(logging.INFO, "info", event, args, kw)

    def warning(self, event: str, *args: Any, **kw: Any) -> None:
        if self._logger.isEnabledFor(logging.WARNING):
            self._emit(logging.WARNING, "warning", event, args, kw)

    warn = warning

    def error(self, event: str, *args: Any, **kw: Any) -> None:
        if self._logger.isEnabledFor(logging.ERROR):
            self._emit(logging.ERROR, "error", event, args, kw)

    def critical(self, event: str, *args: Any, **kw: Any) -> None:
        if self._logger.isEnabledFor(logging.CRITICAL):
            self._emit(logging.CRITICAL, "critical", event, args, kw)

    def exception(self, event: str, *args: Any, **kw: Any) -> None:
        kw.setdefault("exc_info", True)
        self.error(event, *args, **kw)

    def log(self, level: int, event: str, *args: Any, **kw: Any) -> None:
        if self._logger.isEnabledFor(level):
            name = logging.getLevelName(level).lower()
            self._emit(level, name, event, args, kw)

    def _emit(
        self, level: int, method: str, event: str, args: tuple[Any, ...], fields: dict[str, Any]
    ) -> None:
        """The event's fields as structlog's processors made them (context variables, the
        redaction, a formatted exception), then written."""
        if args:
            fields["positional_args"] = args
        fields["event"] = event
        # structlog's private registry of bound names, if it still has one: none bound,
        # nothing to merge (a merge costs a copy of the context)
        bound = getattr(structlog.contextvars, "_CONTEXT_VARS", None)
        if bound is None or bound:
            structlog.contextvars.merge_contextvars(None, method, fields)
        for key in fields:
            if key.lower() in REDACTED_KEYS:
                redact(None, method, fields)
                break
        if "exc_info" in fields:
            structlog.processors.format_exc_info(None, method, fields)
        handlers = _owned_handlers(self._logger, level)
        if handlers is None:  # through `logging`: its records and handlers
            self._logger.log(level, "%s", _Text(fields), extra={EVENT_FIELD: fields})
        else:
            _write(handlers, fields, method)


_held = threading.local()  # .lines: what `together()` holds back in this thread, by handler


@contextlib.contextmanager
def together() -> Iterator[None]:
    """The events this thread writes directly inside go out at its end, one write per
    handler (the events of one send's answer: a write and a flush each were a fifth of an
    event's cost). Each keeps its own timestamp; `logging`'s records are not held."""
    if getattr(_held, "lines", None) is not None:  # within another: that one writes
        yield
        return
    lines: dict[_Owned, list[str]] = {}
    _held.lines = lines
    try:
        yield
    finally:
        _held.lines = None
        for h, chunk in lines.items():
            _put(h, "".join(chunk))


def _write(handlers: list[logging.Handler], fields: dict[str, Any], method: str) -> None:
    """Write an event to `configure()`'s handlers as their formatter would have rendered its
    record (each line rendered once, whatever number of handlers take it)."""
    now = time.time()
    held: dict[_Owned, list[str]] | None = getattr(_held, "lines", None)
    lines: dict[str, str] = {}
    for h in handlers:
        if not isinstance(h, _Owned):
            continue  # a NullHandler
        # the handler's formatter, as logging's path renders it (_owned_handlers saw it to
        # be an EventFormatter): an application may have set another format on it
        fmt = cast(EventFormatter, h.formatter).fmt
        line = lines.get(fmt)
        if line is None:
            line = lines[fmt] = _render(fmt, fields, method, now) + "\n"
        if held is None:
            _put(h, line)
        else:
            held.setdefault(h, []).append(line)


def _put(h: _Owned, text: str) -> None:
    """As StreamHandler.emit and flush do, under the handler's lock."""
    h.acquire()
    try:
        stream = h.stream_for_write()
        stream.write(text)
        stream.flush()
    except Exception:
        h.handleError(logging.makeLogRecord({"msg": text, "levelname": "ERROR"}))
    finally:
        h.release()


def _render(fmt: str, fields: dict[str, Any], method: str, now: float) -> str:
    event = dict(fields)
    event["level"] = method
    event["timestamp"] = _stamp(now)
    if fmt == "json":
        return _json(event)
    return str(_CONSOLE(None, method, event))


_CONSOLE = structlog.dev.ConsoleRenderer(colors=False)


def get_logger(name: str) -> Any:
    """A structlog-style logger on the stdlib logger `name`, whatever the global structlog
    set-up."""
    return _Logger(name)


class EventFormatter(logging.Formatter):
    """Renders a record as one JSON (or console) line with the event's own fields."""

    def __init__(self, fmt: str = "json") -> None:
        super().__init__()
        self.fmt = fmt

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, EVENT_FIELD, None)
        event = dict(fields) if fields is not None else {"event": record.getMessage()}
        return _render(self.fmt, event, record.levelname.lower(), record.created)


class _Owned(logging.StreamHandler[TextIO]):
    """The handlers `configure()` installed (a second call replaces them), which an event
    may be written to directly (`_write`)."""

    def stream_for_write(self) -> TextIO:
        return self.stream


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
    logger = _root
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


class _OwnedStream(_Owned):
    pass


class _OwnedFile(logging.FileHandler, _Owned):
    def stream_for_write(self) -> TextIO:
        if self.stream is None:  # closed, or opened lazily: as FileHandler.emit does
            self.stream = self._open()
        return self.stream
