"""A heartbeat stops when it is told to (Python 3.11's asyncio.wait_for can swallow a
cancellation that lands as its call completes: the burst benchmark hung on it)."""

from __future__ import annotations

import asyncio
from typing import Any

from sqsdelay.aws.callers import AsyncCaller
from sqsdelay.aws.receive_driver import _stopped
from sqsdelay.core.flows import Call, Reply


def test_a_call_that_completes_as_its_task_is_cancelled_still_raises() -> None:
    """The interleaving that lost a heartbeat's cancellation: the answer arrives in the same
    turn of the loop as the cancel. asyncio.wait_for (3.11) returns the answer; the caller
    must not."""
    outer: asyncio.Task[Reply] | None = None

    class Client:
        async def get_queue_url(self, **_: Any) -> dict[str, str]:
            assert outer is not None
            outer.cancel()  # lands while wait_for waits for this very answer
            return {"QueueUrl": "u"}

    async def main() -> str:
        nonlocal outer
        caller = AsyncCaller({"sqs": Client()})
        outer = asyncio.create_task(caller._one(Call("sqs", "GetQueueUrl", {}, timeout=5)))
        try:
            await outer
        except asyncio.CancelledError:
            return "cancelled"
        return "answered"

    assert asyncio.run(main()) == "cancelled"


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
