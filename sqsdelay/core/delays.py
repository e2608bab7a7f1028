"""Delay arithmetic and sender routing (pure)."""

import math
from datetime import datetime, timedelta
from decimal import Decimal

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
    if (delay is None) == (deliver_at is None):
        raise InvalidDelay("give exactly one of a delay or a deliver_at time")
    if deliver_at is not None:
        if deliver_at.tzinfo is None:
            raise InvalidDelay(
                "deliver_at must be timezone-aware, e.g. datetime.now(timezone.utc) + ..."
            )
        # A time in the past means "now": deliver without delay.
        return max(0, math.ceil(deliver_at.timestamp() - now))
    if isinstance(delay, bool) or not isinstance(delay, int | float | Decimal | timedelta):
        raise InvalidDelay(
            f"delay must be a number of seconds or a timedelta, not {type(delay).__name__}"
        )
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if isinstance(seconds, float | Decimal) and not math.isfinite(seconds):
        raise InvalidDelay(f"delay must be a finite number of seconds, not {seconds}")
    if seconds < 0:
        raise InvalidDelay(f"delay must not be negative (got {seconds} s)")
    return math.ceil(seconds)


def parse_delay(text: str) -> int:
    """Parse a CLI delay: a non-negative number of seconds, fractions rounded up."""
    try:
        value = Decimal(text.strip())
    except ArithmeticError:
        raise InvalidDelay(f"delay {text!r} is not a number of seconds") from None
    return delay_seconds(value)


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
