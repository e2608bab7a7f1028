"""The consumer's pure rules: reading what a consumer received, the retry's send and the
attempt count. The backoff is test_retries.py's, the guard's key and states
test_idempotency.py's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from hypothesis import given, settings
from hypothesis import strategies as st

from sqsdelay.core import consumer_message, retries, send, wire_format
from sqsdelay.core.types import Attributes
from sqsdelay.errors import InvalidDelay, InvalidInput, InvalidMessage
from tests.support.consumerkit import (
    attribute_names,
    attribute_values,
    boto3_message,
    lambda_record,
)

URL = "http://127.0.0.1:4566/123456789012/p-orders"
TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
LIMITS = send.SendLimits(
    queue_prefix="p-",
    max_delay_seconds=10 * 365 * 86400,
    max_native_delay_seconds=900,
    unrestricted=True,
    wire_format="raw",
    max_message_bytes=1_048_576,
    install_hint=lambda q: f"sqsdelay install {q}",
)


def s(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def test_the_three_kinds_read_alike() -> None:
    attrs: Attributes = {
        "tenant": s("a"),
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
        wire_format.MESSAGE_ID_ATTRIBUTE: s("order-7"),
    }
    message = boto3_message(attrs, MessageGroupId="g1", AWSTraceHeader=TRACE)
    record = lambda_record(message, "p-orders")
    kinds = [
        consumer_message.read(message, URL),
        consumer_message.read(record),
        consumer_message.read(SQSRecord(record)),
    ]
    for incoming in kinds:
        assert incoming.received.body == '{"order": 7}'
        assert incoming.received.attributes == attrs
        assert incoming.group_id == "g1" and incoming.trace_header == TRACE
        assert incoming.message_id == "order-7"
        assert incoming.queue.name == "p-orders"
    assert kinds[0].queue.url == URL and kinds[1].queue.account == "123456789012"


@pytest.mark.parametrize(
    ("message", "url", "match"),
    [
        ("a body", None, "a str is not a message from SQS"),
        ({"Body": "x"}, None, "not a message from SQS"),
        (boto3_message(), None, "pass queue_url="),
        ({**lambda_record(boto3_message(), "q"), "eventSourceARN": "arn:aws:sns:x"}, None, "ARN"),
        (
            {
                **lambda_record(boto3_message(), "q"),
                "messageAttributes": {"b": {"dataType": "Binary", "binaryValue": "%%"}},
            },
            None,
            "not base64",
        ),
    ],
)
def test_what_is_not_a_message_from_sqs_is_refused_with_what_to_give(
    message: object, url: str | None, match: str
) -> None:
    with pytest.raises(InvalidMessage, match=match):
        consumer_message.read(message, url)


def test_the_retry_keeps_body_attributes_group_trace_and_id_and_counts_the_attempt() -> None:
    attrs: Attributes = {
        "tenant": s("a"),
        wire_format.MESSAGE_ID_ATTRIBUTE: s("order-7"),
        wire_format.MESSAGE_TYPE_ATTRIBUTE: s("Shop.OrderPlaced"),
        wire_format.ATTEMPT_ATTRIBUTE: {"DataType": "Number", "StringValue": "2"},
    }
    incoming = consumer_message.read(
        boto3_message(attrs, MessageGroupId="g1", AWSTraceHeader=TRACE), URL
    )
    number = retries.attempt_of(incoming.received.attributes) + 1
    message = retries.retry_message(incoming, attempt=number, delay=timedelta(hours=13))
    planned = send.plan("orders", message, LIMITS, now=1_700_000_000.0)
    sent = planned.request["MessageAttributes"]
    assert planned.route == "delay-queue" and planned.queue == "p-orders-delay.fifo"
    assert planned.request["MessageBody"] == '{"order": 7}'
    assert (
        sent["tenant"] == s("a")
        and sent[wire_format.MESSAGE_TYPE_ATTRIBUTE] == attrs[wire_format.MESSAGE_TYPE_ATTRIBUTE]
    )
    assert sent[wire_format.ATTEMPT_ATTRIBUTE]["StringValue"] == "3"
    assert sent[wire_format.MESSAGE_ID_ATTRIBUTE] == s("order-7")
    assert sent[wire_format.GROUP_ID_ATTRIBUTE] == s("g1")
    assert planned.trace_header == TRACE
    # A short retry goes straight, and still carries the id (the guard's key).
    short = send.plan(
        "orders", retries.retry_message(incoming, attempt=3, delay=5), LIMITS, now=1.0
    )
    assert short.route == "direct" and short.request["MessageGroupId"] == "g1"
    assert short.request["MessageAttributes"][wire_format.MESSAGE_ID_ATTRIBUTE] == s("order-7")


def test_a_delay_beyond_any_date_is_refused_with_what_to_do() -> None:
    incoming = consumer_message.read(boto3_message(), URL)
    with pytest.raises(InvalidDelay, match="longer than the maximum"):
        send.plan(
            "orders", retries.retry_message(incoming, attempt=1, delay=10**12), LIMITS, now=1.0
        )
    with pytest.raises(InvalidDelay, match="timezone-aware"):
        send.plan(
            "orders",
            retries.retry_message(incoming, attempt=1, deliver_at=datetime(9999, 12, 31)),
            LIMITS,
            now=1.0,
        )
    far = datetime(9999, 12, 31, tzinfo=UTC)
    with pytest.raises(InvalidDelay, match="SQSDELAY_MAX_DELAY_SECONDS"):
        send.plan(
            "orders", retries.retry_message(incoming, attempt=1, deliver_at=far), LIMITS, now=1.0
        )


def test_a_queue_outside_the_prefix_is_refused() -> None:
    assert retries.requested_queue("p-orders", "p-") == "orders"
    with pytest.raises(InvalidInput, match="SQSDELAY_QUEUE_PREFIX"):
        retries.requested_queue("orders", "p-")


OURS = st.sampled_from(sorted(wire_format.SENDER_ATTRIBUTES | {wire_format.ATTEMPT_ATTRIBUTE}))


@settings(max_examples=300, deadline=None)
@given(
    attrs=st.dictionaries(st.one_of(attribute_names, OURS), attribute_values, max_size=10),
    body=st.text(min_size=1, max_size=50),
    delay=st.integers(0, 10**9),
    lambda_shape=st.booleans(),
)
def test_whatever_a_producer_wrote_the_retry_carries_it_or_is_refused_before_sending(
    attrs: Attributes, body: str, delay: int, lambda_shape: bool
) -> None:
    """Either the retry's request carries the body and every attribute of the producer's as
    received (sqsdelay's own re-derived), or the plan raises a typed error, before any call:
    the original is then never deleted."""
    message = {**boto3_message(attrs), "Body": body}
    incoming = consumer_message.read(
        lambda_record(message, "p-orders") if lambda_shape else message, URL
    )
    try:
        planned = send.plan(
            "orders", retries.retry_message(incoming, attempt=1, delay=delay), LIMITS, now=1.0
        )
    except InvalidInput:
        return
    assert planned.request["MessageBody"] == body
    carried = planned.request.get("MessageAttributes", {})
    for name, value in attrs.items():
        if name not in wire_format.SENDER_ATTRIBUTES and name != wire_format.ATTEMPT_ATTRIBUTE:
            assert carried[name] == value
    assert carried[wire_format.ATTEMPT_ATTRIBUTE]["StringValue"] == "1"


def test_attempts_are_counted_from_the_attribute_and_a_foreign_value_counts_as_none() -> None:
    assert retries.attempt_of({}) == 0
    assert retries.attempt_of({wire_format.ATTEMPT_ATTRIBUTE: s("4")}) == 4
    assert retries.attempt_of({wire_format.ATTEMPT_ATTRIBUTE: s("four")}) == 0
