import contextlib
import math
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import delays
from sqsdelay.core.delays import (
    delay_milliseconds,
    delay_seconds,
    parse_delay,
    parse_exact_delay,
    route,
)
from sqsdelay.core.taskiq_delay import label_milliseconds
from sqsdelay.errors import InvalidDelay, MessageDelayTooLong


@pytest.mark.parametrize(
    ("delay", "expected"),
    [
        (0, 0),
        (1, 1),
        (0.001, 1),
        (899.5, 900),
        (900, 900),
        (Decimal("1.000001"), 2),
        (timedelta(minutes=15, microseconds=1), 901),
        (timedelta(days=365), 31_536_000),
    ],
)
def test_delay_rounds_up(delay: object, expected: int) -> None:
    assert delay_seconds(delay) == expected  # type: ignore[arg-type]


def test_deliver_at_rounds_up_and_past_is_now() -> None:
    now = 1_700_000_000.0
    at = datetime.fromtimestamp(now + 10.2, tz=UTC)
    assert delay_seconds(deliver_at=at, now=now) == 11
    assert delay_seconds(deliver_at=datetime.fromtimestamp(now - 5, tz=UTC), now=now) == 0


@pytest.mark.parametrize(
    "bad", [-1, -0.5, float("nan"), float("inf"), True, "10", None, timedelta(seconds=-1)]
)
def test_bad_delays_are_refused(bad: object) -> None:
    with pytest.raises(InvalidDelay):
        delay_seconds(bad)  # type: ignore[arg-type]


def test_naive_deliver_at_is_refused() -> None:
    with pytest.raises(InvalidDelay, match="timezone-aware"):
        delay_seconds(deliver_at=datetime(2030, 1, 1), now=0)


@pytest.mark.parametrize("text", ["abc", "", "1e", "-3", "nan"])
def test_parse_delay_rejects(text: str) -> None:
    with pytest.raises(InvalidDelay):
        parse_delay(text)


def test_parse_delay_accepts_fractions() -> None:
    assert parse_delay("1.2") == 2
    assert parse_delay(" 3600 ") == 3600


def test_support_matrix_on_the_sender() -> None:
    assert route(900, max_native_delay=900, unrestricted=False) == "direct"
    assert route(900, max_native_delay=900, unrestricted=True) == "direct"
    assert route(901, max_native_delay=900, unrestricted=True) == "delay-queue"
    with pytest.raises(MessageDelayTooLong, match="SQSDELAY_UNRESTRICTED"):
        route(901, max_native_delay=900, unrestricted=False)


@given(
    delay=st.integers(min_value=0, max_value=10**9),
    native=st.integers(min_value=1, max_value=900),
    unrestricted=st.booleans(),
)
def test_routing_never_sends_more_than_the_native_limit_as_delayseconds(
    delay: int, native: int, unrestricted: bool
) -> None:
    try:
        where = route(delay, max_native_delay=native, unrestricted=unrestricted)
    except MessageDelayTooLong:
        assert not unrestricted and delay > 900
        return
    if where == "direct":
        assert delay <= (native if unrestricted else 900) <= 900
    else:
        assert unrestricted and delay > native


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False))
def test_rounding_is_never_early_and_never_a_second_late(seconds: float) -> None:
    d = delay_seconds(seconds)
    exact = Fraction(seconds)  # exact arithmetic: float addition would round tiny values away
    assert exact <= d < exact + 1


