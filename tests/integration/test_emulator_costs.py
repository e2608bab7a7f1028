"""What the embedded emulator costs of its own (sqsdelay.dev.emulator): its schedule runner
asks the Scheduler API only once a schedule is due, and moto finds a host's service once.
Every test of the suite and every demo runs on it, so its idle cost is paid everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import backends

from sqsdelay.dev.emulator import Emulator

ROOT = Path(__file__).resolve().parents[2]


def test_the_schedule_runner_calls_the_api_only_once_a_schedule_is_due() -> None:
    """Listing and reading every schedule five times a second cost an idle emulator 5 % of a
    core (one in each of the suite's workers, the whole run long). Now: no request while
    nothing is due, a parked message a day out included; the due one fires as before.
    In a process of its own: moto keeps one store per process, so that the suite's emulator
    in this one would see (and fire) the same schedules."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.schedule_runner_probe"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen["idle_calls"] == {}
    assert seen["bodies"] == ["due"] and seen["fired"] == 1
    # one round found it due: the list, both schedules read, the fired one deleted
    assert seen["calls"] == {"ListSchedules": 1, "GetSchedule": 2, "DeleteSchedule": 1}
    assert seen["left"] == [["tomorrow", "ENABLED"]]


def test_moto_finds_a_hosts_service_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto lists its package's folder and tries its URL patterns on every request; the
    emulator keeps the answer per host (a fifth of moto's CPU per SQS request)."""
    listed = {"calls": 0}
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
