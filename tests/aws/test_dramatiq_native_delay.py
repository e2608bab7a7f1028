"""Dramatiq delays within the native delay, which dramatiq-sqs sends itself as
`DelaySeconds = delay // 1000`: sqsdelay's broker rounds them up first, so that none runs
early. No SQS: dramatiq-sqs's own `enqueue` is replaced by one that records its delay."""

from __future__ import annotations

from typing import Any

import dramatiq
import dramatiq_sqs
import pytest

from sqsdelay.dramatiq import SQSBroker, native_delay
from sqsdelay.settings import Settings


@pytest.mark.parametrize(
    ("delay", "sent"),
    [
        (2563, 3000),  # dramatiq-sqs alone: DelaySeconds 2, 0.56 s early
        (1, 1000),
        (999, 1000),
        (1000, 1000),
        (1001, 2000),
        (900_000, 900_000),
        (None, None),
        (0, 0),
        (-5000, -5000),  # as dramatiq-sqs treats it (SQS refuses it)
        (1500.5, 1500.5),  # likewise (boto3 refuses a float DelaySeconds)
    ],
)
def test_a_native_delay_is_rounded_up_to_whole_seconds(delay: Any, sent: Any) -> None:
    assert native_delay(delay) == sent


def test_dramatiq_sqs_never_sends_a_delay_shorter_than_asked() -> None:
    for delay in range(1, 900_001, 7):
        seconds = native_delay(delay) // 1000  # what dramatiq-sqs makes DelaySeconds
        assert delay <= seconds * 1000 < delay + 1000, delay


def test_the_broker_gives_dramatiq_sqs_the_rounded_delay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int | None] = []

    def enqueue(self: Any, message: Any, *, delay: int | None = None) -> Any:
        seen.append(delay)
        return message

    monkeypatch.setattr(dramatiq_sqs.SQSBroker, "enqueue", enqueue)
    broker = SQSBroker(
        namespace="t", region_name="us-east-1", settings=Settings(max_native_delay_seconds=3)
    )
    message: dramatiq.Message[Any] = dramatiq.Message(
        queue_name="default", actor_name="a", args=(), kwargs={}, options={}
    )
    for delay in (None, 2563, 2900, 3000):
        broker.enqueue(message, delay=delay)
    assert seen == [None, 3000, 3000, 3000]
