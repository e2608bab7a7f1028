"""taskiq's `delay` label and where it sends a task (pure).

A taskiq broker gets its labels as the kicker serialised them (`taskiq.labels.prepare_label`:
`with_labels(delay=3600)` arrives as the string "3600", `delay=2.5` as "2.5"); code that
builds a `BrokerMessage` itself may pass numbers. Either is read exactly, to the millisecond
rounded up, so that no task runs early (taskiq-aio-sqs rounds "2.5" to DelaySeconds 2).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Literal

from sqsdelay.core import delays
from sqsdelay.errors import InvalidDelay

# A delay that no date can hold (timedelta's range): refused before any arithmetic on it.
_BEYOND_ANY_DATE_SECONDS = Decimal(timedelta.max.days) * 86_400
_HOW_TO = "give with_labels(delay=<seconds>) a number of seconds of 0 or more"


@dataclass(frozen=True)
class TaskiqRoute:
    """How a kicked task is sent: by taskiq-aio-sqs with SQS's own `DelaySeconds`
    (`native`, `delay_seconds` rounded up), or through sqsdelay (`sqsdelay`, to the
    millisecond)."""

    how: Literal["native", "sqsdelay"]
    delay_ms: int
    delay_seconds: int


def label_milliseconds(value: object) -> int:
    """The `delay` label in milliseconds, rounded up. No label, an empty one or a zero is no
    delay (taskiq-aio-sqs treats a falsy label so). Raises `InvalidDelay`, saying what to
    give, for anything that is not a finite number of seconds of 0 or more."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise InvalidDelay(
            f"taskiq's delay label is a {type(value).__name__}, not a number of seconds: " + _HOW_TO
        )
    try:
        seconds = Decimal(value.strip()) if isinstance(value, str) else Decimal(value)
    except InvalidOperation:
        raise InvalidDelay(
            f"taskiq's delay label {str(value)[:40]!r} is not a number of seconds: " + _HOW_TO
        ) from None
    if not seconds.is_finite():  # NaN too, which no comparison takes (sNaN raises)
        raise InvalidDelay(f"taskiq's delay label {seconds} is not a finite number: " + _HOW_TO)
    if seconds > _BEYOND_ANY_DATE_SECONDS:
        raise InvalidDelay(
            f"taskiq's delay label of {seconds:.6g} s is beyond any date: give a delay of at "
            "most SQSDELAY_MAX_DELAY_SECONDS"
        )
    try:  # the project's one reading of a delay: finite, not negative, ms rounded up
        return delays.delay_milliseconds(seconds)
    except InvalidDelay as exc:
        raise InvalidDelay(f"taskiq's delay label: {exc}; " + _HOW_TO) from None


def taskiq_route(value: object, *, max_native_delay: int, fifo: bool) -> TaskiqRoute:
    """Where a task with the `delay` label `value` goes. No delay: taskiq-aio-sqs sends it.
    A delay within the native delay into a standard queue: taskiq-aio-sqs sends it with
    `DelaySeconds` rounded up. Anything longer, even by a fraction of a second, and any
    delay into a FIFO queue (which takes no per-message delay): through sqsdelay."""
    ms = label_milliseconds(value)
    seconds = delays.whole_seconds(ms)
    if ms == 0:
        return TaskiqRoute("native", 0, 0)
    if fifo:
        return TaskiqRoute("sqsdelay", ms, seconds)
    where = delays.route(seconds, max_native_delay=max_native_delay, unrestricted=True)
    return TaskiqRoute("native" if where == "direct" else "sqsdelay", ms, seconds)


def cancellable(delay_ms: int, *, max_native_delay: int) -> bool:
    """Whether a task kicked with this delay can be cancelled: only what goes through a delay
    queue has a registry record (and can be parked). Within the native delay the sender sends
    it with SQS's own `DelaySeconds` (a FIFO queue: its staging queue's), which nothing can
    take back. A delay queue holds every message for a whole cycle, so routing a short delay
    through it to make it cancellable would make it up to a cycle late."""
    seconds = delays.whole_seconds(delay_ms)
    where = delays.route(seconds, max_native_delay=max_native_delay, unrestricted=True)
    return where == "delay-queue"


def deduplication_id(given: str | None, retries: object) -> str | None:
    """The deduplication id the sqsdelay route sends a kick with (None: the kick has none).
    taskiq-aio-sqs's `MessageDeduplicationId` (`use_task_id_for_deduplication`: the task id)
    as it is, so that a repeated kick is dropped whichever route each took, as taskiq-aio-sqs
    alone drops one. A retry (taskiq's `_retries` label, set by its retry middlewares) keeps
    its task id: under that id the destination would drop a retry due within five minutes
    of the run it retries, so it goes under the id and its retry count, hashed (64 hex
    digits, within SQS's 128), one key per retry."""
    if given is None or retries in (None, "", 0, "0"):
        return given
    return hashlib.sha256(f"{given}|retry:{retries}".encode()).hexdigest()
