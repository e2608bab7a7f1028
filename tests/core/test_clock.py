"""The broker's clock minus ours (core/clock.py): a median of recent first receives that
starts again when the local clock jumps. How the decisions use it under a skewed clock is
test_decision.py's."""

from __future__ import annotations

from sqsdelay.core.clock import ClockOffset

T = 1_700_000_000_000


def test_clock_offset_is_a_median_that_follows_a_jump_of_the_local_clock() -> None:
    off = ClockOffset()
    assert off.estimate() is None
    for s in [1000, 1005, 995, 1002, 1300, 998, 1001]:  # latency varies by a few hundred ms
        off.observe(T + s, T)
    assert off.estimate() == 1001
    # The local clock is stepped 10 s ahead: the broker is now 9 s behind it. Kept, the old
    # samples would put the broker's time 10 s ahead of itself (a redelivery out early).
    off.observe(T + 1000, T + 10_000)
    assert off.estimate() == -9000
    off.observe(T + 1000, T - 20_000)  # and 20 s back
    assert off.estimate() == 21_000


def test_only_the_recent_samples_count() -> None:
    off = ClockOffset(window=5, jump_ms=1000)
    for s in [900, 900, 900, 1100, 1100, 1100, 1100, 1100]:  # a drift, never a jump
        off.observe(T + s, T)
    assert off.estimate() == 1100  # the three of 900 left the window


def test_a_jump_is_more_than_jump_ms_from_the_estimate() -> None:
    off = ClockOffset(jump_ms=500)
    for s in [0, 0, 0]:
        off.observe(T + s, T)
    off.observe(T + 500, T)  # within: a slow sample, kept with the others
    assert off.estimate() == 0
    off.observe(T + 501, T)  # beyond: the samples before it are dropped
    assert off.estimate() == 501
