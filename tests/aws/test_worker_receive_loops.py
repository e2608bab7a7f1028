"""A busy queue's receive loops in the worker (aws/receive_driver.py, following
core/receive_loops.py's rules) against scripted receive answers: a backlog gets extra loops
whether its receives come back full or short (as SQS's do), never more than the pool and
the concurrency allow, and once any loop finds it drained (an empty receive), no extra loop
polls again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from sqsdelay.aws.worker import Worker
from sqsdelay.core.flows import Call, Reply
from sqsdelay.settings import Settings

DEADLINE_S = 30.0  # for a 2-core machine under load: the waits below take ms when idle


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` until it holds; fail, saying `what`, at the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
        await asyncio.sleep(0.005)


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
        driver = worker.driver
        queue = Queue(visible=visible, stop=driver._stop, most=most)
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

        driver._poller = queue  # type: ignore[assignment]
        driver._process = process  # type: ignore[method-assign]
        driver._idle_period = None  # long-poll from the start: no counts
        driver._polls = polls
        loops = worker.queues[0]
        async with asyncio.TaskGroup() as tg:
            driver._spawn(tg, loops)
            await until(done.is_set, f"{visible} messages processed")
            # After the drain: an empty receive came back, every extra loop has ended, and the
            # first loop polls on. A regression that polls again from an extra loop never gets
            # here (its receive waits for the stop): the deadline fails it.
            await until(
                lambda: loops.loops == 1 and queue.after_drained >= 1,
                f"only the first loop polling after the drain (answers {queue.answers})",
            )
            worker.stop()
        return worker, queue

    return asyncio.run(run())


def test_extra_loops_end_once_any_loop_finds_the_backlog_drained() -> None:
    worker, queue = drain(64, most=10)
    # The backlog was polled in parallel, as far as the concurrency allows (3 full batches),
    # and no further. Reaching it takes no timing: the first two receives bring messages
    # whatever the machine's load, each starts a loop, and no loop ends before a receive
    # comes back empty.
    peak = worker.queues[0].peak_loops
    assert peak <= 3, "more loops than the concurrency"
    assert peak == 3, "the backlog never had the loops it may"
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
    peak = worker.queues[0].peak_loops  # all the pool has room for (one poll each)
    assert peak <= 3, "more loops than the polls' pool"
    assert peak == 3, "the backlog never had the loops it may"  # reached, as above
    worker, queue = drain(200, most=2, polls=30)
    assert 3 < worker.queues[0].peak_loops <= 15
    assert sum(queue.answers) == 200 and max(queue.answers) == 2
