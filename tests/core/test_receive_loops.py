"""A queue's demand for receive loops (core/receive_loops.py), from what its receives
brought. The worker's loops that follow it are tests/aws/test_worker_receive_loops.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core.receive_loops import QueueDemand


def test_full_batches_allow_the_concurrency_and_short_ones_more() -> None:
    demand = QueueDemand()
    assert demand.drained and demand.loops_allowed(4) == 4  # before any receive: full
    for _ in range(20):
        demand.received(10, 0.0)
    assert not demand.drained and demand.loops_allowed(4) == 4
    for _ in range(20):
        demand.received(2, 0.0)  # what SQS answers below about 1,000 messages
    assert demand.loops_allowed(4) == 20  # as many messages in hand as 4 full loops
    demand.received(0, 0.0)
    assert demand.drained and demand.loops_allowed(4) == 20  # an empty receive: no size


def test_after_an_extra_loop_polled_in_vain_only_a_full_batch_starts_another() -> None:
    """A trickle: each long poll brings the one message that arrived, so each would start an
    extra loop that ends in an empty 20 s poll. After one has, for one wait, only a full
    batch shows a backlog."""
    demand = QueueDemand()
    demand.received(1, now=0.0)
    assert demand.backlogged  # more may wait: an extra loop may start
    demand.extra_loop_found_it_empty(now=20.0, wait_s=20)
    demand.received(1, now=25.0)
    assert not demand.backlogged and not demand.drained
    demand.received(10, now=26.0)  # full: more is waiting whatever happened before
    assert demand.backlogged
    demand.received(2, now=41.0)  # the wait is over
    assert demand.backlogged
    demand.received(0, now=61.0)
    assert demand.drained and not demand.backlogged


@given(st.lists(st.integers(0, 10), max_size=60), st.integers(1, 64))
def test_the_loops_allowed_stay_between_the_concurrency_and_ten_times_it(
    counts: list[int], concurrency: int
) -> None:
    demand = QueueDemand()
    for n in counts:
        demand.received(n, 0.0)
        assert concurrency <= demand.loops_allowed(concurrency) <= 10 * concurrency
        assert demand.drained == (n == 0)
