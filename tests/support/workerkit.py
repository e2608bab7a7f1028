"""Helpers for worker tests: an in-process worker in a thread, and a destination consumer."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqsdelay.aws.worker import WorkerThread

# The worker in a background thread is part of the package (the demo uses it too).
RunningWorker = WorkerThread


@dataclass
class Delivery:
    body: str
    at: float
    attributes: dict[str, Any]
    message_id: str


@dataclass
class Collector:
    """Short-polls a queue every few ms, so delivery times are measured precisely."""

    sqs: Any
    url: str
    got: list[Delivery] = field(default_factory=list)

    def poll(self) -> None:
        resp = self.sqs.receive_message(
            QueueUrl=self.url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=0,
            MessageAttributeNames=["All"],
        )
        now = time.time()
        for m in resp.get("Messages", []):
            self.got.append(
                Delivery(m["Body"], now, m.get("MessageAttributes", {}), m["MessageId"])
            )
            self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=m["ReceiptHandle"])

    def until(self, count: int, timeout: float) -> list[Delivery]:
        deadline = time.monotonic() + timeout
        while len(self.got) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.got)} of {count} messages within {timeout} s")
            self.poll()
            time.sleep(0.02)
        return self.got

    def quiet_for(self, seconds: float) -> None:
        """Keep collecting for a while (to catch duplicates)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.poll()
            time.sleep(0.05)
