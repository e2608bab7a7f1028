"""The worker's room for batches that finish on their own (sqsdelay.aws.capacity), and
discovery giving back the room of the queues it drops."""

from __future__ import annotations

import asyncio
from typing import Any

from sqsdelay.aws.capacity import Capacity
from sqsdelay.aws.worker import PAUSING_BATCHES, Worker
from sqsdelay.settings import Settings


def test_holders_wait_for_room_and_a_shrink_waits_for_releases() -> None:
    async def run() -> list[str]:
        cap, done = Capacity(2), []

        async def hold(tag: str, release: asyncio.Event) -> None:
            await cap.acquire()
            done.append(tag)
            await release.wait()
            cap.release()

        gates = [asyncio.Event() for _ in range(4)]
        tasks = [asyncio.create_task(hold(f"t{i}", g)) for i, g in enumerate(gates)]
        await asyncio.sleep(0)
        assert done == ["t0", "t1"] and cap.held == 2
        cap.resize(-1)  # one place fewer: t2 waits for two releases
        gates[0].set()
        await asyncio.sleep(0.01)
        assert done == ["t0", "t1"] and cap.held == 1
        gates[1].set()
        await asyncio.sleep(0.01)
        assert done == ["t0", "t1", "t2"]
        cap.resize(+1)
        await asyncio.sleep(0.01)
        assert done == ["t0", "t1", "t2", "t3"] and cap.held == 2
        for g in gates:
            g.set()
        await asyncio.gather(*tasks)
        assert cap.held == 0
        # a waiter that is cancelled leaves no trace
        full = Capacity(0)
        waiter = asyncio.create_task(full.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        full.resize(1)
        await full.acquire()
        assert full.held == 1
        return done

    asyncio.run(run())


def test_a_queue_dropped_and_added_fifty_times_leaves_the_room_where_it_started() -> None:
    settings = Settings(region="us-east-1", queue_prefix="p-", concurrency=3)
    worker = Worker(settings, ["*"])
    spawned: list[Any] = []

    async def no_problems(_: Any) -> list[str]:
        return []

    worker._problems = no_problems  # type: ignore[method-assign]
    worker._spawn = lambda tg, q: spawned.append(q)  # type: ignore[method-assign]

    async def run() -> None:
        start = worker.pausing_room
        await worker._refresh(None, ["p-steady-delay.fifo"])  # type: ignore[arg-type]
        steady = worker.pausing_room
        assert steady == start + PAUSING_BATCHES * 3
        for _ in range(50):
            await worker._refresh(None, ["p-steady-delay.fifo", "p-flaky-delay.fifo"])  # type: ignore[arg-type]
            assert worker.pausing_room == steady + PAUSING_BATCHES * 3
            await worker._refresh(None, ["p-steady-delay.fifo"])  # type: ignore[arg-type]
        assert worker.pausing_room == steady
        assert len(spawned) == 51  # steady once, flaky each time it came back

    asyncio.run(run())
