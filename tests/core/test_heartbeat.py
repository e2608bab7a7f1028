"""The heartbeat's sizing and the worker's backpressure (core.heartbeat)."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from sqsdelay.core.heartbeat import Recent, first_beat_in, lagging, receive_visibility, retry_in


def test_at_ease_the_short_visibility_stands_and_a_lagging_loop_asks_for_more() -> None:
    assert receive_visibility(3, 60, lag_s=0.005, batch_s=0.2) == 3
    # lagging 0.8 s with 1.5 s batches: the first beat at half of 7 s lands after 2.3 s at most
    assert receive_visibility(3, 60, lag_s=0.8, batch_s=1.5) == 7
    assert receive_visibility(3, 60, lag_s=40, batch_s=1) == 60  # never above the timeout
    assert not lagging(1.4, 3) and lagging(1.6, 3) and lagging(0.6, 1)


@given(st.integers(1, 30), st.integers(1, 43_200), st.floats(0, 100), st.floats(0, 100))
def test_the_first_beat_lands_in_time_whenever_the_timeout_allows(
    short: int, full: int, lag: float, batch: float
) -> None:
    v = receive_visibility(short, max(short, full), lag, batch)
    assert short <= v <= max(short, full)
    if v < full:  # not capped: half of it covers the lag and the call, twice the lag
        assert v / 2 >= 2 * lag + batch


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 10)), max_size=50))
def test_recent_is_the_largest_sample_of_the_window(steps: list[tuple[float, float]]) -> None:
    recent, now, seen = Recent(window_s=2.0), 0.0, []
    for gap, value in steps:
        now += gap
        recent.add(now, value)
        seen.append((now, value))
        expected = max((v for t, v in seen if t >= now - 2.0), default=0.0)
        assert recent.largest(now) == expected


@given(st.integers(1, 30), st.floats(0, 10), st.floats(0, 10), st.floats(0, 10))
# read exactly at half the visibility: the beat can only fire at its floor, 0.05 s later
@example(short=1, lag=0.0, batch=1.0, since=1.0)
def test_the_first_beat_lands_within_the_sized_visibility(
    short: int, lag: float, batch: float, since: float
) -> None:
    """The answer read `since` seconds ago: the beat, a lag late and a batch's time long,
    lands within the visibility sized for that lag, with a lag to spare; and a retry comes
    sooner than the first beat would."""
    v = receive_visibility(short, 43_200, lag, batch)
    due = since + first_beat_in(v, lag, since, 0.05)
    if since <= v / 2 - lag:  # read in time for its beat at all
        # the answer waited a lag, the beat fires a lag late: one more lag to spare; a beat
        # read within the floor of its time fires at the floor, up to that much later
        assert due + lag + batch + lag + lag <= v + 0.05 + 1e-9
    assert first_beat_in(v, lag, since, 0.05) >= 0.05
    assert 0.05 <= retry_in(v, lag, 0.05) <= max(0.05, v / 4)
