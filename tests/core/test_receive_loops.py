"""A queue's demand for receive loops (core.receive_loops), from what its receives brought."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core.receive_loops import QueueDemand


def test_full_batches_allow_the_concurrency_and_short_ones_more() -> None:
    demand = QueueDemand()
    assert demand.drained and demand.loops_allowed(4) == 4  # before any receive: full
    for _ in range(20):
        demand.received(10)
    assert not demand.drained and demand.loops_allowed(4) == 4
    for _ in range(20):
        demand.received(2)  # what SQS answers below about 1,000 messages
    assert demand.loops_allowed(4) == 20  # as many messages in hand as 4 full loops
    demand.received(0)
    assert demand.drained and demand.loops_allowed(4) == 20  # an empty receive: no size


@given(st.lists(st.integers(0, 10), max_size=60), st.integers(1, 64))
def test_the_loops_allowed_stay_between_the_concurrency_and_ten_times_it(
    counts: list[int], concurrency: int
) -> None:
    demand = QueueDemand()
    for n in counts:
        demand.received(n)
        assert concurrency <= demand.loops_allowed(concurrency) <= 10 * concurrency
        assert demand.drained == (n == 0)
