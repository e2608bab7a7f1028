"""Helpers for the consumer tests: a received message in each shape a consumer holds, and
the guard's table."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from hypothesis import strategies as st

from sqsdelay.core import wire_format
from sqsdelay.core.types import Attributes

ACCOUNT = "123456789012"

# Message attributes whatever a producer wrote: SQS's names, and values of each data type.
attribute_names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_\-]{0,20}", fullmatch=True)
attribute_values = st.one_of(
    st.text(min_size=0, max_size=30).map(lambda t: {"DataType": "String", "StringValue": t}),
    st.binary(max_size=30).map(lambda b: {"DataType": "Binary", "BinaryValue": b}),
    st.integers().map(lambda i: {"DataType": "Number", "StringValue": str(i)}),
)


def boto3_message(attributes: Attributes | None = None, **system: str) -> dict[str, Any]:
    """A message as boto3's ReceiveMessage returns it, body `{"order": 7}`."""
    return {
        "MessageId": "sqs-1",
        "ReceiptHandle": "rh-1",
        "MD5OfBody": "x",
        "Body": '{"order": 7}',
        "Attributes": {"SentTimestamp": "1700000000000", **system},
        "MessageAttributes": attributes or {},
    }


def lambda_record(
    message: dict[str, Any], queue_name: str, region: str = "us-east-1"
) -> dict[str, Any]:
    """A boto3 ReceiveMessage message as Lambda's SQS event source hands it to a function."""
    attributes: dict[str, Any] = {}
    for name, value in message.get("MessageAttributes", {}).items():
        item: dict[str, Any] = {
            "dataType": value["DataType"],
            "stringListValues": [],
            "binaryListValues": [],
        }
        if "BinaryValue" in value:
            item["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode()
        if "StringValue" in value:
            item["stringValue"] = value["StringValue"]
        attributes[name] = item
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": attributes,
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{region}:{ACCOUNT}:{queue_name}",
        "awsRegion": region,
    }


def receive_one(sqs: Any, url: str, wait: int = 5) -> dict[str, Any]:
    """One message, with every attribute, left in the queue (invisible for 30 s)."""
    reply = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=1,
        WaitTimeSeconds=wait,
        VisibilityTimeout=30,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["All"],
    )
    messages = reply.get("Messages", [])
    assert messages, f"nothing in {url} within {wait} s"
    return dict(messages[0])


def guard_table(dynamodb: Any, name: str) -> str:
    """The table Powertools' idempotency documentation creates: partition key `id` (S), TTL
    on `expiration`."""
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"},
    )
    return name


def install(settings: Any, sqs: Any, *queues: str) -> dict[str, str]:
    """Create the queues as `sqsdelay install` does: their URLs by the name asked for."""
    from sqsdelay.aws.installer import Installer

    reports = Installer(settings, client=sqs).run(list(queues))
    return {r.spec.name.removeprefix(settings.queue_prefix): str(r.url) for r in reports}


def counts(sqs: Any, url: str) -> tuple[int, int, int]:
    """The queue's visible, in-flight and delayed messages (the emulator's are exact)."""
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(got[names[0]]), int(got[names[1]]), int(got[names[2]])


def sent_twice(
    settings: Any, sqs: Any, url: str, body: str, **options: Any
) -> tuple[Any, list[dict[str, Any]]]:
    """`Sender.send(<the destination of url>, body, delay=0, **options)` whose first answer
    is lost on the way back (SQS took the message): botocore sends the same request again, and
    the destination holds two copies. The send's result and the two copies, received."""
    from sqsdelay.aws.sender import Sender
    from tests.support.faultproxy import FaultProxy

    proxy = FaultProxy(settings.endpoint_url or "")
    try:
        proxy.lose_answers("SendMessage", 1)
        sender = Sender(settings.model_copy(update={"endpoint_url": proxy.url}))
        queue = url.rsplit("/", 1)[-1].removeprefix(settings.queue_prefix)
        result = sender.send(queue, body, delay=0, **options)
        assert proxy.responses_cut == 1 and proxy.seen["SendMessage"] == 2, proxy.seen
    finally:
        proxy.close()
    return result, [receive_one(sqs, url), receive_one(sqs, url)]


def received_with_id(ident: str, body: str = "x") -> dict[str, Any]:
    """A boto3 `ReceiveMessage` message carrying sqsdelay's id `ident` (each call a copy of
    its own, as SQS gives every delivery a new `MessageId`)."""
    return {
        "MessageId": uuid.uuid4().hex,
        "ReceiptHandle": "r",
        "Body": body,
        "MessageAttributes": {
            wire_format.MESSAGE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": ident}
        },
    }
