"""When a batch's first heartbeat fires (aws/receive_driver.py, core/heartbeat.py): counted
from when the receive's answer was read, not from when the heartbeat's task first runs. On a loop
that lags, the task runs a lag after the answer, and the broker's visibility clock started
before the answer: a beat counted from the task's start landed after the visibility had run
out (a saturated machine's `extend_failed`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from sqsdelay.aws.worker import Worker
from sqsdelay.core.flows import Call, Reply
from sqsdelay.core.outcomes import BatchEnds
from sqsdelay.core.received import from_boto
from sqsdelay.settings import Settings


def beats(
    answer_read_ago: float, short: int, *, lag: float = 0.0, fail_first: bool = False
) -> list[float]:
    """Seconds from the heartbeat task's start to its first ChangeMessageVisibilityBatch and,
    with `fail_first` (the first extension refused), to its retry, for a batch whose receive
    answer was read `answer_read_ago` seconds before, on a loop that lagged `lag` lately."""
    settings = Settings(
        region="us-east-1", max_native_delay_seconds=1, visibility_timeout_seconds=30
    )
    worker = Worker(settings, ["orders"])
    asked: list[float] = []
    beaten = asyncio.Event()

    wanted = 2 if fail_first else 1

    async def caller(calls: Sequence[Call]) -> list[Reply]:
        asked.extend(time.monotonic() for c in calls if c.api == "ChangeMessageVisibilityBatch")
        if len(asked) >= wanted:
            beaten.set()
        if fail_first and len(asked) == 1:
            failed = {"Id": "0", "SenderFault": False, "Code": "InternalError"}
            return [Reply({"Successful": [], "Failed": [failed]}) for _ in calls]
        return [Reply({"Successful": [{"Id": "0"}], "Failed": []}) for _ in calls]

    async def run() -> list[float]:
        worker.driver._caller = caller  # type: ignore[assignment]
        if lag:
            worker._lag.add(time.monotonic(), lag)
        received = [from_boto({"MessageId": "m", "ReceiptHandle": "h", "Body": "b"})]
        started = time.monotonic()
        beat = asyncio.create_task(
            worker.driver._keep_hidden(
                worker.queues[0].trio,
                received,
                BatchEnds(),
                short,
                in_hand=started - answer_read_ago,
            )
        )
        await asyncio.wait_for(beaten.wait(), timeout=30)
        beat.cancel()
        return [at - started for at in asked]

    return asyncio.run(run())


def first_beat_after(answer_read_ago: float, short: int, lag: float = 0.0) -> float:
    return beats(answer_read_ago, short, lag=lag)[0]


def test_the_first_beat_counts_from_the_answer_not_from_the_task() -> None:
    # A 10 s visibility: due 5 s after the answer was read. Read 4 s before the task ran
    # (a loop that lagged), the beat fires about 1 s into the task, not 5 s.
    assert 0.95 <= first_beat_after(4.0, short=10) < 3.5
    # Read longer ago than half the visibility: at once (one lag sample's wait), not 5 s.
    assert first_beat_after(6.0, short=10) < 3.5
    # The answer read just now: half the visibility, never sooner.
    assert 0.95 <= first_beat_after(0.0, short=2) < 3.5


def test_a_lagging_loop_beats_earlier_by_its_lag_and_retries_a_failed_beat_sooner() -> None:
    # Lagging 2 s lately: the first beat at 5 - 2 = 3 s, not 5 s.
    assert 2.95 <= first_beat_after(0.0, short=10, lag=2.0) < 4.5
    # The first beat refused: retried a quarter of the visibility less the lag later
    # (0.5 s), not 2.5 s.
    first, retry = beats(0.0, short=10, lag=2.0, fail_first=True)[:2]
    assert 0.45 <= retry - first < 2.0
