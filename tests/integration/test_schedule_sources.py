"""Moving off beat in one command: a Celery app's beat_schedule, a taskiq broker's schedule
labels and a Dramatiq actor's `periodic` are synced (`sqsdelay schedule sync --celery-app |
--taskiq-broker | --dramatiq-module`) into a group, and the emulator's schedule runner, on a
virtual clock in January 2027, fires them through real Celery, taskiq and Dramatiq workers.
No beat or scheduler process runs. The suite's own runner fires the rates too, on the real
clock (2026): those runs are told apart by their task id (NAME@<scheduled time>)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sqsdelay.dev.emulator import ScheduleRunner
from tests.conftest import wait_for
from tests.support.cli import run

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
APPS = "tests.integration.recurring_apps"
ROLE = "arn:aws:iam::123456789012:role/sqsdelay-scheduler"
JANUARY = datetime(2027, 1, 1, tzinfo=UTC)


class Stack:
    def __init__(self, moto_url: str, folder: Path) -> None:
        self.moto_url = moto_url
        self.name = f"r{uuid.uuid4().hex[:8]}"
        self.group = f"{self.name}-recurring"
        self.out = folder / "ran.txt"
        self.env = {
            **os.environ,
            "SQSDELAY_ENDPOINT_URL": moto_url,
            "SQSDELAY_REGION": "us-east-1",
            "SQSDELAY_ERROR_QUEUE": f"{self.name}-error",
            "SQSDELAY_SCHEDULER_ROLE_ARN": ROLE,
            "SQSDELAY_RECURRING_GROUP": self.group,
            "RECURRING_TEST_NAME": self.name,
            "RECURRING_TEST_ENDPOINT": moto_url,
            "RECURRING_TEST_OUT": str(self.out),
            "PYTHONPATH": str(ROOT),
        }
        self.procs: list[subprocess.Popen[bytes]] = []

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = run(self.env, *args)
        assert done.returncode == 0, done.stderr
        return done

    def start(self, *command: str) -> None:
        log = open(self.out.with_suffix(".log"), "a")  # noqa: SIM115 (closed with the process)
        self.procs.append(
            subprocess.Popen(
                [sys.executable, "-m", *command],
                env=self.env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )

    def runs(self) -> list[str]:
        """What the worker ran in 2027 (the virtual clock's), sorted: `tag id` lines."""
        lines = self.out.read_text().splitlines() if self.out.exists() else []
        return sorted(line for line in lines if "@2026" not in line)

    def step(self, hours: int) -> None:
        """The emulator's runner on a virtual clock, an hour a step, from JANUARY."""
        runner = ScheduleRunner(self.moto_url, groups=frozenset({self.group}))
        for h in range(hours + 1):
            runner.fire_due((JANUARY + timedelta(hours=h)).timestamp())
        assert runner.dead_lettered == 0

    def settled(self, expected: list[str]) -> None:
        wait_for(lambda: len(self.runs()) >= len(expected), timeout=60)
        time.sleep(1.5)  # a duplicate would have come by now
        assert self.runs() == expected

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.fixture
def stack(moto_url: str, tmp_path: Path) -> Iterator[Stack]:
    s = Stack(moto_url, tmp_path)
    try:
        yield s
    finally:
        s.stop()


def test_celery_beat_schedule_fires_through_a_celery_worker(stack: Stack) -> None:
    queue = f"{stack.name}-celery"  # Celery's SQS name: queue_name_prefix + "celery"
    stack.cli("install", queue)
    app = f"{APPS}.celery_beat:app"
    dry = stack.cli("schedule", "sync", "--celery-app", app, "--dry-run")
    assert dry.stdout.splitlines() == [
        "+ january-nights  cron(0 3 * 1 ? *) Europe/Berlin",
        "+ daily  rate(1 day) UTC",
        "dry run: nothing changed (0 unchanged)",
    ]
    assert stack.cli("schedule", "sync", "--celery-app", app).stdout.endswith(
        "2 changed, 0 unchanged\n"
    )
    stack.start("celery", "-A", f"{APPS}.celery_beat", "worker", "--pool", "solo",
                "--without-gossip", "--without-mingle", "--without-heartbeat")  # fmt: skip
    stack.step(48)  # 2027-01-01 00:00Z to 01-03 00:00Z
    stack.settled([
        "cron january-nights@2027-01-01T02:00:00Z",  # 03:00 CET
        "cron january-nights@2027-01-02T02:00:00Z",
        "rate daily@2027-01-01T00:00:00Z",  # at once (no start), then every day
        "rate daily@2027-01-02T00:00:00Z",
        "rate daily@2027-01-03T00:00:00Z",
    ])  # fmt: skip
    # the same app synced again changes nothing
    assert stack.cli("schedule", "sync", "--celery-app", app).stdout == "0 changed, 2 unchanged\n"


def test_taskiq_schedule_labels_fire_through_a_taskiq_worker(stack: Stack) -> None:
    stack.cli("install", stack.name)
    broker = f"{APPS}.taskiq_labels:broker"
    synced = stack.cli("schedule", "sync", "--taskiq-broker", broker)
    assert synced.stdout.splitlines() == [
        "+ tick-0  cron(0 3 * 1 ? *) Europe/Berlin",
        "+ tq-daily  rate(1 day) UTC",
        "2 changed, 0 unchanged",
    ]
    stack.start("taskiq", "worker", broker, "--workers", "1", "--shutdown-timeout", "5")
    stack.step(48)
    stack.settled([
        "cron tick-0@2027-01-01T02:00:00Z",
        "cron tick-0@2027-01-02T02:00:00Z",
        "rate tq-daily@2027-01-01T00:00:00Z",
        "rate tq-daily@2027-01-02T00:00:00Z",
        "rate tq-daily@2027-01-03T00:00:00Z",
    ])  # fmt: skip


def test_a_dramatiq_periodic_actor_fires_through_a_dramatiq_worker(stack: Stack) -> None:
    stack.cli("install", f"{stack.name}_default")  # dramatiq-sqs's <namespace>_<queue>
    module = f"{APPS}.dramatiq_periodic"
    synced = stack.cli("schedule", "sync", "--dramatiq-module", module)
    assert synced.stdout.splitlines()[0] == "+ d-nights  cron(0 3 * 1 ? *) Europe/Berlin"
    stack.start("dramatiq", module, "--processes", "1", "--threads", "1")
    stack.step(48)
    stack.settled(["cron", "cron"])  # 01-01 and 01-02, 03:00 in Berlin
