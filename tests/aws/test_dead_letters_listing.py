"""The console's dead-letter listing (`operations.dead_letters`) against SQS's receive: a
short poll (WaitTimeSeconds 0) answers from a sample of SQS's servers and may come back
empty while the queue holds messages; a long poll asks them all (issue 58, item 11)."""

from __future__ import annotations

import json
from typing import Any

from sqsdelay.aws import operations
from sqsdelay.core import wire_format
from sqsdelay.settings import Settings


class SampledQueue:
    """An error queue whose short polls miss the messages on the servers they did not
    sample (here: every other short poll, starting with the first); long polls see all."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.visible = list(messages)
        self.waits: list[int] = []
        self.released: list[str] = []

    def get_queue_url(self, QueueName: str, **_: Any) -> dict[str, str]:
        return {"QueueUrl": f"https://sqs.example/123456789012/{QueueName}"}

    def receive_message(self, **params: Any) -> dict[str, Any]:
        wait = int(params.get("WaitTimeSeconds", 0))
        self.waits.append(wait)
        if wait == 0 and len(self.waits) % 2 == 1:
            return {}  # the sampled servers held none of them
        batch = self.visible[: params["MaxNumberOfMessages"]]
        del self.visible[: len(batch)]
        return {"Messages": batch} if batch else {}

    def change_message_visibility_batch(self, QueueUrl: str, Entries: list[Any]) -> None:
        self.released += [e["ReceiptHandle"] for e in Entries]


def dead(i: int, delay_queue: str) -> dict[str, Any]:
    record = json.dumps({"queue": delay_queue, "reason": "destination missing"})
    return {
        "MessageId": f"e-{i}",
        "ReceiptHandle": f"h-{i}",
        "Body": "x",
        "MessageAttributes": {
            wire_format.FAILURE_ATTRIBUTE: {"DataType": "String", "StringValue": record}
        },
        "Attributes": {"SentTimestamp": "1700000000000"},
    }


def test_an_empty_short_poll_does_not_end_the_listing() -> None:
    settings = Settings(region="us-east-1", queue_prefix="t-", error_queue="t-error")
    delay_queue = "t-orders-delay.fifo"
    queue = SampledQueue([dead(i, delay_queue) for i in range(15)])
    found = operations.dead_letters(settings, "orders", client=queue)
    assert sorted(d.message_id for d in found) == sorted(f"e-{i}" for i in range(15))
    assert set(queue.waits) == {operations.LIST_WAIT_SECONDS} and queue.waits[-1] >= 1
    assert len(queue.waits) == 3  # 10, 5, then the empty long poll that ends it
    assert sorted(queue.released) == sorted(f"h-{i}" for i in range(15))
