from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core.delays import delay_milliseconds, delay_seconds, parse_delay, route
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
