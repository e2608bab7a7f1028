"""The idle rule (core.idle): an empty delay queue checked instead of long-polled never
makes a message late. A virtual clock: the counts lag by any amount up to the setting."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core.idle import check_period, holds_something, margin_seconds


@given(
    cycle=st.integers(1, 900),
    lag=st.floats(0, 300),
    lag_share=st.floats(0, 1),
    sent_after=st.floats(0, 10_000),
)
def test_a_message_sent_to_an_empty_queue_is_polled_for_before_it_is_visible(
    cycle: int, lag: float, lag_share: float, sent_after: float
) -> None:
    period = check_period(cycle, lag)
    if period is None:  # the rule is off: the queue is long-polled as always
        assert cycle - lag - margin_seconds(cycle) <= 0
        return
    # The queue was empty at the check at 0; checks at 0, period, 2 period, ...
    counted_at = sent_after + lag * lag_share  # SQS's counts show it by then
    seen = math.ceil(counted_at / period) * period  # the first check that sees it
    visible = sent_after + cycle  # the queue's DelaySeconds
    assert seen <= visible - margin_seconds(cycle) + 1e-6


def test_production_figures() -> None:
    assert check_period(900, 60) == 810  # one check per 810 s instead of a 20 s long poll
    assert 3600 / 810 <= 3600 / 20 / 10  # the bar: at most a tenth of the long polls
    assert check_period(60, 60) is None and check_period(2, 0) == 1.5


def test_any_count_or_a_missing_one_is_something() -> None:
    zeros = {
        "ApproximateNumberOfMessages": "0",
        "ApproximateNumberOfMessagesNotVisible": "0",
        "ApproximateNumberOfMessagesDelayed": "0",
    }
    assert not holds_something(zeros)
    for name in zeros:
        assert holds_something({**zeros, name: "1"})
        assert holds_something({k: v for k, v in zeros.items() if k != name})
        assert holds_something({**zeros, name: "x"})
