"""Metrics from a worker and a Lambda run against the moto server over HTTP, with real
messages: the EMF lines are checked against the specification, their counts against the
messages moved, and the hand-over lateness against the arrival times a consumer measured."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from sqsdelay.aws.cloudwatch import read_metrics
from sqsdelay.aws.lambda_driver import Handler
from sqsdelay.aws.sender import Message, Sender
from sqsdelay.core.emf import EmfWriter
from sqsdelay.core.metrics import UNITS, Tally
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support import emf
from tests.support.lambda_events import invoke_as_lambda
from tests.support.queues import install
from tests.support.workerkit import Collector, RunningWorker, load_far_off

# Whole seconds: the sender rounds a fraction up, so the due time would not be the test's.
CYCLE = 2  # seconds: the worker's cycle, lowered
DELAYS = [CYCLE + 1, CYCLE + 2, 2 * CYCLE + 1, 2 * CYCLE + 2, 3 * CYCLE, 3 * CYCLE + 1]


@pytest.fixture
def cloudwatch(moto_url: str) -> Any:
    return boto3.client("cloudwatch", endpoint_url=moto_url, region_name="us-east-1")


def assert_lateness_matches(
    metric_ms: list[float], since_before_s: list[float], since_after_s: list[float]
) -> None:
    """The metric is when each message became visible; a consumer polling every 20 ms sees
    it a little later. The broker stamped each send between the test's clock readings before
    and after it (a busy moto takes tenths of a second), so the lateness the consumer saw is
    between its arrival minus each. Sorted, the lists pair each message with itself or a
    close one."""
    assert len(metric_ms) == len(since_before_s) == len(since_after_s)
    for metric, high, low in zip(
        sorted(metric_ms), sorted(since_before_s), sorted(since_after_s), strict=True
    ):
        assert metric >= 0
        assert high - metric / 1000 >= -0.05 and low - metric / 1000 <= 0.3, (metric, low, high)


def put(cloudwatch: Any, settings: Settings, data: list[dict[str, Any]]) -> None:
    for i in range(0, len(data), 20):
        cloudwatch.put_metric_data(
            Namespace=settings.metrics_namespace, MetricData=data[i : i + 20]
        )


def test_worker_metrics_count_every_move_and_time_every_hand_over(
    make_settings: Any, sqs: Any, cloudwatch: Any
) -> None:
    fast: Settings = make_settings(
        max_native_delay_seconds=CYCLE,
        visibility_timeout_seconds=3,
        wait_time_seconds=1,
        stats_interval_seconds=1,  # several flushes: each move is in exactly one of them
    )
    urls = install(fast, sqs)
    sender = Sender(fast, client=sqs)
    lines: list[str] = []
    due: dict[str, float] = {}  # from the clock before each send
    due_after: dict[str, float] = {}  # and after it
    collector = Collector(sqs, urls["orders"])
    with RunningWorker(fast, ["orders"], write_metrics=lines.append) as running:
        for i, d in enumerate(DELAYS):
            due[f"m{i}"] = time.time() + d
            sender.send("orders", f"m{i}", delay=d)
            due_after[f"m{i}"] = time.time() + d
        got = collector.until(len(DELAYS), timeout=40)
    events = running.worker.stats.events
    objects = emf.parse("".join(lines).splitlines())
    assert len({o["_aws"]["Timestamp"] for o in objects}) > 1  # flushed more than once
    # Nothing but metrics and their dimensions: no body, no message id.
    assert set().union(*objects) <= {"_aws", "Destination", "Service", "Api", *UNITS}
    dest = fast.queue_prefix + "orders"
    orders = emf.values(objects, Destination=dest)
    assert sum(orders["HandedOver"]) == len(DELAYS) == events["delay.handed_over"]
    assert sum(orders["Requeued"]) == events["delay.requeued"] >= 4
    # Every requeue is one sighting of a waiting message, all due within the hour here.
    assert sum(orders["DueWithin1h"]) == events["delay.requeued"]
    assert not {"DueWithin1d", "DueWithin30d", "DueLater", "DeadLettered"} & set(orders)
    assert_lateness_matches(
        orders["HandOverLateness"],
        [g.at - due[g.body] for g in got],
        [g.at - due_after[g.body] for g in got],
    )
    totals = emf.values(objects)
    assert sorted(totals["HandOverLateness"]) == sorted(orders["HandOverLateness"])
    receives = emf.values(objects, Service="sqs", Api="ReceiveMessage")["SqsRequests"]
    assert sum(receives) == running.worker.stats.requests["ReceiveMessage"]
    assert totals["ClockOffset"] and all(abs(v) < 1000 for v in totals["ClockOffset"])
    # What CloudWatch would extract from these lines, read back as `inspect` reads it.
    now = datetime.now(UTC).replace(microsecond=0)
    cycle_end = datetime.fromtimestamp(now.timestamp() // 60 * 60, UTC)
    put(cloudwatch, fast, emf.metric_data(objects, timestamp=cycle_end - timedelta(seconds=30)))
    [read] = read_metrics(fast, [dest], client=cloudwatch, now=now).destinations
    late = sorted(orders["HandOverLateness"])
    assert read.due == {"DueWithin1h": events["delay.requeued"]}
    assert read.lateness_ms == {
        "p50": late[math.ceil(0.5 * len(late)) - 1],
        "p99": late[-1],
        "max": late[-1],
        "count": len(late),
    }


def test_lambda_metrics_are_written_at_the_end_of_every_invocation(
    make_settings: Any, sqs: Any
) -> None:
    s: Settings = make_settings(max_native_delay_seconds=1)
    urls = install(s, sqs)
    lines: list[str] = []
    handler = Handler(s, client=sqs, write_metrics=lines.append)
    sender = Sender(s, client=sqs)
    due = {}
    for i, d in enumerate([2, 3, 4]):
        due[f"m{i}"] = time.time() + d
        sender.send("orders", f"m{i}", delay=d)
    collector = Collector(sqs, urls["orders"])
    delay_url = sqs.get_queue_url(QueueName=s.queue_prefix + "orders-delay.fifo")["QueueUrl"]
    invocations = 0
    deadline = time.monotonic() + 30
    while len(collector.got) < len(due) and time.monotonic() < deadline:
        flushed = len(lines)
        if invoke_as_lambda(sqs, delay_url, handler):
            invocations += 1
            assert len(lines) == flushed + 1  # one write per invocation, at its end
        collector.poll()
    assert len(collector.got) == len(due)
    objects = emf.parse("".join(lines).splitlines())
    orders = emf.values(objects, Destination=s.queue_prefix + "orders")
    assert sum(orders["HandedOver"]) == 3 == handler.stats.events["delay.handed_over"]
    assert sum(orders.get("Requeued", [])) == handler.stats.events["delay.requeued"]
    # Lambda's poller receives with a 1 s long poll here, so arrivals are measured coarsely.
    for metric, g in zip(
        sorted(orders["HandOverLateness"]),
        sorted(collector.got, key=lambda g: g.at - due[g.body]),
        strict=True,
    ):
        assert 0 <= metric / 1000 <= g.at - due[g.body] + 0.05
    assert invocations >= 1  # each wrote its metrics once, at its end (checked above)


def test_inspect_prints_the_metrics_and_says_when_there_are_none(
    env: dict[str, str], prefix: str, cloudwatch: Any
) -> None:
    env = {**env, "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": "60"}  # a cycle of one minute

    def inspect() -> str:
        done = subprocess.run(
            [sys.executable, "-m", "sqsdelay", "inspect", "orders"],
            env={**env, "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    subprocess.run(
        [sys.executable, "-m", "sqsdelay", "install", "orders"], env=env, check=True, timeout=60
    )
    assert "no metrics yet" in inspect()
    tally = Tally()
    tally.count(f"{prefix}orders", "DueWithin1h", 7)
    tally.count(f"{prefix}orders", "DueLater", 2)
    for ms in [120, 340, 560, 2780]:
        tally.handed_over(f"{prefix}orders", ms)
    lines: list[str] = []
    defaults = Settings()
    writer = EmfWriter(
        defaults.metrics_namespace,
        enabled=defaults.metrics == "emf",
        write=lines.append,
        clock=time.time,
    )
    writer.flush(tally, None)
    objects = emf.parse("".join(lines).splitlines())
    # The due windows are read for the last complete cycle: written on both sides of the
    # current minute's start, one of them is in it whenever inspect runs.
    now = datetime.now(UTC)
    start = datetime.fromtimestamp(now.timestamp() // 60 * 60, UTC)

    def data(when: datetime, *, due: bool) -> list[dict[str, Any]]:
        entries = emf.metric_data(objects, timestamp=when)
        return [e for e in entries if e["MetricName"].startswith("Due") == due]

    for when in (start - timedelta(seconds=30), start + timedelta(seconds=30)):
        put(cloudwatch, Settings(), data(when, due=True))
    put(cloudwatch, Settings(), data(now - timedelta(minutes=5), due=False))
    [*_, row] = [line for line in inspect().splitlines() if f"{prefix}orders " in line]
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells == [f"{prefix}orders", "7", "0", "0", "2", "4", "0.34 s", "2.78 s", "2.78 s"]


def test_the_worker_process_writes_metrics_to_stdout_unless_they_are_off(
    make_settings: Any, sqs: Any, env: dict[str, str]
) -> None:
    s: Settings = make_settings(max_native_delay_seconds=2)
    urls = install(s, sqs)
    collector = Collector(sqs, urls["orders"])
    base = {
        **env,
        "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": "2",
        "SQSDELAY_WAIT_TIME_SECONDS": "1",
        "SQSDELAY_STATS_INTERVAL_SECONDS": "1",
    }
    outputs = {}
    for metrics_env in (
        {"SQSDELAY_METRICS_NAMESPACE": "acme/delays"},
        {"SQSDELAY_METRICS": "off"},
    ):
        sent = len(collector.got) + 2
        Sender(s, client=sqs).send_batch("orders", [Message("a", delay=3), Message("b", delay=4)])
        proc = subprocess.Popen(
            [sys.executable, "-m", "sqsdelay", "worker", "orders"],
            env={**base, **metrics_env},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            collector.until(sent, timeout=30)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        outputs[tuple(metrics_env.values())] = out
    objects = emf.parse(outputs[("acme/delays",)].splitlines())
    assert {d["Namespace"] for o in objects for d in o["_aws"]["CloudWatchMetrics"]} == {
        "acme/delays"
    }
    assert sum(emf.values(objects, Destination=s.queue_prefix + "orders")["HandedOver"]) == 2
    assert outputs[("off",)] == ""


def test_the_worker_publishes_its_backlog_on_every_flush(make_settings: Any, sqs: Any) -> None:
    """A delay queue with far-off messages: the worker receives full batches, counts what is
    visible, and knows its requeues come back one cycle later (core.backlog)."""
    fast: Settings = make_settings(
        max_native_delay_seconds=CYCLE,
        visibility_timeout_seconds=3,
        wait_time_seconds=1,
        stats_interval_seconds=1,
        concurrency=1,  # one loop: a backlog stays visible between its receives
    )
    urls = install(fast, sqs)
    load_far_off(sqs, urls["orders-delay.fifo"], 300)
    lines: list[str] = []

    def backlog() -> dict[str, list[float]]:
        found = emf.values(emf.parse("".join(lines).splitlines()))
        return {k: found.get(k, []) for k in ("BacklogVisible", "BacklogDue")}

    with RunningWorker(fast, ["orders"], write_metrics=lines.append) as running:
        wait_for(lambda: max(backlog()["BacklogVisible"], default=0) > 0, timeout=30)
        wait_for(lambda: max(backlog()["BacklogDue"], default=0) > 0, timeout=30)
    seen = backlog()
    objects = emf.parse("".join(lines).splitlines())
    held = sum(emf.values(objects, Destination=fast.queue_prefix + "orders")["Held"])
    requeued = running.worker.stats.events["delay.requeued"]
    assert len(seen["BacklogVisible"]) == len(seen["BacklogDue"]) >= 2  # one each per flush
    # What the queue shows, not inflated by the worker: 300, and on a starved machine more,
    # as SQS would show it too:
    # - one batch (its loop's only batch in hand, visible again once a slow send outlasted
    #   its visibility, beside its requeues: 308 seen once, when moto took 30 s to start it);
    # - one copy per held message: a requeue that timed out on the worker's side may still
    #   have reached the queue, and its original waits out a backoff before its retry is
    #   deduplicated and it is deleted (330 seen in CI, after three timed-out batches);
    # - one copy per failed delete: its original comes back after its visibility timeout.
    batch = 10
    extra = batch + held + running.worker.stats.events["delete_failed"]
    assert max(seen["BacklogVisible"]) <= 300 + extra, (seen["BacklogVisible"], held)
    assert max(seen["BacklogDue"]) <= requeued
    assert all(v >= 0 for v in seen["BacklogVisible"] + seen["BacklogDue"])
