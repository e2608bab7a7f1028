"""A heartbeat that missed its cancellation still stops (Python 3.11's asyncio.wait_for can
swallow one that lands as its call completes: the burst benchmark hung on it)."""

from __future__ import annotations

import asyncio
import contextlib

from sqsdelay.aws.worker import _cancelling, _stopped


def test_a_beat_that_swallowed_its_cancellation_still_ends() -> None:
    beats = 0

    async def beat() -> None:
        nonlocal beats
        while not _cancelling():
            beats += 1
            with contextlib.suppress(asyncio.CancelledError):  # as wait_for may swallow it
                await asyncio.sleep(0.01)

    async def main() -> None:
        task = asyncio.create_task(beat())
        await asyncio.sleep(0.05)
        await asyncio.wait_for(_stopped(task), timeout=2)
        assert task.done()

    asyncio.run(main())
    assert beats >= 2


def test_stopping_a_beat_does_not_swallow_the_stoppers_own_cancellation() -> None:
    async def beat() -> None:
        await asyncio.sleep(10)

    async def stopper(task: asyncio.Task[None]) -> None:
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        await _stopped(task)

    async def main() -> bool:
        task = asyncio.create_task(beat())
        outer = asyncio.create_task(stopper(task))
        try:
            await outer
        except asyncio.CancelledError:
            return True
        return False

    assert asyncio.run(main())
