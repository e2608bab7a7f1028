"""Delay arithmetic and sender routing (pure)."""

import math
from datetime import datetime, timedelta
from decimal import ROUND_CEILING, Context, Decimal, InvalidOperation
from fractions import Fraction

from sqsdelay.core import quotas
from sqsdelay.core.types import Route
from sqsdelay.errors import InvalidDelay, MessageDelayTooLong

DelayLike = int | float | Decimal | timedelta

# 10**15 s (31.7 million years) is beyond any date (timedelta's range ends at 8.64e13 s) and
# any SQSDELAY_MAX_DELAY_SECONDS: a number this large is refused before any arithmetic on
# it. A Decimal's exact value costs work exponential in its exponent ("1e-40000000" would
# be a 40-million-digit denominator), so a Decimal is bounded by its exponent first.
_BEYOND_ANY_DATE_DIGITS = 15
_MILLISECOND = Decimal("0.001")
# Enough digits for any delay below 10**15 s to the millisecond, whatever the caller's
# decimal context; a result that needs more raises (InvalidOperation) rather than rounding.
_EXACT = Context(prec=_BEYOND_ANY_DATE_DIGITS + 10, traps=[InvalidOperation])


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
    # Decimal's own test: math.isfinite would make 1e40000000 a float, infinite.
    finite = seconds.is_finite() if isinstance(seconds, Decimal) else math.isfinite(seconds)
    if not finite:
        raise InvalidDelay(f"delay must be a finite number of seconds, not {seconds}")
    if seconds < 0:
        raise InvalidDelay(f"delay must not be negative (got {seconds} s)")
    if seconds >= 10**_BEYOND_ANY_DATE_DIGITS:  # a comparison: cheap for any exponent
        raise InvalidDelay(
            f"a delay of {seconds:.6g} s is beyond any date: give a number of seconds of at "
            "most SQSDELAY_MAX_DELAY_SECONDS (was it given in milliseconds?)"
        )
    if isinstance(seconds, Decimal):
        return _decimal_milliseconds(seconds)
    # Exact arithmetic: a float product could round a tiny delay down to 0, which is early.
    exact = _exact(delay) if isinstance(delay, timedelta) else Fraction(seconds)
    return math.ceil(exact * 1000)


def _decimal_milliseconds(seconds: Decimal) -> int:
    """A finite Decimal of 0 to 10**15 s in milliseconds, rounded up, with work bounded by
    its digits, never by its exponent: anything positive below a millisecond is 1 ms (what
    exact arithmetic gives, without computing 10**40000000), the rest is rounded up to the
    millisecond in a context of its own (at most 18 digits)."""
    if not seconds:
        return 0
    if seconds.adjusted() < -3:  # 0 < seconds < 0.001
        return 1
    rounded = seconds.quantize(_MILLISECOND, rounding=ROUND_CEILING, context=_EXACT)
    return int(rounded.scaleb(3, context=_EXACT))


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
