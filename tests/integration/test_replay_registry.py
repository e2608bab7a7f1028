"""`replay-errors` with the registry on (issue 58.1), against the emulator over HTTP with a
compressed 1 s cycle and a worker running: the documented recovery delivers the message
again, once, both ways a message reaches the error queue after it was handed over: its
consumer's `RetryPolicy` gave up, or the destination refused the hand-over and the worker
dead-lettered it (then the queue's maximum size was raised). Before the fix, the worker
dropped each replay as a duplicate of the first hand-over (`delay.duplicate_dropped`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from sqsdelay import consumer
from sqsdelay.aws.sender import Sender
from sqsdelay.core import wire_format
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support import cli
from tests.support.consumerkit import receive_one
from tests.support.queues import install
from tests.support.workerkit import Collector, RunningWorker

pytestmark = pytest.mark.slow
CYCLE = 1


@pytest.fixture
def registry_on(make_settings: Callable[..., Settings], prefix: str) -> Settings:
    return make_settings(
        max_native_delay_seconds=CYCLE,
        visibility_timeout_seconds=5,
        wait_time_seconds=1,
        registry="dynamodb",
        registry_table=f"{prefix}scheduled",
    )


def env_of(settings: Settings) -> dict[str, str]:
    """The environment a user's `sqsdelay replay-errors` runs with (the worker's settings)."""
    return {
        **os.environ,
        "SQSDELAY_ENDPOINT_URL": str(settings.endpoint_url),
        "SQSDELAY_REGION": settings.region,
        "SQSDELAY_QUEUE_PREFIX": settings.queue_prefix,
        "SQSDELAY_ERROR_QUEUE": settings.error_queue,
        "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": str(CYCLE),
        "SQSDELAY_REGISTRY": "dynamodb",
        "SQSDELAY_REGISTRY_TABLE": str(settings.registry_table),
        "SQSDELAY_MAX_ATTEMPTS": str(settings.max_attempts),
    }


def replay(settings: Settings) -> None:
    done = cli.run(env_of(settings), "replay-errors", "orders")
    assert done.returncode == 0, done.stderr
    assert '"replayed": 1' in done.stdout, done.stdout


def test_a_consumer_dead_letter_is_replayed_through_the_registry_once(
    registry_on: Settings, sqs: Any, dynamodb: Any
) -> None:
    urls = install(registry_on, sqs, dynamodb=dynamodb)
    sender = Sender(registry_on, client=sqs, dynamodb=dynamodb)
    policy = consumer.RetryPolicy(consumer.Backoff(base_seconds=1, cap_seconds=1, max_attempts=0))
    collector = Collector(sqs, urls["orders"])
    with RunningWorker(registry_on, ["orders"]) as running:
        sent = sender.send("orders", "flaky", delay=2, id="order-1")
        first = receive_one(sqs, urls["orders"], wait=20)  # handed over through the registry
        assert first["MessageAttributes"][wire_format.MESSAGE_ID_ATTRIBUTE]["StringValue"] == (
            sent.message_id
        )
        gave_up = policy.retry(first, "partner down", queue_url=urls["orders"], sender=sender)
        assert gave_up.dead_lettered is not None
        replay(registry_on)
        [back] = collector.until(1, timeout=30)
        collector.quiet_for(2)  # a duplicate would have come by now
        assert running.worker.stats.events["delay.duplicate_dropped"] == 0
    assert [d.body for d in collector.got] == ["flaky"]
    token = back.attributes[wire_format.REPLAY_ATTRIBUTE]["StringValue"]
    assert token and back.attributes[wire_format.MESSAGE_ID_ATTRIBUTE]["StringValue"] == "order-1"


def test_a_hand_over_the_destination_refused_is_replayed_once_the_queue_takes_it(
    registry_on: Settings, sqs: Any, dynamodb: Any
) -> None:
    # Dead-lettered after one refused send (SQSDELAY_MAX_ATTEMPTS), at its next receive.
    registry_on = registry_on.model_copy(update={"max_attempts": 1})
    urls = install(registry_on, sqs, dynamodb=dynamodb)
    sender = Sender(registry_on, client=sqs, dynamodb=dynamodb)
    body = "x" * 2000  # over the destination's maximum below, within the delay queue's
    sqs.set_queue_attributes(QueueUrl=urls["orders"], Attributes={"MaximumMessageSize": "1024"})
    collector = Collector(sqs, urls["orders"])
    with RunningWorker(registry_on, ["orders"]) as running:
        sender.send("orders", body, delay=2, id="order-big")
        wait_for(lambda: running.worker.stats.events["delay.dead_lettered"] >= 1, timeout=60)
        sqs.set_queue_attributes(
            QueueUrl=urls["orders"], Attributes={"MaximumMessageSize": "262144"}
        )
        replay(registry_on)
        collector.until(1, timeout=30)
        collector.quiet_for(2)
        assert running.worker.stats.events["delay.duplicate_dropped"] == 0
    assert [len(d.body) for d in collector.got] == [2000]
