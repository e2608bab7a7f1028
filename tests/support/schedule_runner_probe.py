"""The emulator's schedule runner on its own (tests/integration/test_emulator_costs.py runs
this in a process of its own): prints the Scheduler API calls it made while nothing was due,
then once a schedule was, and what fired. moto keeps one store per process, so another
emulator in the test's process would see and fire the same schedules."""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

import boto3

from sqsdelay.core import parking
from sqsdelay.dev.emulator import Emulator

ROLE = "arn:aws:iam::123456789012:role/sqsdelay-scheduler"
DLQ = "arn:aws:sqs:us-east-1:123456789012:dlq"


def _schedule(scheduler: Any, url: str, name: str, fire_ms: int) -> None:
    scheduler.create_schedule(
        **parking.create_schedule_request(
            name=name,
            fire_ms=fire_ms,
            target=parking.ParkTarget("default", ROLE, url, DLQ),
            body=name,
            attributes={},
            group_id="g",
            dedup=f"{name}-{uuid.uuid4().hex}",
        )
    )


def _received(sqs: Any, url: str, timeout: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages"):
            return list(got)
    raise SystemExit(f"the due schedule did not fire within {timeout} s")


def main() -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")  # run alone, too
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    with Emulator() as emulator:
        runner = emulator.runner
        assert runner is not None
        kw: dict[str, Any] = {"endpoint_url": emulator.url, "region_name": "us-east-1"}
        scheduler, sqs = boto3.client("scheduler", **kw), boto3.client("sqs", **kw)
        url = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        now_ms = int(time.time() * 1000)
        _schedule(scheduler, url, "tomorrow", now_ms + 86_400_000)
        time.sleep(1.0)  # five of the runner's rounds: what it does, not a condition awaited
        idle = dict(runner.api_calls)
        _schedule(scheduler, url, "due", now_ms - 1000)
        got = _received(sqs, url, timeout=10)
        runner.stop()  # its round done: what it fired and deleted is counted
        left = scheduler.list_schedules()["Schedules"]
        print(
            json.dumps(
                {
                    "idle_calls": idle,
                    "calls": dict(runner.api_calls),
                    "bodies": [m["Body"] for m in got],
                    "fired": runner.fired,
                    "left": [[s["Name"], s["State"]] for s in left],
                }
            )
        )


if __name__ == "__main__":
    main()
