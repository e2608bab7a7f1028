"""Helpers for worker tests: an in-process worker in a thread, and a destination consumer."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqsdelay.aws.worker import WorkerThread
from sqsdelay.core import wire_format

# The worker in a background thread is part of the package (the demo uses it too).
RunningWorker = WorkerThread


def load_far_off(sqs: Any, delay_queue_url: str, count: int) -> None:
    """`count` messages straight into a delay queue, each due in about three years: every
    pass of the worker requeues them (a backlog that never drains)."""
    far = {wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": "100000000"}}
    for start in range(0, count, 10):
        entries = [
            {
                "Id": str(i),
                "MessageBody": "far",
                "MessageAttributes": far,
                "MessageGroupId": f"far-{start + i}",
                "MessageDeduplicationId": f"far-{start + i}",
            }
            for i in range(min(10, count - start))
        ]
        sqs.send_message_batch(QueueUrl=delay_queue_url, Entries=entries)


@dataclass
class Delivery:
    body: str
    at: float
    attributes: dict[str, Any]
    message_id: str
    system: dict[str, str] = field(default_factory=dict)  # MessageGroupId, ...


@dataclass
class Collector:
    """Consumes a queue and notes when each message arrived. It waits in long polls, which
    the embedded emulator answers as soon as a message is sent or becomes visible: arrivals
    are timed to the millisecond without a request every few ms (short polls every 20 ms
    were a quarter of a core per waiting test)."""

    sqs: Any
    url: str
    got: list[Delivery] = field(default_factory=list)

    def poll(self, wait: int = 0) -> None:
        resp = self.sqs.receive_message(
            QueueUrl=self.url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=wait,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        )
        now = time.time()
        messages = resp.get("Messages", [])
        for m in messages:
            attrs = m.get("MessageAttributes", {})
            self.got.append(Delivery(m["Body"], now, attrs, m["MessageId"], m["Attributes"]))
        if messages:  # one request, so that the next poll starts sooner
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
            ]
            self.sqs.delete_message_batch(QueueUrl=self.url, Entries=entries)

    def until(self, count: int, timeout: float) -> list[Delivery]:
        deadline = time.monotonic() + timeout
        while len(self.got) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.got)} of {count} messages within {timeout} s")
            self.poll(wait=1)
        return self.got

    def until_all(self, bodies: set[str], timeout: float) -> list[Delivery]:
        """Until each of `bodies` has arrived; duplicates do not count towards them (where a
        test allows them, `until(n)` could end at n deliveries with one still missing)."""
        deadline = time.monotonic() + timeout
        while missing := bodies - {d.body for d in self.got}:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(missing)} of {len(bodies)} missing after {timeout} s")
            self.poll(wait=1)
        return self.got

    def quiet_for(self, seconds: float) -> None:
        """Keep collecting for a while (to catch duplicates)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.poll(wait=1)
