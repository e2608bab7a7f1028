"""Helpers for worker tests: an in-process worker in a thread, and a destination consumer."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sqsdelay.settings import Settings
from sqsdelay.worker import Worker


class RunningWorker:
    """`with RunningWorker(settings, ["orders"]) as w:` runs the real worker in a thread."""

    def __init__(self, settings: Settings, queues: list[str], **kwargs: Any) -> None:
        self.worker = Worker(settings, queues, **kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self.worker.run(handle_signals=False))
        except BaseException as exc:  # surfaced in __exit__
            self.error = exc

    def __enter__(self) -> RunningWorker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self.worker.stop)
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "worker did not stop within 30 s"
        if self.error is not None:
            raise self.error


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
