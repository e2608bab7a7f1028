"""A queue's receive loops: its demand for them (core/receive_loops.py), from what its
receives brought; and a busy queue's loops in the worker (aws/worker.py) against scripted
receive answers: a backlog gets extra loops whether its receives come back full or short
(as SQS's do), and once any loop finds it drained (an empty receive), no extra loop polls
again."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.aws.worker import Worker
from sqsdelay.core.flows import Call, Reply
from sqsdelay.core.receive_loops import QueueDemand
from sqsdelay.settings import Settings


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


class Queue:
    """Hands out `visible` messages, up to `most` a receive, a few ms after each call. Once
    they are gone a receive waits 5 ms, a long poll's wait, and comes back empty; once one
    has, a receive waits until the worker stops (the first loop's long poll goes on)."""

    def __init__(self, visible: int, stop: asyncio.Event, most: int = 10) -> None:
        self.visible = visible
        self.stop = stop
        self.most = most
        self.answers: list[int] = []  # messages per receive, in the order they returned
        self.after_drained = 0  # receives started once a receive had come back empty

    async def __call__(self, calls: Sequence[Call]) -> list[Reply]:
        [call] = calls
        # every receive asks for a full batch: how full it comes back is the broker's doing
        assert call.api == "ReceiveMessage" and call.params["MaxNumberOfMessages"] == 10
        if 0 in self.answers:
            self.after_drained += 1
        drained = 0 in self.answers
        await asyncio.sleep(0.002)
        if not self.visible:
            await (self.stop.wait() if drained else asyncio.sleep(0.005))
        n = min(self.most, self.visible)
        self.visible -= n
        self.answers.append(n)
        return [Reply({"Messages": [{"Body": str(i)} for i in range(n)]})]


def drain(visible: int, most: int, polls: int = 3) -> tuple[Worker, Queue]:
    """A worker with a concurrency of three loops (and room for `polls` long polls) drains
    `visible` messages, `most` a receive at most, and stops once every loop has gone on from
    its last batch."""
    settings = Settings(region="us-east-1", max_native_delay_seconds=1, concurrency=3)

    async def run() -> tuple[Worker, Queue]:
        worker = Worker(settings, ["orders"])
        queue = Queue(visible=visible, stop=worker._stop, most=most)
        processed, active, done = [0], [0], asyncio.Event()
        batches = iter(range(1000))

        async def process(_trio: Any, raw: list[dict[str, Any]], _visibility: int) -> None:
            active[0] += 1
            # A batch takes longer than a receive, some much longer: some loops are still
            # busy when another finds the queue drained.
            await asyncio.sleep(0.15 if next(batches) % 2 else 0.02)
            active[0] -= 1
            processed[0] += len(raw)
            if processed[0] == visible and not active[0]:
                done.set()  # each loop has gone on from its last batch: polled, or ended

        worker._poller = queue  # type: ignore[assignment]
        worker._process = process  # type: ignore[method-assign]
        worker._idle_period = None  # long-poll from the start: no counts
        worker._polls = polls
        async with asyncio.TaskGroup() as tg:
            worker._spawn(tg, worker.queues[0])
            await done.wait()
            await asyncio.sleep(0.2)  # the loops' polls after the drain come back empty
            worker.stop()
        return worker, queue

    return asyncio.run(run())


def test_extra_loops_end_once_any_loop_finds_the_backlog_drained() -> None:
    worker, queue = drain(64, most=10)
    assert worker.queues[0].peak_loops == 3  # the backlog was polled in parallel
    assert sum(queue.answers) == 64
    # Once a receive came back empty, only the first loop polls on: no extra loop that
    # finished its batch after that polled into the empty queue. Before they checked, each
    # polled once more.
    assert queue.after_drained <= 1, queue.answers
    assert worker.queues[0].loops == 0  # stopped


def test_short_batches_get_more_loops_than_full_ones() -> None:
    """SQS answers with 1..3 of the 10 asked for while hundreds wait: a short batch is no
    sign that the queue is drained (4dad03e's rule polled this backlog with one loop, 2
    messages a receive), and the concurrency counts full batches in hand: batches of 2 may
    have up to five times the loops (core.receive_loops)."""
    worker, queue = drain(64, most=2)
    assert worker.queues[0].peak_loops == 3  # all the pool has room for
    worker, queue = drain(200, most=2, polls=30)
    assert 3 < worker.queues[0].peak_loops <= 15
    assert sum(queue.answers) == 200 and max(queue.answers) == 2
