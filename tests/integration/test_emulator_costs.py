"""What the embedded emulator costs of its own (sqsdelay.dev.emulator): its schedule runner
asks the Scheduler API only once a schedule is due, and moto finds a host's service once.
Every test of the suite and every demo runs on it, so its idle cost is paid everywhere."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

import boto3
import pytest
from moto import backends

from sqsdelay.core import parking
from sqsdelay.dev.emulator import Emulator
from tests.conftest import wait_for

ROLE = "arn:aws:iam::123456789012:role/sqsdelay-scheduler"


def _schedule(scheduler: Any, url: str, fire_ms: int, body: str) -> None:
    target = parking.ParkTarget("default", ROLE, url, "arn:aws:sqs:us-east-1:123456789012:dlq")
    scheduler.create_schedule(
        **parking.create_schedule_request(
            name=f"s{uuid.uuid4().hex[:8]}",
            fire_ms=fire_ms,
            target=target,
            body=body,
            attributes={},
            group_id="g",
            dedup=body,
        )
    )


def test_the_schedule_runner_calls_the_api_only_once_a_schedule_is_due() -> None:
    """Listing and reading every schedule five times a second cost an idle emulator 5 % of a
    core (one in each of the suite's workers, the whole run long). Now: no request while
    nothing is due, a parked message a day out included; the due one fires as before."""
    with Emulator() as emulator:
        assert emulator.runner is not None
        calls: Counter[str] = Counter()
        runner_client = emulator.runner._scheduler
        runner_client.meta.events.register(
            "before-call.scheduler", lambda model, **_: calls.update([model.name])
        )
        kw: dict[str, Any] = {"endpoint_url": emulator.url, "region_name": "us-east-1"}
        scheduler, sqs = boto3.client("scheduler", **kw), boto3.client("sqs", **kw)
        url = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        now_ms = int(time.time() * 1000)
        _schedule(scheduler, url, now_ms + 86_400_000, "tomorrow")
        time.sleep(1.0)  # five of the runner's rounds: what it does, not a condition awaited
        assert calls == Counter()
        _schedule(scheduler, url, now_ms - 1000, "due")
        got = wait_for(lambda: sqs.receive_message(QueueUrl=url).get("Messages"), timeout=10)
        assert [m["Body"] for m in got] == ["due"]
        assert calls["ListSchedules"] >= 1 and calls["DeleteSchedule"] == 1
        left = scheduler.list_schedules()["Schedules"]
        assert len(left) == 1 and left[0]["State"] == "ENABLED"  # tomorrow's


def test_moto_finds_a_hosts_service_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto lists its package's folder and tries its URL patterns on every request; the
    emulator keeps the answer per host (a fifth of moto's CPU per SQS request)."""
    listed = Counter[str]()
    original = backends.list_of_moto_modules

    def counted() -> Any:
        listed["calls"] += 1
        return original()

    monkeypatch.setattr(backends, "list_of_moto_modules", counted)
    with Emulator(schedules=False) as emulator:
        sqs = boto3.client("sqs", endpoint_url=emulator.url, region_name="eu-west-3")
        sqs.create_queue(QueueName="first")
        before = listed["calls"]
        for i in range(5):
            sqs.create_queue(QueueName=f"more-{i}")
        assert listed["calls"] == before  # the host was found once
        names = {u.rsplit("/", 1)[1] for u in sqs.list_queues()["QueueUrls"]}
        assert {"first", "more-4"} <= names
