"""The consumer's retry_later side of the way back (issue 58) on the embedded emulator over
HTTP: a give-up from a FIFO destination or a fair queue that `replay-errors` puts back in its
group, a retry whose original could not be deleted, and a replay's token through a retry."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from sqsdelay import consumer
from sqsdelay.aws import operations
from sqsdelay.aws.sender import Sender
from sqsdelay.aws.worker import WorkerThread
from sqsdelay.core import wire_format
from sqsdelay.settings import Settings
from tests.support.consumerkit import counts, install, lambda_record, receive_one
from tests.support.faultproxy import FaultProxy
from tests.support.workerkit import Collector

ATTRS = {"tenant-name": {"DataType": "String", "StringValue": "acme"}}


@pytest.fixture
def short(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(
        max_native_delay_seconds=2, visibility_timeout_seconds=5, wait_time_seconds=1
    )


@pytest.mark.parametrize(
    ("queue", "group"),
    [("orders.fifo", "customer-9"), ("orders", "tenant-a")],  # a FIFO group; a fair queue's tenant
)
def test_a_give_up_is_replayed_into_its_group(
    short: Settings, sqs: Any, queue: str, group: str
) -> None:
    """Issue 58.5: the give-up's record kept no group. A FIFO replay was refused by the
    forward (`no valid sqsdelay.GroupId attribute`) and went back to the error queue every
    time; a fair-queue replay arrived without its tenant."""
    urls = install(short, sqs, queue)
    sender = Sender(short, client=sqs)
    sender.send(queue, "flaky", delay=0, group_id=group, attributes=ATTRS)
    first = receive_one(sqs, urls[queue])
    record = lambda_record(first, short.queue_prefix + queue)
    policy = consumer.RetryPolicy(consumer.Backoff(max_attempts=0))
    gave_up = policy.retry(record, "partner down", sender=sender)
    assert gave_up.dead_lettered is not None
    assert counts(sqs, urls[queue]) == (0, 0, 0)
    dead = receive_one(sqs, urls["error"])
    failure = json.loads(dead["MessageAttributes"][wire_format.FAILURE_ATTRIBUTE]["StringValue"])
    assert failure["attempt"] == 0 and "partner down" in failure["reason"]
    sqs.change_message_visibility(
        QueueUrl=urls["error"], ReceiptHandle=dead["ReceiptHandle"], VisibilityTimeout=0
    )
    with WorkerThread(short, [queue]):
        replayed = operations.replay_errors(short, queue, client=sqs)
        assert len(replayed.replayed) == 1, replayed
        [back] = Collector(sqs, urls[queue]).until(1, timeout=20)
    assert back.body == "flaky" and back.system["MessageGroupId"] == group
    assert back.attributes["tenant-name"] == ATTRS["tenant-name"]
    assert wire_format.ATTEMPT_ATTRIBUTE not in back.attributes
    assert counts(sqs, urls["error"]) == (0, 0, 0)


def test_a_retry_whose_original_could_not_be_deleted_is_sent_once_and_is_a_success(
    short: Settings, sqs: Any
) -> None:
    """Issue 58.2: the record was reported a failure, so Lambda handed the original out
    again and the handler sent a second retry of the same attempt."""
    urls = install(short, sqs, "orders")
    Sender(short, client=sqs).send("orders", "once", delay=0)
    record = lambda_record(receive_one(sqs, urls["orders"]), short.queue_prefix + "orders")
    proxy = FaultProxy(short.endpoint_url or "")
    try:
        proxy.cut("DeleteMessage", times=100)
        broken = Sender(
            short.model_copy(update={"endpoint_url": proxy.url, "call_timeout_seconds": 2})
        )

        def handler(r: Any) -> None:
            raise consumer.RetryLater(0)

        answer = consumer.handle_batch({"Records": [record]}, handler, sender=broken)
        assert proxy.seen["SendMessage"] == 1 and proxy.seen["DeleteMessage"] >= 1
    finally:
        proxy.close()
    # A success: Lambda deletes the original itself, and nothing runs it again.
    assert answer == {"batchItemFailures": []}
    [retried] = Collector(sqs, urls["orders"]).until(1, timeout=10)
    assert retried.attributes[wire_format.ATTEMPT_ATTRIBUTE]["StringValue"] == "1"


def test_a_retry_of_a_replay_keeps_its_token(short: Settings, sqs: Any) -> None:
    """The guard and the registry key a replay by its `sqsdelay.Replay` token: a retry of
    a replayed message carries it unchanged, through the delay queue and the worker too."""
    urls = install(short, sqs, "orders")
    token = {"DataType": "String", "StringValue": "err-42"}
    sqs.send_message(
        QueueUrl=urls["orders"],
        MessageBody="replayed",
        MessageAttributes={
            wire_format.MESSAGE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": "order-7"},
            wire_format.REPLAY_ATTRIBUTE: token,
        },
    )
    sender = Sender(short, client=sqs)
    message = receive_one(sqs, urls["orders"])
    with WorkerThread(short, ["orders"]):
        for delay, route in ((1, "direct"), (3, "delay-queue")):
            done = consumer.retry_later(message, delay, queue_url=urls["orders"], sender=sender)
            assert done.sent is not None and done.sent.route == route
            message = receive_one(sqs, urls["orders"], wait=20)
            assert message["MessageAttributes"][wire_format.REPLAY_ATTRIBUTE] == token
            assert message["Body"] == "replayed"
