"""The two ways an event is written (directly to configure()'s handlers, or through
`logging`'s record) agree, and the direct one steps aside for anything hooked into `logging`."""

from __future__ import annotations

import io
import json
import logging
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay import logs


@pytest.fixture
def out() -> io.StringIO:
    stream = io.StringIO()
    logs.configure("json", "INFO", stream=stream)
    return stream


def alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only configure()'s handlers on `sqsdelay`: pytest adds its capture handler as each
    test's call begins (after the fixtures), and it would send every event through
    `logging`."""
    root = logging.getLogger("sqsdelay")
    theirs = [h for h in root.handlers if type(h).__module__.startswith("_pytest")]
    monkeypatch.setattr(root, "handlers", [h for h in root.handlers if h not in theirs])


def _direct(out: io.StringIO) -> bool:
    """Whether the next event is written directly (no LogRecord made)."""
    return logs._owned_handlers(logging.getLogger("sqsdelay.t"), logging.INFO) is not None


def test_the_plain_set_up_writes_directly(
    out: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone(monkeypatch)
    assert _direct(out)


def test_a_patched_call_handlers_sees_every_event(
    out: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Sentry's LoggingIntegration does: it replaces Logger.callHandlers (after sqsdelay's
    import, or before it: both are checked) and reads warnings and errors there."""
    alone(monkeypatch)
    original = logging.Logger.callHandlers
    seen: list[logging.LogRecord] = []

    def patched(self: logging.Logger, record: logging.LogRecord) -> None:
        seen.append(record)
        original(self, record)

    monkeypatch.setattr(logging.Logger, "callHandlers", patched)
    logs.get_logger("sqsdelay.t").warning("delay.send_failed", code="X")
    [record] = seen
    assert getattr(record, logs.EVENT_FIELD)["code"] == "X"
    assert json.loads(out.getvalue())["code"] == "X"  # and configure()'s line still written


def test_a_custom_record_factory_sees_every_event(
    out: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone(monkeypatch)
    made: list[logging.LogRecord] = []

    def factory(*args: Any, **kw: Any) -> logging.LogRecord:
        record = logging.LogRecord(*args, **kw)
        made.append(record)
        return record

    monkeypatch.setattr(logging, "_logRecordFactory", factory)  # what setLogRecordFactory sets
    assert logging.getLogRecordFactory() is factory
    logs.get_logger("sqsdelay.t").info("delay.scheduled", n=1)
    assert len(made) == 1 and json.loads(out.getvalue())["n"] == 1


def test_a_formatter_set_on_configures_handler_is_used(
    out: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone(monkeypatch)
    [ours] = [h for h in logging.getLogger("sqsdelay").handlers if getattr(h, "stream", 0) is out]
    monkeypatch.setattr(ours, "formatter", logs.EventFormatter("console"))
    assert _direct(out)
    logs.get_logger("sqsdelay.t").info("delay.scheduled", n=1)
    line = out.getvalue()
    assert not line.startswith("{") and "delay.scheduled" in line and "n=1" in line


def test_context_variables_merge_without_structlogs_private_registry(
    out: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone(monkeypatch)
    structlog.contextvars.bind_contextvars(request_id="r1")
    try:
        monkeypatch.delattr(structlog.contextvars, "_CONTEXT_VARS")
        logs.get_logger("sqsdelay.t").info("delay.scheduled")
    finally:
        monkeypatch.undo()
        structlog.contextvars.clear_contextvars()
    assert json.loads(out.getvalue().splitlines()[0])["request_id"] == "r1"


# From 2000 to 2100, with any float's fraction: the half-way cases included.
INSTANTS = st.floats(min_value=946_684_800.0, max_value=4_102_444_800.0)


@given(INSTANTS)
def test_the_timestamp_is_datetimes(now: float) -> None:
    """The stamp rounds as datetime.fromtimestamp does (it had truncated: 1 us less for about
    half of all times), so the line is the one the logging path made before issue 63."""
    expected = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert logs._stamp(now) == expected


@given(INSTANTS)
def test_both_paths_give_the_same_line_for_the_same_instant(now: float) -> None:
    """One event written directly, the same one through logging's record (a filter on the
    handler sends it there), at the same instant: the same line, datetime's time."""
    stream = io.StringIO()
    logs.configure("json", "INFO", stream=stream)
    root = logging.getLogger("sqsdelay")
    [ours] = [h for h in root.handlers if getattr(h, "stream", 0) is stream]
    log = logs.get_logger("sqsdelay.t")
    with mock.patch.object(root, "handlers", [ours]), mock.patch("time.time", return_value=now):
        log.info("delay.scheduled", n=1)
        ours.addFilter(lambda record: True)
        try:
            log.info("delay.scheduled", n=1)
        finally:
            ours.filters.clear()
    direct, through = stream.getvalue().splitlines()
    assert direct == through
    expected = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert json.loads(direct)["timestamp"] == expected
