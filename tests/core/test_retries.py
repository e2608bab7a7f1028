"""A consumer's retry later, the rules (core/retries.py, core/consumer_message.py) on the way back
(issue 58): a give-up's error-queue record that a replay can put back in its FIFO group or
fair-queue tenant, a replay's token carried through a retry, and where a message came from."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sqsdelay.core import consumer_message, message_shape, retries, send, wire_format
from sqsdelay.core.failure_record import Replay, plan_replay
from sqsdelay.core.received import Received
from sqsdelay.core.types import Attributes, AttributeValue
from sqsdelay.errors import InvalidInput

DELAY_QUEUE = "p-orders-delay-fifo.fifo"
MAX_BYTES = 1_048_576
LIMITS = send.SendLimits(
    queue_prefix="p-",
    max_delay_seconds=10 * 365 * 86400,
    max_native_delay_seconds=900,
    unrestricted=True,
    wire_format="raw",
    max_message_bytes=MAX_BYTES,
    install_hint=lambda q: f"sqsdelay install {q}",
)


def s(value: str) -> AttributeValue:
    return message_shape.string_attribute(value)


def lambda_record(
    attributes: Attributes,
    arn: str = "arn:aws:sqs:us-east-1:123456789012:p-orders.fifo",
    **system: str,
) -> dict[str, Any]:
    return {
        "messageId": "sqs-1",
        "receiptHandle": "rh-1",
        "body": '{"order": 7}',
        "attributes": {"ApproximateReceiveCount": "1", **system},
        "messageAttributes": {
            k: {"dataType": v["DataType"], "stringValue": v["StringValue"]}
            for k, v in attributes.items()
        },
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
    }


def given_up(incoming: consumer_message.ConsumerMessage, reason: str = "partner down") -> Received:
    """The error-queue message a give-up writes, as replay-errors receives it."""
    attrs = retries.dead_letter_attributes(incoming, reason, DELAY_QUEUE, MAX_BYTES)
    return Received("err-1", "rh-err", incoming.received.body, attrs)


@pytest.mark.parametrize(
    ("queue", "system"),
    [
        ("p-orders.fifo", {"MessageGroupId": "customer-9"}),  # a FIFO destination's group
        ("p-orders", {"MessageGroupId": "tenant-a"}),  # a fair queue's tenant
    ],
)
def test_a_give_up_keeps_its_group_for_the_replay_and_the_attempt_in_its_record(
    queue: str, system: dict[str, str]
) -> None:
    """Issue 58.5: the record kept no group, so a FIFO replay was refused by the forward
    (`no valid sqsdelay.GroupId attribute`) and a fair-queue replay lost its tenant."""
    attrs: Attributes = {
        "tenant": s("a"),
        wire_format.MESSAGE_ID_ATTRIBUTE: s("order-7"),
        wire_format.ATTEMPT_ATTRIBUTE: {"DataType": "Number", "StringValue": "3"},
    }
    arn = f"arn:aws:sqs:us-east-1:123456789012:{queue}"
    incoming = consumer_message.read(lambda_record(attrs, arn, **system))
    dead = given_up(incoming, retries.Backoff(max_attempts=3).reason(4, "partner down"))
    assert dead.attributes[wire_format.GROUP_ID_ATTRIBUTE] == s(system["MessageGroupId"])
    assert wire_format.ATTEMPT_ATTRIBUTE not in dead.attributes  # a replay counts anew
    record = json.loads(dead.attributes[wire_format.FAILURE_ATTRIBUTE]["StringValue"])
    assert record["attempt"] == 3 and record["queue"] == DELAY_QUEUE
    assert record["reason"] == "gave up after 3 retries (max_attempts=3): partner down"
    plan = plan_replay(dead, DELAY_QUEUE)
    assert isinstance(plan, Replay) and plan.queue == DELAY_QUEUE
    # What the worker's hand-over reads: the group, and no delay left.
    assert plan.attributes[wire_format.GROUP_ID_ATTRIBUTE] == s(system["MessageGroupId"])
    assert plan.attributes[wire_format.DELAY_ATTRIBUTE] == s("0")
    assert plan.attributes["tenant"] == s("a")
    assert plan.attributes[wire_format.MESSAGE_ID_ATTRIBUTE] == s("order-7")


def test_a_give_up_without_a_group_has_none_and_a_stale_one_is_not_kept() -> None:
    # A producer's sqsdelay.GroupId on a message of no group is not the message's group.
    attrs: Attributes = {wire_format.GROUP_ID_ATTRIBUTE: s("stale")}
    incoming = consumer_message.read(lambda_record(attrs, "arn:aws:sqs:us-east-1:1:p-orders"))
    dead = given_up(incoming)
    assert wire_format.GROUP_ID_ATTRIBUTE not in dead.attributes
    record = json.loads(dead.attributes[wire_format.FAILURE_ATTRIBUTE]["StringValue"])
    assert record["attempt"] == 0 and record["reason"] == "partner down"


@pytest.mark.parametrize("char", ["x", "\u00e9", "\U0001f600"])
def test_a_long_reason_leaves_a_record_a_replay_can_read(char: str) -> None:
    """The record is cut at 4,096 characters of JSON; a reason cut there left text that is
    not JSON, and a replay refused it. The reason is cut first, so the record stays whole."""
    incoming = consumer_message.read(lambda_record({}, **{"MessageGroupId": "g"}))
    dead = given_up(incoming, "gave up: " + char * 10_000)
    record = json.loads(dead.attributes[wire_format.FAILURE_ATTRIBUTE]["StringValue"])
    assert record["reason"].startswith("gave up: ") and len(record["reason"]) == 300
    assert isinstance(plan_replay(dead, DELAY_QUEUE), Replay)


@pytest.mark.parametrize("delay", [5, 3 * 86_400])  # straight to the queue, or its delay queue
def test_a_retry_carries_the_replay_token_unchanged(delay: int) -> None:
    """A replayed message's `sqsdelay.Replay` token is the guard's and the registry's: its
    retries keep it, so that a retry of a replay is not taken for the first delivery."""
    attrs: Attributes = {
        wire_format.MESSAGE_ID_ATTRIBUTE: s("order-7"),
        wire_format.REPLAY_ATTRIBUTE: s("err-42"),
    }
    incoming = consumer_message.read(lambda_record(attrs, "arn:aws:sqs:us-east-1:1:p-orders"))
    message = retries.retry_message(incoming, attempt=1, delay=delay)
    planned = send.plan("orders", message, LIMITS, now=1_700_000_000.0)
    sent = planned.request["MessageAttributes"]
    assert sent[wire_format.REPLAY_ATTRIBUTE] == s("err-42")
    assert sent[wire_format.ATTEMPT_ATTRIBUTE]["StringValue"] == "1"


@pytest.mark.parametrize(
    ("message", "url", "where"),
    [
        (
            lambda_record({}, "arn:aws:sqs:eu-west-1:222222222222:p-orders"),
            None,
            ("p-orders", "222222222222", "eu-west-1"),
        ),
        (
            {"MessageId": "m", "ReceiptHandle": "r", "Body": "b"},
            "https://sqs.ap-south-1.amazonaws.com/333333333333/p-orders",
            ("p-orders", "333333333333", "ap-south-1"),
        ),
        (  # an emulator's: its account, no Region
            {"MessageId": "m", "ReceiptHandle": "r", "Body": "b"},
            "http://127.0.0.1:4566/000000000000/p-orders",
            ("p-orders", "000000000000", ""),
        ),
        (  # neither
            {"MessageId": "m", "ReceiptHandle": "r", "Body": "b"},
            "http://localhost:9324/queue/p-orders",
            ("p-orders", "", ""),
        ),
    ],
)
def test_where_a_message_came_from_its_queue_account_and_region(
    message: dict[str, Any], url: str | None, where: tuple[str, str, str]
) -> None:
    ref = consumer_message.read(message, url).queue
    assert (ref.name, ref.account, ref.region) == where


def test_backoff_is_exponential_with_full_jitter_capped_then_gives_up() -> None:
    b = retries.Backoff(base_seconds=10, cap_seconds=100, max_attempts=3)
    assert [b.ceiling(n) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 80, 100]
    assert b.delay(3, 0.0) == 0 and b.delay(3, 0.5) == 20 and b.delay(9, 0.999) < 100
    assert not b.gives_up(3) and b.gives_up(4)
    assert "max_attempts=3" in b.reason(4, "partner down")
    with pytest.raises(InvalidInput, match="cap at least as long"):
        retries.Backoff(base_seconds=10, cap_seconds=1)
