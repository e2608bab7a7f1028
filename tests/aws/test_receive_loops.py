"""A busy queue's receive loops (aws/worker.py) against scripted receive answers: a backlog
gets extra loops, and once any loop finds it drained, no extra loop polls again."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from sqsdelay.aws.worker import Worker
from sqsdelay.core.flows import Call, Reply
from sqsdelay.settings import Settings


class Queue:
    """Hands out `visible` messages, up to 10 a receive, a few ms after each call. Once they
    are gone a receive waits, as a long poll on SQS does, until the worker stops."""

    def __init__(self, visible: int, stop: asyncio.Event) -> None:
        self.visible = visible
        self.stop = stop
        self.answers: list[int] = []  # messages per receive, in the order they returned
        self.after_drained = 0  # receives started once a receive had come back not full

    async def __call__(self, calls: Sequence[Call]) -> list[Reply]:
        [call] = calls
        assert call.api == "ReceiveMessage"
        if any(n < 10 for n in self.answers):
            self.after_drained += 1
        await asyncio.sleep(0.002)
        if not self.visible:
            await self.stop.wait()
        n = min(10, self.visible)
        self.visible -= n
        self.answers.append(n)
        return [Reply({"Messages": [{"Body": str(i)} for i in range(n)]})]


def test_extra_loops_end_once_any_loop_finds_the_backlog_drained() -> None:
    settings = Settings(region="us-east-1", max_native_delay_seconds=1, concurrency=3)

    async def run() -> tuple[Worker, Queue]:
        worker = Worker(settings, ["orders"])
        queue = Queue(visible=64, stop=worker._stop)
        processed, active, done = [0], [0], asyncio.Event()

        async def process(_trio: Any, raw: list[dict[str, Any]]) -> None:
            active[0] += 1
            await asyncio.sleep(0.02)  # a batch takes longer than a receive
            active[0] -= 1
            processed[0] += len(raw)
            if processed[0] == 64 and not active[0]:
                done.set()  # each loop has gone on from its last batch: polled, or ended

        worker._poller = queue  # type: ignore[assignment]
        worker._process = process  # type: ignore[method-assign]
        worker._idle_period = None  # long-poll from the start: no counts
        worker._polls = 3
        async with asyncio.TaskGroup() as tg:
            worker._spawn(tg, worker.queues[0])
            await done.wait()
            worker.stop()
        return worker, queue

    worker, queue = asyncio.run(run())
    assert worker.queues[0].peak_loops == 3  # the backlog was polled in parallel
    assert sum(queue.answers) == 64
    # Only the first loop polls on (unless its poll was already waiting), in a long poll that
    # waits for the next messages: no extra loop that finished its batch after the drain
    # polled into the empty queue. Before they checked, each did: 3 here.
    assert queue.after_drained <= 1, queue.answers
