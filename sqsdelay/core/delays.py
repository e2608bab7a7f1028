"""Delay arithmetic and sender routing (pure)."""

import math
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from sqsdelay.core import quotas
from sqsdelay.core.types import Route
from sqsdelay.errors import InvalidDelay, MessageDelayTooLong

DelayLike = int | float | Decimal | timedelta


def delay_seconds(
    delay: DelayLike | None = None, *, deliver_at: datetime | None = None, now: float = 0.0
) -> int:
    """Whole seconds to wait, rounded up so that a message is never early.

    `now` is the local epoch time in seconds and is only used with `deliver_at`.
    """
    return whole_seconds(delay_milliseconds(delay, deliver_at=deliver_at, now=now))


def whole_seconds(milliseconds: int) -> int:
    """Milliseconds as whole seconds, rounded up so that SQS's DelaySeconds is never early;
    a time already past is 0. The one place a delay becomes whole seconds."""
    return -(-max(0, milliseconds) // 1000)


def delay_milliseconds(
    delay: DelayLike | None = None, *, deliver_at: datetime | None = None, now: float = 0.0
) -> int:
    """As `delay_seconds`, in milliseconds (rounded up)."""
    if (delay is None) == (deliver_at is None):
        raise InvalidDelay("give exactly one of a delay or a deliver_at time")
    if deliver_at is not None:
        if deliver_at.tzinfo is None:
            raise InvalidDelay(
                "deliver_at must be timezone-aware, e.g. datetime.now(timezone.utc) + ..."
            )
        # A time in the past means "now": deliver without delay.
        return max(0, math.ceil(Fraction(deliver_at.timestamp() - now) * 1000))
    if isinstance(delay, bool) or not isinstance(delay, int | float | Decimal | timedelta):
        raise InvalidDelay(
            f"delay must be a number of seconds or a timedelta, not {type(delay).__name__}"
        )
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if isinstance(seconds, float | Decimal) and not math.isfinite(seconds):
        raise InvalidDelay(f"delay must be a finite number of seconds, not {seconds}")
    if seconds < 0:
        raise InvalidDelay(f"delay must not be negative (got {seconds} s)")
    # Exact arithmetic: a float product could round a tiny delay down to 0, which is early.
    exact = _exact(delay) if isinstance(delay, timedelta) else Fraction(seconds)
    return math.ceil(exact * 1000)


def _exact(delay: timedelta) -> Fraction:
    return Fraction(delay.days * 86_400 + delay.seconds) + Fraction(delay.microseconds, 10**6)


def parse_delay(text: str) -> int:
    """Parse a CLI delay: a non-negative number of seconds, fractions rounded up."""
    try:
        value = Decimal(text.strip())
    except ArithmeticError:
        raise InvalidDelay(f"delay {text!r} is not a number of seconds") from None
    return delay_seconds(value)


def parse_exact_delay(text: str) -> Decimal:
    """Parse a CLI delay kept exact (the sender rounds it up to the millisecond)."""
    try:
        value = Decimal(text.strip())
    except ArithmeticError:
        raise InvalidDelay(f"delay {text!r} is not a number of seconds") from None
    delay_milliseconds(value)  # refuses a negative or infinite one
    return value


def route(delay: int, *, max_native_delay: int, unrestricted: bool) -> Route:
    """Where a delay goes: straight to the destination, or through its delay queue.

    With unrestricted delays disabled the sender only uses SQS's own delay, up to 900 s
    (the support matrix of the reference transport).
    """
    if delay < 0:
        raise InvalidDelay(f"delay must not be negative (got {delay} s)")
    if not unrestricted:
        if delay > quotas.MAX_NATIVE_DELAY_SECONDS:
            raise MessageDelayTooLong(
                f"a delay of {delay} s is above SQS's {quotas.MAX_NATIVE_DELAY_SECONDS} s limit "
                "and unrestricted delays are disabled; set SQSDELAY_UNRESTRICTED=true on the "
                "sender and give the receiver a delay queue"
            )
        return "direct"
    return "direct" if delay <= max_native_delay else "delay-queue"
