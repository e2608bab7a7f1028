"""Celery on SQS through sqsdelay, against a real Celery worker process (`celery -A ...
worker`, solo pool) and the sqsdelay worker, both on the moto server, with a 2 s cycle."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import median
from typing import Any
from urllib.parse import urlparse

import boto3
import pytest

from sqsdelay.errors import ConfigError, InvalidDelay, MessageTooLarge
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.integration.celery_app import make_app
from tests.support import handovers
from tests.support.cli import run
from tests.support.workerkit import Collector, RunningWorker

pytestmark = pytest.mark.slow
CYCLE = 2
ROOT = Path(__file__).resolve().parents[2]
# Late by less than 5 s (a task held by Celery shows in queue_holds and in a second run
# instead). How late exactly is a figure (record_property, docs/benchmarks.md), not a bar
# asserted here: on a machine loaded by other work the Celery worker waits for a core
# (1.48 s seen beside two busy loops; 2.30 s and 2.77 s in fresh-clone `make test` runs,
# 3.28 s in CI at load 15). A cycle (2 s) late is the sqsdelay worker's own figures' to show
# (Stack.assert_no_hop_late), which a busy machine cannot move.
LATE_BOUND = 5.0
CELERY_WORKER = [sys.executable, "-m", "celery", "-A", "tests.integration.celery_app", "worker"]


@dataclass
class Stack:
    app: Any  # the publisher: a Celery app with sqsdelay configured
    settings: Settings
    queue: str  # the Celery queue's SQS name (Celery's prefix + "celery")
    queue_url: str
    out: Path
    env: dict[str, str]
    sqs: Any
    events: Path  # the sqsdelay worker's, every hop's delay.requeued among them
    checked: int = 0  # how many of them assert_no_hop_late has checked

    def assert_no_hop_late(self) -> None:
        """No hop of the sqsdelay worker since the last call was late (handovers)."""
        events = handovers.read(self.events)
        new, self.checked = events[self.checked :], len(events)
        handovers.assert_no_hop_late(new, cycle=CYCLE)

    def ran(self) -> dict[str, list[float]]:
        runs: dict[str, list[float]] = defaultdict(list)
        if self.out.exists():
            for line in self.out.read_text().splitlines():
                tag, at = line.split()
                runs[tag].append(float(at))
        return runs

    def counts(self, url: str | None = None) -> dict[str, int]:
        """The queue's messages: visible, in flight and in SQS's own delay."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        names.append("ApproximateNumberOfMessagesDelayed")
        got = self.sqs.get_queue_attributes(QueueUrl=url or self.queue_url, AttributeNames=names)
        return {k.removeprefix("ApproximateNumberOf"): int(v) for k, v in got["Attributes"].items()}

    def queue_holds(self, url: str | None = None) -> int:
        return sum(self.counts(url).values())

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run(self.env, *args)


