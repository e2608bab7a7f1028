"""Dramatiq on SQS through sqsdelay, against a real Dramatiq worker process (`dramatiq
tests.integration.dramatiq_app`) and the sqsdelay worker, both on the moto server, with a
2 s cycle."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
import uuid
from base64 import b64encode
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

import boto3
import dramatiq_sqs
import pytest

from sqsdelay import errors
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support import handovers
from tests.support.cli import run
from tests.support.dramatiqkit import app_variables, imported_app
from tests.support.handovers import assert_handed_over_in_time

pytestmark = pytest.mark.slow
CYCLE = 2
ROOT = Path(__file__).resolve().parents[2]
THREADS = ["--processes", "1", "--threads", "2"]


@dataclass
class Stack:
    app: Any  # tests.integration.dramatiq_app, imported by the publisher
    queue: str  # the SQS name of Dramatiq's "default" queue: <namespace>_default
    out: Path
    env: dict[str, str]
    sqs: Any
    log: Path  # the sqsdelay worker's events, every hop's delay.requeued among them

    def lines(self) -> dict[str, list[list[float]]]:
        found: dict[str, list[list[float]]] = defaultdict(list)
        if self.out.exists():
            for line in self.out.read_text().splitlines():
                tag, *values = line.split()
                found[tag].append([float(v) for v in values])
        return found

    def ran(self, tag: str) -> list[float]:
        return [v[0] for v in self.lines().get(tag, [])]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run(self.env, *args)


@pytest.fixture(scope="module")
def stack(moto_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    namespace = f"d{uuid.uuid4().hex[:8]}"
    queue = f"{namespace}_default"
    out = tmp_path_factory.mktemp("dramatiq") / "ran.txt"
    log = out.parent / "sqsdelay-events.jsonl"
    settings = {
        "SQSDELAY_ENDPOINT_URL": moto_url,
        "SQSDELAY_REGION": "us-east-1",
        "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": str(CYCLE),
        "SQSDELAY_REGISTRY": "dynamodb",
        "SQSDELAY_REGISTRY_TABLE": f"{namespace}-scheduled",
        "SQSDELAY_ERROR_QUEUE": f"{namespace}-error",
        "SQSDELAY_WAIT_TIME_SECONDS": "1",
    }
    test = app_variables(namespace, moto_url, out)
    env = {**os.environ, **settings, **test, "PYTHONPATH": str(ROOT)}
    # As the README says: the SQS name dramatiq-sqs uses, <namespace>_<queue>.
    installed = subprocess.run(
        [sys.executable, "-m", "sqsdelay", "install", queue], env=env, capture_output=True
    )
    assert installed.returncode == 0, installed.stderr
    with imported_app({**settings, **test}) as app:  # the publisher's
        dramatiq_worker = subprocess.Popen(
            [sys.executable, "-m", "dramatiq", "tests.integration.dramatiq_app", *THREADS],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        worker = subprocess.Popen(
            [sys.executable, "-m", "sqsdelay", "worker", queue],
            env={**env, "SQSDELAY_LOG_FILE": str(log), "SQSDELAY_LOG_LEVEL": "DEBUG"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        sqs = boto3.client("sqs", endpoint_url=moto_url, region_name="us-east-1")
        s = Stack(app, queue, out, env, sqs, log)
        try:
            app.record.send("warm-up")
            wait_for(lambda: s.ran("warm-up"), timeout=60)
            yield s
        finally:
            for proc in (dramatiq_worker, worker):
                proc.terminate()
                proc.wait(timeout=30)


def test_twenty_delayed_messages_run_once_on_time(stack: Stack, record_property: Any) -> None:
    """Delays of one to four cycles: each runs once, never before it is due, handed over
    by the sqsdelay worker without a hop too many."""
    dues = {}
    sends = []  # message id, delay, the clock around the send
    for i in range(20):
        delay_ms = (CYCLE + 1) * 1000 + (i * 370) % (3 * CYCLE * 1000)
        tag = f"late{i}-{uuid.uuid4().hex[:4]}"
        before = time.time()
        dues[tag] = before + delay_ms / 1000
        sent = stack.app.record.send_with_options(args=(tag,), delay=delay_ms)
        sends.append((sent.message_id, delay_ms / 1000, before, time.time()))
    wait_for(lambda: all(stack.ran(t) for t in dues), timeout=60)
    time.sleep(1.5)  # a duplicate would have come by now
    late = sorted(stack.ran(t)[0] - due for t, due in dues.items())
    record_property("lateness_p50_s", round(median(late), 3))
    record_property("lateness_max_s", round(late[-1], 3))
    print(f"dramatiq lateness over 20 messages: p50 {median(late):.3f} s, max {late[-1]:.3f} s")
    assert all(len(stack.ran(t)) == 1 for t in dues)
    # A cycle (2 s) late is the checks' on the worker's log below: timed, a busy machine
    # (3.3 s seen in CI at load 15) hides it; more than two cycles late shows.
    assert late[0] >= 0 and late[-1] < 5.0, late
    hops = handovers.read(stack.log)
    for message_id, delay, before, after in sends:
        assert_handed_over_in_time(
            hops, message_id, delay=delay, cycle=CYCLE, sent_between=(before, after)
        )


def test_retries_with_backoffs_beyond_the_cycle_run_as_many_times_as_they_say(
    stack: Stack,
) -> None:
    """max_retries=2, min_backoff 3 s (beyond the 2 s cycle): three runs, each retry not
    before its backoff, though every retry keeps the message id."""
    tag = f"flaky-{uuid.uuid4().hex[:6]}"
    stack.app.flaky.send(tag)
    wait_for(lambda: len(stack.ran(tag)) >= 3, timeout=60)
    time.sleep(CYCLE + 4)  # no fourth run
    runs = stack.ran(tag)
    enqueued = stack.lines()[f"enqueued:{tag}"]  # [time, delay ms]: the first, then retries
    assert len(runs) == 3 and len(enqueued) == 3, (runs, enqueued)
    for ran, (at, delay_ms) in zip(runs[1:], enqueued[1:], strict=True):
        assert delay_ms > CYCLE * 1000  # through sqsdelay
        assert ran >= at + delay_ms / 1000, (ran, at, delay_ms)


def test_a_cancelled_message_never_runs_and_the_registry_lists_the_others(stack: Stack) -> None:
    # Handed over a cycle before it is due: far enough off that two CLI starts on a loaded
    # machine come first.
    cancelled = stack.app.record.send_with_options(args=("cancelled",), delay=6 * CYCLE * 1000)
    done = stack.cli("cancel", stack.queue, cancelled.message_id)
    assert done.returncode == 0, done.stderr
    assert '"cancelled"' in done.stdout
    later = stack.app.record.send_with_options(args=("after-cancel",), delay=6 * CYCLE * 1000)
    listed = stack.cli("scheduled", stack.queue, "--json")
    assert listed.returncode == 0, listed.stderr
    assert later.message_id in listed.stdout, (listed.stdout, listed.stderr)
    assert cancelled.message_id not in listed.stdout
    wait_for(lambda: stack.ran("after-cancel"), timeout=30)
    assert not stack.ran("cancelled")


def test_no_delay_and_a_short_delay_are_sent_by_dramatiq_sqs_never_early(stack: Stack) -> None:
    """Within the native delay dramatiq-sqs sends the message itself, with the delay rounded
    up to whole seconds (dramatiq-sqs alone sends 1,500 ms as DelaySeconds 1, 0.5 s early)."""
    sent: list[tuple[str, dict[str, Any]]] = []

    def capture(params: dict[str, Any], model: Any, **_: Any) -> None:
        sent.append((model.name, dict(params)))

    client = stack.app.broker.sqs.meta.client
    client.meta.events.register("provide-client-params.sqs.*", capture)
    try:
        start = time.time()
        stack.app.record.send("now")
        stack.app.record.send_with_options(args=("short",), delay=1500)
        wait_for(lambda: stack.ran("now") and stack.ran("short"), timeout=30)
    finally:
        client.meta.events.unregister("provide-client-params.sqs.*", capture)
    assert [(name, p["DelaySeconds"]) for name, p in sent] == [
        ("SendMessage", 0),
        ("SendMessage", 2),  # 1,500 ms rounded up
    ]
    assert all(p["QueueUrl"].endswith(stack.queue) for _, p in sent)
    assert "MessageAttributes" not in sent[0][1]  # the message as dramatiq-sqs encodes it
    assert stack.ran("short")[0] >= start + 1.5


def test_a_delay_a_fraction_beyond_the_native_delay_goes_through_sqsdelay(stack: Stack) -> None:
    """dramatiq-sqs would send 2,563 ms as DelaySeconds 2 (2563 // 1000): 0.56 s early, which
    Retries' backoffs hit (capped at max_backoff, they land anywhere in its upper half)."""
    sent: list[dict[str, Any]] = []

    def capture(params: dict[str, Any], **_: Any) -> None:
        sent.append(dict(params))

    client = stack.app.broker.sqs.meta.client
    client.meta.events.register("provide-client-params.sqs.SendMessage", capture)
    try:
        start = time.time()
        stack.app.record.send_with_options(args=("just-over",), delay=CYCLE * 1000 + 563)
    finally:
        client.meta.events.unregister("provide-client-params.sqs.SendMessage", capture)
    assert [p["QueueUrl"].rsplit("/", 1)[-1] for p in sent] == [f"{stack.queue}-delay.fifo"]
    wait_for(lambda: stack.ran("just-over"), timeout=30)
    assert stack.ran("just-over")[0] >= start + CYCLE + 0.563


def test_bad_input_is_refused_at_enqueue_and_sends_nothing(stack: Stack) -> None:
    app = stack.app
    far = Settings().max_delay_seconds * 1000 + 10_000
    with pytest.raises(errors.InvalidDelay, match="SQSDELAY_MAX_DELAY_SECONDS"):
        app.record.send_with_options(args=("too-far",), delay=far)
    with pytest.raises(dramatiq_sqs.MessageDelayTooLong):  # as a dramatiq-sqs user catches it
        app.record.send_with_options(args=("too-far",), delay=far)
    with pytest.raises(errors.InvalidDelay, match="SQSDELAY_MAX_DELAY_SECONDS"):
        app.record.send_with_options(args=("too-far",), delay=10**20)  # beyond any date
    # fits dramatiq-sqs's limit (its base64 body), not once sqsdelay's attributes are added
    size, limit = 786_000, app.broker.max_message_size
    while len(b64encode(app.record.message("x" * size).encode())) <= limit - 40:
        size += 1
    big = "x" * size
    with pytest.raises(dramatiq_sqs.MessageTooLarge):
        app.record.send_with_options(args=(big,), delay=3 * CYCLE * 1000)
    with pytest.raises(errors.MessageTooLarge):
        app.record.send_with_options(args=(big,), delay=3 * CYCLE * 1000)
    listed = stack.cli("scheduled", stack.queue, "--json")
    assert "too-far" not in listed.stdout and "x" * 100 not in listed.stdout
    # A negative or non-integer delay is treated as dramatiq-sqs treats it.
    plain = dramatiq_sqs.SQSBroker(namespace=app.broker.namespace, **_boto(stack))
    plain.declare_queue("default")
    for delay in (-5000, 1500.5):
        outcomes = []
        for broker in (app.broker, plain):
            message = app.record.message(f"odd-delay-{delay}")
            try:
                broker.enqueue(message, delay=delay)
                outcomes.append("sent")
            except Exception as exc:
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1], (delay, outcomes)


