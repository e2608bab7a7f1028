"""`retry_later` beside a real `sqsdelay worker` process on the emulator, with a 1 s cycle:
a retry longer than SQS's 12-hour visibility limit in hops, and the backoff giving up into
the error queue, from which `sqsdelay replay-errors` brings the message back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from sqsdelay import consumer
from sqsdelay.aws.sender import Sender
from sqsdelay.core import wire_format
from sqsdelay.settings import Settings
from tests.support import handovers
from tests.support.consumerkit import counts, install, lambda_record, receive_one
from tests.support.handovers import assert_handed_over_in_time
from tests.support.workerkit import Collector

pytestmark = pytest.mark.slow
CYCLE = 1
# 12 hours are 48 cycles of 900 s: this retry makes 49 hops, as one of 12 h 15 min would.
HOPS = 49


@dataclass
class Stack:
    settings: Settings
    env: dict[str, str]
    urls: dict[str, str]
    sqs: Any
    log: Path  # the worker's events, every hop's delay.requeued among them


@pytest.fixture(scope="module")
def stack(moto_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prefix = f"c{uuid.uuid4().hex[:8]}-"
    log = tmp_path_factory.mktemp("consumer-worker") / "events.jsonl"
    env = {
        **os.environ,
        "SQSDELAY_ENDPOINT_URL": moto_url,
        "SQSDELAY_REGION": "us-east-1",
        "SQSDELAY_QUEUE_PREFIX": prefix,
        "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": str(CYCLE),
        "SQSDELAY_WAIT_TIME_SECONDS": "1",
    }
    worker_env = {**env, "SQSDELAY_LOG_FILE": str(log), "SQSDELAY_LOG_LEVEL": "DEBUG"}
    settings = Settings(
        endpoint_url=moto_url,
        region="us-east-1",
        queue_prefix=prefix,
        max_native_delay_seconds=CYCLE,
        wait_time_seconds=1,
    )
    sqs = boto3.client("sqs", endpoint_url=moto_url, region_name="us-east-1")
    urls = install(settings, sqs, "orders")
    worker = subprocess.Popen(
        [sys.executable, "-m", "sqsdelay", "worker", "orders"],
        env=worker_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield Stack(settings, env, urls, sqs, log)
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_a_retry_of_more_than_twelve_hours_of_hops_arrives_once_on_time(stack: Stack) -> None:
    sender = Sender(stack.settings, client=stack.sqs)
    sender.send(
        "orders",
        "call the partner tomorrow",
        delay=0,
        attributes={"k": {"DataType": "String", "StringValue": "v"}},
    )
    original = receive_one(stack.sqs, stack.urls["orders"])
    record = lambda_record(original, stack.settings.queue_prefix + "orders")
    delay = HOPS * CYCLE + 0.5
    due = time.time() + delay
    done = consumer.retry_later(record, delay, sender=sender)
    around = (due - delay, time.time())  # the retry's send lies between
    assert done.sent is not None and done.sent.route == "delay-queue"
    assert counts(stack.sqs, stack.urls["orders"]) == (0, 0, 0)  # the original is gone
    collector = Collector(stack.sqs, stack.urls["orders"])
    [got] = collector.until(1, timeout=delay + 30)
    collector.poll(wait=2)  # a duplicate would have come by now
    assert len(collector.got) == 1
    late = got.at - due
    print(f"retry of {HOPS} cycles: {late:+.3f} s from due")
    # Its due time kept over 49 hops (no drift), at most a cycle carried, no extra hop: the
    # worker's own figures. Timed, only more than 5 cycles late shows on a busy machine.
    hops = handovers.read(stack.log)
    assert_handed_over_in_time(hops, done.message_id, delay=delay, cycle=CYCLE, sent_between=around)
    assert 0 <= late < 5.0, late
    assert got.body == "call the partner tomorrow" and got.attributes["k"]["StringValue"] == "v"
    assert got.attributes[wire_format.ATTEMPT_ATTRIBUTE]["StringValue"] == "1"
    assert got.attributes[wire_format.MESSAGE_ID_ATTRIBUTE]["StringValue"] == done.message_id


def test_the_backoff_gives_up_into_the_error_queue_and_replay_errors_brings_it_back(
    stack: Stack,
) -> None:
    sender = Sender(stack.settings, client=stack.sqs)
    policy = consumer.RetryPolicy(consumer.Backoff(base_seconds=1, cap_seconds=2, max_attempts=1))
    sender.send("orders", "flaky", delay=0)
    first = receive_one(stack.sqs, stack.urls["orders"])
    retried = policy.retry(first, "partner down", queue_url=stack.urls["orders"], sender=sender)
    assert retried.attempt == 1 and retried.sent is not None
    assert retried.sent.delay_seconds <= 1  # a draw below min(cap, base * 2^0)
    second = receive_one(stack.sqs, stack.urls["orders"], wait=5)
    gave_up = policy.retry(
        second, "partner still down", queue_url=stack.urls["orders"], sender=sender
    )
    assert gave_up.dead_lettered is not None and "max_attempts=1" in gave_up.dead_lettered
    assert counts(stack.sqs, stack.urls["orders"]) == (0, 0, 0)
    dead = receive_one(stack.sqs, stack.urls["error"])
    failure = dead["MessageAttributes"][wire_format.FAILURE_ATTRIBUTE]["StringValue"]
    assert "partner still down" in failure and dead["Body"] == "flaky"
    assert wire_format.ATTEMPT_ATTRIBUTE not in dead["MessageAttributes"]
    stack.sqs.change_message_visibility(
        QueueUrl=stack.urls["error"], ReceiptHandle=dead["ReceiptHandle"], VisibilityTimeout=0
    )
    replayed = subprocess.run(
        [sys.executable, "-m", "sqsdelay", "replay-errors", "orders"],
        env=stack.env,
        capture_output=True,
        text=True,
    )
    assert replayed.returncode == 0, replayed.stderr
    [back] = Collector(stack.sqs, stack.urls["orders"]).until(1, timeout=20)
    assert back.body == "flaky" and wire_format.ATTEMPT_ATTRIBUTE not in back.attributes