@given(st.decimals(min_value=0, max_value=10**9, places=6, allow_nan=False))
def test_milliseconds_are_rounded_up_and_agree_with_the_seconds(delay: Decimal) -> None:
    ms = delay_milliseconds(delay)
    assert ms >= delay * 1000 > ms - 1
    assert delay_seconds(delay) == -(-ms // 1000)


def test_milliseconds_of_floats_timedeltas_and_times() -> None:
    # Exactly rounded up: the float 2.3 is a little below 2.3 s, the float 1.1 a little above.
    assert delay_milliseconds(2.3) == 2300 and delay_milliseconds(1.1) == 1101
    assert (
        delay_milliseconds(1e-300) == 1
        and delay_milliseconds(timedelta(days=1, microseconds=1)) == 86_400_001
    )
    now = 1_700_000_000.25
    at = datetime.fromtimestamp(now + 7.5, UTC)
    assert delay_milliseconds(deliver_at=at, now=now) == 7500


# Issue 58 (8): a Decimal's exact value costs work exponential in its exponent
# (`Fraction(Decimal("1e-4000000"))` took 1.85 CPU-s), and the sender, the CLI and taskiq's
# label all read delays through `delay_milliseconds`.
_HUGE_EXPONENT = 100


class RefusingDecimal(Decimal):
    """A Decimal whose exact value may not be computed when its exponent is huge."""

    def _refuse(self) -> None:
        exponent = self.as_tuple().exponent
        assert not isinstance(exponent, int) or abs(exponent) <= _HUGE_EXPONENT, (
            f"exact arithmetic on a delay with the exponent {exponent}"
        )

    def as_integer_ratio(self) -> tuple[int, int]:
        self._refuse()
        return super().as_integer_ratio()

    def __int__(self) -> int:
        self._refuse()
        return super().__int__()

    def __ceil__(self) -> int:
        self._refuse()
        return super().__ceil__()


def _refusing_fraction(*args: Any) -> Fraction:
    """`Fraction`, refusing a Decimal of a huge exponent: the work that was exponential."""
    for arg in args:
        if isinstance(arg, Decimal):
            RefusingDecimal(arg)._refuse()
    return Fraction(*args)


def _expected_ms(delay: Decimal) -> int:
    """The exact meaning, rounded up to the millisecond, for a delay of a small exponent."""
    return math.ceil(Fraction(Decimal(delay)) * 1000)


decimals_of_any_exponent = st.builds(
    lambda digits, exponent: RefusingDecimal((0, tuple(digits), exponent)),
    st.lists(st.integers(0, 9), min_size=1, max_size=30),
    st.integers(-(10**9), 10**9),
)


@given(decimals_of_any_exponent)
def test_any_decimal_delay_is_decided_without_arithmetic_on_its_exponent(delay: Decimal) -> None:
    try:
        ms = delay_milliseconds(delay)
    except InvalidDelay as exc:
        assert delay >= 10**15, exc  # only what is beyond any date is refused
        assert "beyond any date" in str(exc) and "SQSDELAY_MAX_DELAY_SECONDS" in str(exc)
        return
    if not delay:
        assert ms == 0
    elif delay.adjusted() < -3:  # a positive fraction of a millisecond: one, never early
        assert ms == 1
    else:  # a bounded exponent: the exact value, rounded up, as before
        assert ms == _expected_ms(delay)


delay_texts = st.builds(
    lambda sign, whole, fraction, exponent: f"{sign}{whole}{fraction}e{exponent}",
    st.sampled_from(["", "+", "-"]),
    st.integers(0, 10**6),
    st.sampled_from(["", "."]) | st.integers(0, 999).map(lambda f: f".{f}"),
    st.integers(-(10**9), 10**9),
)


@given(delay_texts)
def test_any_delay_text_is_decided_within_bounded_work(text: str) -> None:
    """The CLI's and taskiq's readings of a text: a delay or InvalidDelay, with no exact
    arithmetic on a huge exponent and a few milliseconds of CPU at most."""
    readers = (parse_exact_delay, parse_delay, label_milliseconds)
    with mock.patch.object(delays, "Fraction", _refusing_fraction):
        for read in readers:
            start = time.process_time()
            with contextlib.suppress(InvalidDelay):
                read(text)
            assert time.process_time() - start < 0.1, (read.__name__, text)


@pytest.mark.parametrize("text", ["1e-40000000", "1e-4000000", "0.5E-999999999", "+1e-3000000"])
def test_a_tiny_delay_of_a_huge_exponent_is_one_millisecond_at_once(text: str) -> None:
    start = time.process_time()
    assert parse_exact_delay(text) == Decimal(text)  # kept exact for the sender
    assert delay_milliseconds(Decimal(text)) == 1  # never early: rounded up
    assert parse_delay(text) == 1
    assert label_milliseconds(text) == 1
    assert time.process_time() - start < 0.1


@pytest.mark.parametrize("text", ["1e40000000", "1e15", "999999999999999999.5"])
def test_a_huge_delay_is_refused_as_beyond_any_date_at_once(text: str) -> None:
    with pytest.raises(InvalidDelay, match="beyond any date"):
        delay_milliseconds(Decimal(text))
    with pytest.raises(InvalidDelay, match="beyond any date"):
        parse_exact_delay(text)


@pytest.mark.parametrize(
    ("delay", "ms"),
    [
        (Decimal("0.0005"), 1),
        (Decimal("0.001"), 1),
        (Decimal("0.0010000000000000000000000000000000001"), 2),  # more digits than a context
        (Decimal("99999999999999.9991"), 99_999_999_999_999_999 + 1),
        (Decimal("3600"), 3_600_000),
        (Decimal("-0"), 0),
        (Decimal("0E+5000000"), 0),
    ],
)
def test_decimal_delays_keep_their_exact_meaning_whatever_the_context(
    delay: Decimal, ms: int
) -> None:
    with localcontext() as context:
        context.prec = 3  # a caller's context does not round the delay
        assert delay_milliseconds(delay) == ms
