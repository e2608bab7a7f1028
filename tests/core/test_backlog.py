"""The worker's backlog (core.backlog): its visible part as counted, and its requeues that come
back within the next minute, against a model that keeps every requeue with its time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core.backlog import HORIZON_MS, Backlog

CYCLE_MS = 900_000


@given(
    st.lists(st.tuples(st.integers(0, 2_000_000), st.integers(0, 50)), max_size=40),
    st.integers(0, 4_000_000),
)
def test_due_is_the_requeues_that_become_visible_within_the_horizon(
    steps: list[tuple[int, int]], later: int
) -> None:
    backlog = Backlog(CYCLE_MS)
    now, total, sent = 0, 0, []  # the model: (visible at, count) of every reading
    for gap, n in steps:
        now, total = now + gap, total + n
        backlog.requeued(now, total)
        sent.append((now + CYCLE_MS, n))
        assert backlog.due(now) == sum(c for at, c in sent if now <= at <= now + HORIZON_MS)
    when = now + later
    assert backlog.due(when) == sum(c for at, c in sent if when <= at <= when + HORIZON_MS)


def test_the_counter_is_read_not_added_and_visible_is_the_last_count() -> None:
    backlog = Backlog(CYCLE_MS)
    backlog.requeued(0, 7)
    backlog.requeued(10, 7)  # nothing new since
    assert backlog.due(CYCLE_MS - HORIZON_MS - 1) == 0  # not within the next minute yet
    assert backlog.due(CYCLE_MS - HORIZON_MS) == 7
    assert backlog.due(CYCLE_MS + 1) == 0  # visible by now: counted as visible, or received
    backlog.counted("a", 5)
    backlog.counted("b", 3)
    backlog.counted("a", 2)
    assert backlog.visible_total() == 5
    backlog.forget("b")
    assert backlog.visible_total() == 2
