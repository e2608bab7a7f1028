"""The worker's room for batches that finish on their own (aws/receive_driver.py over
core/capacity.py, whose own tests are tests/core/test_capacity.py): discovery giving back the
room of the queues it drops, and a batch that finds no room."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sqsdelay.aws import receive_driver
from sqsdelay.aws.worker import Worker
from sqsdelay.core.receive_loops import PAUSING_BATCHES
from sqsdelay.settings import Settings


def test_a_queue_dropped_and_added_fifty_times_leaves_the_room_where_it_started() -> None:
    settings = Settings(region="us-east-1", queue_prefix="p-", concurrency=3)
    worker = Worker(settings, ["*"])
    spawned: list[Any] = []

    async def no_problems(_: Any) -> list[str]:
        return []

    worker._problems = no_problems  # type: ignore[method-assign]
    worker.driver._spawn = lambda tg, q: spawned.append(q)  # type: ignore[method-assign]

    async def run() -> None:
        start = worker.driver.pausing_room
        await worker._refresh(None, ["p-steady-delay.fifo"])  # type: ignore[arg-type]
        steady = worker.driver.pausing_room
        assert steady == start + PAUSING_BATCHES * 10 * 3
        for _ in range(50):
            await worker._refresh(None, ["p-steady-delay.fifo", "p-flaky-delay.fifo"])  # type: ignore[arg-type]
            assert worker.driver.pausing_room == steady + PAUSING_BATCHES * 10 * 3
            await worker._refresh(None, ["p-steady-delay.fifo"])  # type: ignore[arg-type]
        assert worker.driver.pausing_room == steady
        assert len(spawned) == 51  # steady once, flaky each time it came back

    asyncio.run(run())


def test_a_batch_that_finds_no_room_is_finished_by_its_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Discovery dropped the destination's last queue while its batch was paused: the room
    is 0. The batch's hand-overs are still made, by its own loop, and nothing waits for room
    (a waiting acquire never returned there, and SIGTERM never completed)."""
    settings = Settings(region="us-east-1", queue_prefix="p-", concurrency=3)
    worker = Worker(settings, ["*"])
    assert worker.driver.pausing_room == 0  # nothing found yet, or the last queue dropped
    driven: list[Any] = []

    async def until_pause(flow: Any, caller: Any) -> list[str]:
        return ["a hand-over waiting out its fraction of a second"]

    async def drive(flow: Any, caller: Any, pending: Any = None) -> None:
        driven.append(pending)

    monkeypatch.setattr(receive_driver, "adrive_until_pause", until_pause)
    monkeypatch.setattr(receive_driver, "adrive", drive)
    worker.batches.flow = lambda *a, **k: "flow"  # type: ignore[method-assign,assignment,return-value]
    worker.driver._caller = object()  # type: ignore[assignment]
    raw = [{"MessageId": "m1", "ReceiptHandle": "r1", "Body": "b"}]
    queue = receive_driver.QueueLoops(worker.resolver.trio_of_delay_queue("p-orders-delay.fifo"))

    asyncio.run(asyncio.wait_for(worker.driver._process(queue, raw, 3), timeout=5))
    assert driven == [["a hand-over waiting out its fraction of a second"]]
    assert worker.driver._pausing.held == 0
