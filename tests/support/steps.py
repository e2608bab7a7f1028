"""Driving the batch step with the stub (`tests/support/stub.py`): a virtual clock, messages
as a delay queue hands them out, and `run`, one batch through `core.step.handle`."""

from __future__ import annotations

from typing import Any

from sqsdelay.core import wire_format
from sqsdelay.core.decision import Limits
from sqsdelay.core.flows import drive
from sqsdelay.core.outcomes import BatchEnds
from sqsdelay.core.parking import ParkTarget, min_park_after_seconds
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.core.received import Received
from sqsdelay.core.step import StepConfig, StepState, handle
from tests.support.stub import StubAws

T = 1_700_000_000_000
Q = QueueTrio("orders", "orders", "error")
# A FIFO destination's staging queue, drained by the forward
QF = QueueTrio("orders.fifo", "orders.fifo", "error", forwards=True)
TARGET = ParkTarget(
    group="sqsdelay",
    role_arn="arn:aws:iam::123456789012:role/sqsdelay-scheduler",
    delay_queue_url="https://sqs.stub/123456789012/orders-delay.fifo",
    dead_letter_arn="arn:aws:sqs:us-east-1:123456789012:error",
)
PARK_AFTER = min_park_after_seconds(900)
CONFIG = StepConfig(limits=Limits(park_after_seconds=PARK_AFTER), call_timeout=10)
DAY = 86_400


class Clock:
    def __init__(self) -> None:
        self.t = T / 1000 + 0.5

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def message(i: int, delay: Any, *, attrs: dict[str, Any] | None = None, **system: str) -> Received:
    attributes: dict[str, Any] = dict(attrs or {})
    if delay is not None:
        attributes[wire_format.DELAY_ATTRIBUTE] = {"DataType": "String", "StringValue": str(delay)}
    return Received(
        f"id{i}",
        f"rh{i}",
        f"body {i}",
        attributes,
        {
            "SentTimestamp": str(T),
            "ApproximateFirstReceiveTimestamp": str(T),
            "ApproximateReceiveCount": "1",
            "MessageGroupId": f"g{i}",
            "MessageDeduplicationId": f"d{i}",
            **system,
        },
    )


def run(
    received: list[Received],
    stub: StubAws,
    *,
    config: StepConfig = CONFIG,
    state: StepState | None = None,
    target: ParkTarget | None = TARGET,
    clock: Clock | None = None,
    budget: float = 48,
    queues: QueueTrio = Q,
) -> BatchEnds:
    clock = clock or Clock()
    stub.advance, stub.clock = clock.advance, clock
    flow = handle(
        received,
        queues=queues,
        park_target=target,
        config=config,
        state=state or StepState(),
        clock=clock,
        local_ms=int(clock() * 1000),
        deadline=clock() + budget,
    )
    return drive(flow, stub)