def test_a_queue_without_its_delay_queue_is_refused_with_the_install_command(
    stack: Stack,
) -> None:
    from sqsdelay.dramatiq import SQSBroker

    broker = SQSBroker(namespace=f"n{uuid.uuid4().hex[:6]}", **_boto(stack))
    broker.declare_queue("default")
    message = stack.app.record.message("never").copy(queue_name="default")
    with pytest.raises(errors.DelayQueueMissing, match=r"sqsdelay .*install n\w+_default"):
        broker.enqueue(message, delay=3 * CYCLE * 1000)


def _boto(stack: Stack) -> dict[str, Any]:
    return {
        "endpoint_url": stack.env["DRAMATIQ_TEST_ENDPOINT"],
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }


def test_without_the_extra_the_import_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sqsdelay import extras

    monkeypatch.delitem(sys.modules, "dramatiq_sqs")
    monkeypatch.delitem(sys.modules, "sqsdelay.dramatiq", raising=False)
    found = extras.find_spec
    monkeypatch.setattr(extras, "find_spec", lambda m: None if m == "dramatiq_sqs" else found(m))
    with pytest.raises(extras.MissingExtra, match=r"pip install 'sqsdelay\[dramatiq\]'"):
        importlib.import_module("sqsdelay.dramatiq")


def test_sqsdelay_settings_as_keywords_and_the_prefix_refused(moto_url: str) -> None:
    from sqsdelay.dramatiq import SQSBroker

    boto = {"endpoint_url": moto_url, "region_name": "us-east-1"}
    broker = SQSBroker(namespace="myapp", sqsdelay={"registry": "dynamodb"}, **boto)
    assert broker.sqsdelay_settings.registry == "dynamodb"
    with pytest.raises(errors.ConfigError, match="SQSDELAY_QUEUE_PREFIX"):
        SQSBroker(namespace="myapp", sqsdelay={"queue_prefix": "app-"}, **boto)
