"""BatchRunner's reads of the pause tags (aws/batch_runner.py), driven call by call: a read
in flight is not made again by the batches that start meanwhile, unless the queue was never
read (issue 63, 4: a burst's batches read a busy queue's tags dozens of times a period)."""

from __future__ import annotations

import pytest

from sqsdelay.aws.batch_runner import BatchRunner
from sqsdelay.aws.queue_urls import QueueResolver
from sqsdelay.core import pause
from sqsdelay.core.flows import Call, Fault, Flow, Reply
from sqsdelay.settings import Settings

PAUSED = {pause.PAUSED_TAG: "2026-11-28T12:00:00Z"}


class Clock:
    t = 1000.0

    def __call__(self) -> float:
        return self.t


def runner(clock: Clock) -> BatchRunner:
    s = Settings(endpoint_url="http://127.0.0.1:1", region="us-east-1", pause_check_seconds=30)
    return BatchRunner(s, QueueResolver(s), delete=True, clock=clock)


def reads(calls: list[Call]) -> list[str | None]:
    assert all(c.api == "ListQueueTags" for c in calls)
    return [c.queue for c in calls]


def answer(flow: Flow[list[str]], tags: dict[str, str]) -> list[str]:
    with pytest.raises(StopIteration) as done:
        flow.send([Reply({"Tags": tags})])
    resumed: list[str] = done.value.value
    return resumed


def test_a_read_in_flight_is_not_made_again_once_the_queue_was_read() -> None:
    clock = Clock()
    r = runner(clock)
    # Never read: each batch reads, so that none hands over before the state is known.
    first, second = r.refresh_pauses(["orders"]), r.refresh_pauses(["orders"])
    assert reads(next(first)) == reads(next(second)) == ["orders"]
    answer(first, PAUSED)
    answer(second, PAUSED)
    assert r.state.pauses.paused("orders")
    clock.t += 30  # a period on: due for a read
    reading = r.refresh_pauses(["orders"])
    assert reads(next(reading)) == ["orders"]
    meanwhile = r.refresh_pauses(["orders", "billing"])  # billing: never read
    assert reads(next(meanwhile)) == ["billing"]  # orders goes by the state it knows
    assert r.state.pauses.paused("orders")
    assert answer(reading, {}) == ["orders"]  # resumed
    answer(meanwhile, {})
    clock.t += 30
    again = r.refresh_pauses(["orders"])  # the read is over: the next period reads again
    assert reads(next(again)) == ["orders"]


def test_a_read_given_up_is_no_longer_in_flight() -> None:
    clock = Clock()
    r = runner(clock)
    answer_first = r.refresh_pauses(["orders"])
    next(answer_first)
    answer(answer_first, {})
    clock.t += 30
    abandoned = r.refresh_pauses(["orders"])
    next(abandoned)
    abandoned.close()  # the driver gave up on the batch
    retried = r.refresh_pauses(["orders"])
    assert reads(next(retried)) == ["orders"]


def test_a_faulted_read_does_not_count_as_read() -> None:
    """Until one read has answered, each batch reads: a fault leaves the state unknown."""
    clock = Clock()
    r = runner(clock)
    failed = r.refresh_pauses(["orders"])
    next(failed)
    with pytest.raises(StopIteration):
        failed.send([Reply(fault=Fault("AccessDenied", "no", 403))])
    clock.t += 30
    reading = r.refresh_pauses(["orders"])
    assert reads(next(reading)) == ["orders"]
    meanwhile = r.refresh_pauses(["orders"])  # never answered: read it too
    assert reads(next(meanwhile)) == ["orders"]
    answer(reading, PAUSED)
    answer(meanwhile, PAUSED)
    clock.t += 30
    reading = r.refresh_pauses(["orders"])
    assert reads(next(reading)) == ["orders"]
    with pytest.raises(StopIteration):  # answered once: the batches meanwhile go by it
        next(r.refresh_pauses(["orders"]))