@pytest.fixture(scope="module")
def stack(moto_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prefix = f"c{uuid.uuid4().hex[:8]}-"
    queue = f"{prefix}celery"
    common: dict[str, Any] = {
        "endpoint_url": moto_url,
        "region": "us-east-1",
        "max_native_delay_seconds": CYCLE,
        "registry": "dynamodb",
        "registry_table": f"{prefix}scheduled",
        "error_queue": f"{prefix}error",
    }
    settings = Settings(**common)
    sqs = boto3.client("sqs", endpoint_url=moto_url, region_name="us-east-1")
    env = {
        **os.environ,
        **{f"SQSDELAY_{k.upper()}": str(v) for k, v in common.items()},
        "SQSDELAY_WAIT_TIME_SECONDS": "1",
        "PYTHONPATH": str(ROOT),
    }
    # As the README says: the Celery queue's SQS name, its prefix included (and a FIFO one).
    fifo = f"{prefix}jobs.fifo"
    installed = subprocess.run(
        [sys.executable, "-m", "sqsdelay", "install", queue, fifo], env=env, capture_output=True
    )
    assert installed.returncode == 0, installed.stderr
    urls = {queue: sqs.get_queue_url(QueueName=queue)["QueueUrl"]}
    # A Celery user's visibility timeout, shorter than the countdowns: without sqsdelay the
    # Celery worker holds such a task, and SQS hands it out again every 4 s.
    sqs.set_queue_attributes(QueueUrl=urls[queue], Attributes={"VisibilityTimeout": "4"})
    out = tmp_path_factory.mktemp("celery") / "ran.txt"
    events = out.parent / "sqsdelay-events.jsonl"
    broker = f"sqs://testing:testing@127.0.0.1:{urlparse(moto_url).port}"
    env.update(
        {"CELERY_TEST_BROKER": broker, "CELERY_TEST_PREFIX": prefix, "CELERY_TEST_OUT": str(out)}
    )
    os.environ["CELERY_TEST_OUT"] = str(out)  # the publisher's own task code (unused)
    app = make_app(broker, prefix, **common)
    celery = subprocess.Popen(
        [
            *CELERY_WORKER,
            "--pool",
            "solo",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--queues",
            "celery,jobs.fifo",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "sqsdelay", "worker", queue, fifo],
        env={**env, "SQSDELAY_LOG_FILE": str(events), "SQSDELAY_LOG_LEVEL": "DEBUG"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    s = Stack(app, settings, queue, urls[queue], out, env, sqs, events)
    try:
        app.send_task("record", args=["warm-up"])  # the Celery worker is consuming
        wait_for(lambda: "warm-up" in s.ran(), timeout=60)
        yield s
    finally:
        os.environ.pop("CELERY_TEST_OUT", None)
        for proc in (celery, worker):
            proc.terminate()
            proc.wait(timeout=30)


def test_a_countdown_of_several_cycles_runs_once_on_time_and_never_waits_in_celery(
    stack: Stack,
) -> None:
    sent = time.time()
    stack.app.send_task("record", args=["long"], countdown=4 * CYCLE + 0.5)
    due = sent + 4 * CYCLE + 0.5
    # Meanwhile no Celery worker can have reserved it: nothing visible or in flight in its
    # queue. The hand-over may come up to a cycle before it is due, with DelaySeconds for the
    # rest (rounded up): it then waits in SQS's own delay, which a worker cannot reserve.
    # (fc28 failed here counting one message in all, before the counts were in the message:
    # hops late by 0.5 s in all make the last hand-over come 1.5 s before it is due.)
    while (left := due - time.time()) > 1:
        counts = stack.counts()
        held = counts["Messages"] + counts["MessagesNotVisible"]
        assert held == 0 and "long" not in stack.ran(), (f"{left:.2f} s before due", counts)
        time.sleep(0.2)
    wait_for(lambda: "long" in stack.ran(), timeout=30)
    time.sleep(2)  # a duplicate would have come by now
    [ran] = stack.ran()["long"]
    assert due <= ran <= due + LATE_BOUND, ran - due
    stack.assert_no_hop_late()


def test_a_short_countdown_and_none_behave_as_before(stack: Stack) -> None:
    sent = time.time()
    stack.app.send_task("record", args=["short"], countdown=1.5)
    stack.app.send_task("record", args=["at-once"])
    wait_for(lambda: {"short", "at-once"} <= set(stack.ran()), timeout=30)
    runs = stack.ran()
    assert len(runs["short"]) == 1 and len(runs["at-once"]) == 1
    assert runs["at-once"][0] - sent < 1.5
    assert sent + 1.5 <= runs["short"][0] <= sent + 3.0


def test_a_cancelled_task_never_runs(stack: Stack) -> None:
    # Handed over a cycle before it is due: far enough off that two CLI starts on a loaded
    # machine come first (at 3 cycles one did not: "too-late", correctly).
    result = stack.app.send_task("record", args=["cancelled"], countdown=6 * CYCLE)
    done = stack.cli("cancel", stack.queue, result.id)
    assert done.returncode == 0, done.stderr
    assert '"cancelled"' in done.stdout
    later = stack.app.send_task("record", args=["after-cancel"], countdown=6 * CYCLE + 1)
    listed = stack.cli("scheduled", stack.queue, "--json")
    assert listed.returncode == 0, listed.stderr
    assert later.id in listed.stdout and result.id not in listed.stdout
    wait_for(lambda: "after-cancel" in stack.ran(), timeout=30)
    assert "cancelled" not in stack.ran()


def test_beyond_the_visibility_timeout_a_task_runs_once_where_plain_celery_runs_it_twice(
    stack: Stack,
) -> None:
    plain = make_app(stack.app.conf.broker_url, stack.queue.removesuffix("celery"), delays=False)
    plain.send_task("record", args=["plain"], countdown=9)
    stack.app.send_task("record", args=["through-sqsdelay"], countdown=9)
    wait_for(lambda: len(stack.ran().get("plain", [])) >= 2, timeout=40)
    wait_for(lambda: "through-sqsdelay" in stack.ran(), timeout=30)
    time.sleep(5)  # past another visibility timeout
    assert len(stack.ran()["through-sqsdelay"]) == 1


def test_twenty_tasks_start_once_and_on_time(stack: Stack, record_property: Any) -> None:
    dues = {}
    for i in range(20):
        countdown = CYCLE + 1 + (i * 0.37) % (3 * CYCLE)
        dues[f"eta{i}"] = time.time() + countdown
        stack.app.send_task("record", args=[f"eta{i}"], countdown=countdown)
    wait_for(lambda: set(dues) <= set(stack.ran()), timeout=60)
    runs = stack.ran()
    late = sorted(runs[tag][0] - due for tag, due in dues.items())
    record_property("lateness_p50_s", round(median(late), 3))
    record_property("lateness_max_s", round(late[-1], 3))
    print(f"celery lateness over 20 tasks: p50 {median(late):.3f} s, max {late[-1]:.3f} s")
    assert all(len(runs[tag]) == 1 for tag in dues)
    assert late[0] >= 0 and late[-1] <= LATE_BOUND, late
    stack.assert_no_hop_late()


def test_bad_input_is_refused_at_publish_time_and_sends_nothing(stack: Stack) -> None:
    delay_queue = stack.sqs.get_queue_url(QueueName=f"{stack.queue}-delay.fifo")["QueueUrl"]
    # The earlier tests' last messages leave the delay queue once the worker's deletes land
    # (under load after their tasks ran: fc10 counted one, then none): from an empty queue
    # any count is a send.
    wait_for(lambda: stack.queue_holds(delay_queue) == 0, timeout=60)
    # ... and none of those tasks ran twice meanwhile (a delete that failed would hand one
    # over again); "plain" is the plain Celery task that does
    assert all(len(runs) == 1 for tag, runs in stack.ran().items() if tag != "plain")
    far = Settings().max_delay_seconds + 10
    with pytest.raises(InvalidDelay, match="SQSDELAY_MAX_DELAY_SECONDS"):
        stack.app.send_task("record", args=["too-far"], countdown=far)
    with pytest.raises(MessageTooLarge):
        stack.app.send_task("record", args=["x" * 1_048_000], countdown=3 * CYCLE)
    assert stack.queue_holds(delay_queue) == 0  # nothing was sent
    # An ETA in the past runs at once; a naive one is read in the app's zone (UTC here).
    stack.app.send_task("record", args=["past-eta"], eta=datetime.now(UTC) - timedelta(60))
    naive_due = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=3 * CYCLE)
    stack.app.send_task("record", args=["naive-eta"], eta=naive_due)
    wait_for(lambda: "past-eta" in stack.ran(), timeout=30)
    wait_for(lambda: "naive-eta" in stack.ran(), timeout=30)
    due = naive_due.replace(tzinfo=UTC).timestamp()
    assert due <= stack.ran()["naive-eta"][0] <= due + LATE_BOUND
    stack.assert_no_hop_late()
    assert "too-far" not in stack.ran()


def test_countdowns_into_a_fifo_celery_queue_run_once_in_their_group_and_never_early(
    stack: Stack,
) -> None:
    """kombu drops a countdown on a FIFO queue (SQS takes none there); through sqsdelay it
    holds, short (the staging queue) or long (the FIFO delay queue), in kombu's group."""
    sent = time.time()
    countdowns = {"fifo-now": 0, "fifo-short": 1.5, "fifo-long": 3 * CYCLE + 0.5}
    for tag, countdown in countdowns.items():
        stack.app.send_task("record", args=[tag], countdown=countdown, queue="jobs.fifo")
    wait_for(lambda: set(countdowns) <= set(stack.ran()), timeout=60)
    time.sleep(2)  # a duplicate would have come by now
    runs = stack.ran()
    for tag, countdown in countdowns.items():
        [ran] = runs[tag]
        assert sent + countdown <= ran <= sent + countdown + LATE_BOUND + 1, (tag, ran - sent)
    stack.assert_no_hop_late()


def test_retries_on_a_fifo_queue_keep_their_task_id_and_are_never_deduplicated_away(
    stack: Stack,
) -> None:
    """Celery keeps the task id on every retry and sqsdelay sends it as the message id. The
    emulator keeps SQS's five-minute deduplication window, so a forward deduplicated by the
    id alone would drop every retry here (as SQS does): each send has its own key."""
    tag = f"flaky-{uuid.uuid4().hex[:6]}"
    countdowns = [2, 2, 2, 3 * CYCLE]  # three through staging, one through the delay queue
    started = stack.app.send_task("flaky", args=[tag, countdowns], queue="jobs.fifo")
    wait_for(lambda: len(stack.ran().get(tag, [])) >= 5, timeout=90)
    runs = stack.ran()[tag]
    for before, after, countdown in zip(runs, runs[1:], countdowns, strict=False):
        assert after - before >= countdown, (runs, countdowns)  # never before its countdown
    # A new send of the id, after its hand-over (inside SQS's window), arrives too.
    again = time.time()
    stack.app.send_task("record", args=[tag], task_id=started.id, countdown=1.5, queue="jobs.fifo")
    wait_for(lambda: len(stack.ran()[tag]) >= 6, timeout=30)
    time.sleep(2)  # a duplicate would have come by now
    runs = stack.ran()[tag]
    assert len(runs) == 6 and runs[-1] >= again + 1.5, runs


def test_a_long_countdown_reaches_a_fair_queue_in_its_tasks_group(stack: Stack) -> None:
    """kombu passes a task's MessageGroupId to a standard queue (SQS fair queues); sqsdelay
    keeps it through the delay queue and sets it on the hand-over. Nothing consumes this
    queue: the test reads what reaches it."""
    fair = stack.queue.removesuffix("celery") + "tenants"
    installed = stack.cli("install", fair)
    assert installed.returncode == 0, installed.stderr
    url = stack.sqs.get_queue_url(QueueName=fair)["QueueUrl"]
    stack.app.send_task(
        "record", args=["fair"], countdown=3 * CYCLE, queue="tenants", MessageGroupId="tenant-9"
    )
    with RunningWorker(stack.settings, [fair]):
        [got] = Collector(stack.sqs, url).until(1, timeout=30)
    assert got.system["MessageGroupId"] == "tenant-9"


def test_the_transport_set_by_hand_says_to_call_configure(stack: Stack) -> None:
    by_hand = make_app(stack.app.conf.broker_url, stack.queue.removesuffix("celery"), delays=False)
    by_hand.conf.broker_transport = "sqsdelay.aws.celery_transport:Transport"
    with pytest.raises(ConfigError, match=r"sqsdelay.celery.configure\(app\)"):
        by_hand.send_task("record", args=["by-hand"], countdown=3 * CYCLE)


def test_configure_refuses_a_broker_that_is_not_sqs() -> None:
    from celery import Celery

    import sqsdelay.celery

    with pytest.raises(ConfigError, match="broker_url to 'sqs://"):
        sqsdelay.celery.configure(Celery("x", broker="redis://localhost:6379/0"))
    with pytest.raises(ConfigError, match="SQSDELAY_QUEUE_PREFIX"):
        sqsdelay.celery.configure(
            Celery("x", broker="sqs://"), settings=Settings(queue_prefix="app-")
        )
