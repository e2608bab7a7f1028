"""A destination outage, in worker and in Lambda mode: nothing is dead-lettered, however many
times the messages come back, and everything is delivered once the destination returns.

The outage is compressed: the circuit breaker's wait is capped at 2 s (300 s in production), so each
message is redelivered many times, as in a long outage, with SQSDELAY_MAX_ATTEMPTS=1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.lambda_driver import Handler
from sqsdelay.aws.sender import Message, Sender
from sqsdelay.aws.worker import WorkerThread
from sqsdelay.core.backoff import CircuitBreaker
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.lambda_events import invoke_as_lambda
from tests.support.workerkit import Collector

pytestmark = pytest.mark.slow
TOTAL = 12
REDELIVERIES = 6  # holds per message-batch during the outage: well past max_attempts=1


def start_outage(s: Settings, sqs: Any) -> dict[str, str]:
    urls = {r.spec.role: str(r.url) for r in Installer(s, client=sqs).run(["orders"])}
    Sender(s, client=sqs).send_batch(
        "orders", [Message(f"m{i}", delay=2 + i % 3) for i in range(TOTAL)]
    )
    sqs.delete_queue(QueueUrl=urls["destination"])  # the destination is gone
    return urls


def error_count(sqs: Any, url: str) -> int:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return sum(
        int(attrs[k])
        for k in ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible")
    )


def test_worker_waits_out_an_outage(make_settings: Callable[..., Settings], sqs: Any) -> None:
    s = make_settings(
        max_native_delay_seconds=1,
        wait_time_seconds=1,
        visibility_timeout_seconds=2,
        max_attempts=1,
    )
    urls = start_outage(s, sqs)
    running = WorkerThread(s, ["orders"])
    running.worker.state.sends = CircuitBreaker(base_seconds=0.5, cap_seconds=2)
    with running:
        stats = running.worker.stats
        wait_for(lambda: stats.requests["ChangeMessageVisibilityBatch"] >= REDELIVERIES, 60)
        assert stats.events["delay.dead_lettered"] == 0
        url = sqs.create_queue(QueueName=s.queue_prefix + "orders")["QueueUrl"]
        got = Collector(sqs, url).until(TOTAL, timeout=60)
    assert sorted(g.body for g in got) == sorted(f"m{i}" for i in range(TOTAL))
    assert error_count(sqs, urls["error"]) == 0


def test_lambda_waits_out_an_outage(make_settings: Callable[..., Settings], sqs: Any) -> None:
    s = make_settings(max_native_delay_seconds=1, max_attempts=1)
    urls = start_outage(s, sqs)
    handler = Handler(s, client=sqs)
    handler.state.sends = CircuitBreaker(base_seconds=0.5, cap_seconds=2)

    def invoke() -> None:
        invoke_as_lambda(sqs, urls["delay"], handler)

    holds = lambda: handler.stats.requests["ChangeMessageVisibilityBatch"]  # noqa: E731
    wait_for(lambda: invoke() or holds() >= REDELIVERIES, timeout=60)
    assert handler.stats.events["delay.dead_lettered"] == 0
    url = sqs.create_queue(QueueName=s.queue_prefix + "orders")["QueueUrl"]
    dest = Collector(sqs, url)

    def delivered() -> bool:
        invoke()
        dest.poll()
        return len(dest.got) >= TOTAL

    wait_for(delivered, timeout=60)
    assert sorted(g.body for g in dest.got) == sorted(f"m{i}" for i in range(TOTAL))
    assert error_count(sqs, urls["error"]) == 0
