"""A message a consumer received (`ConsumerMessage`; not the worker's `Received`), whatever
shape it came in (pure): a boto3 `ReceiveMessage` message with its queue URL, a Lambda SQS
event record, or a Powertools `SQSRecord` (whose `raw_event` is that record). Read into one
shape, boto3's, so that it can be sent again byte for byte.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from sqsdelay.core import message_shape, tracing, wire_format
from sqsdelay.core.received import Received
from sqsdelay.core.types import Attributes, AttributeValue
from sqsdelay.errors import InvalidMessage

_WHAT_TO_GIVE = (
    "give a boto3 ReceiveMessage message (a dict with MessageId, ReceiptHandle and Body) with "
    "its queue_url, a Lambda SQS event record (eventSource 'aws:sqs'), or a Powertools "
    "SQSRecord"
)
_ACCOUNT = re.compile(r"[0-9]{12}")
_AWS_HOST = re.compile(r"sqs\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?")


@dataclass(frozen=True)
class QueueRef:
    """Where a received message came from: its URL (boto3) or its name (Lambda), and its
    owner and Region where they are known (from the ARN, or an AWS queue URL), so that a
    consumer of another account's queue retries into that account's queues, not into
    same-named ones of its own."""

    name: str
    url: str | None = None
    account: str = ""
    region: str = ""


@dataclass(frozen=True)
class ConsumerMessage:
    """A message as a consumer received it, read into one shape: the message itself (in
    boto3's shape, as the worker's `Received` holds one) and the queue it came from."""

    received: Received
    queue: QueueRef

    @property
    def group_id(self) -> str | None:
        """The message's group on a FIFO queue or an SQS fair queue."""
        return self.received.system.get("MessageGroupId") or None

    @property
    def trace_header(self) -> str | None:
        return tracing.carried(self.received.system)

    @property
    def message_id(self) -> str | None:
        """sqsdelay's id of the message (NServiceBus.MessageId), None for a message it did not
        send: SQS's MessageId is new on every send, so it is not this id."""
        value = self.received.attributes.get(wire_format.MESSAGE_ID_ATTRIBUTE)
        return value.get("StringValue") if value else None


def read(
    message: object, queue_url: str | None = None, *, need_queue: bool = True
) -> ConsumerMessage:
    """Any of the three kinds, as one `ConsumerMessage`; InvalidMessage for anything else.
    `need_queue`: a boto3 message must come with its queue URL (to send and delete; the
    guard needs neither)."""
    raw = getattr(message, "raw_event", message)  # a Powertools SQSRecord wraps the record
    if not isinstance(raw, Mapping):
        raise InvalidMessage(
            f"a {type(message).__name__} is not a message from SQS: {_WHAT_TO_GIVE}"
        )
    if raw.get("eventSource") == "aws:sqs":
        return _lambda_record(raw)
    if "ReceiptHandle" in raw and "Body" in raw and "MessageId" in raw:
        if not queue_url and not need_queue:
            return _boto3_message(raw, None)
        if not queue_url:
            raise InvalidMessage(
                "a boto3 message does not say which queue it came from: pass queue_url= (the "
                "QueueUrl you gave ReceiveMessage)"
            )
        return _boto3_message(raw, queue_url)
    raise InvalidMessage(
        f"not a message from SQS (keys {sorted(map(str, raw))[:8]}): {_WHAT_TO_GIVE}"
    )


def _boto3_message(raw: Mapping[str, Any], queue_url: str | None) -> ConsumerMessage:
    parsed = urlparse(queue_url or "")
    *_, owner, name = ["", *parsed.path.rstrip("/").split("/")]
    if queue_url is not None and not name:
        raise InvalidMessage(f"queue_url {queue_url[:200]!r} is not a queue URL: give the QueueUrl")
    # SQS's URLs are https://sqs.<region>.amazonaws.com/<account>/<name>; an emulator's may
    # have neither (then the sender's own account and Region are the queue's).
    account = owner if _ACCOUNT.fullmatch(owner) else ""
    host = _AWS_HOST.fullmatch(parsed.hostname or "")
    attributes: Attributes = {}
    for key, value in dict(raw.get("MessageAttributes") or {}).items():
        attributes[str(key)] = _boto3_value(str(key), value)
    received = Received(
        message_id=str(raw["MessageId"]),
        receipt_handle=str(raw["ReceiptHandle"]),
        body=str(raw["Body"]),
        attributes=attributes,
        system={str(k): str(v) for k, v in dict(raw.get("Attributes") or {}).items()},
    )
    return ConsumerMessage(
        received, QueueRef(name, url=queue_url, account=account, region=host[1] if host else "")
    )


def _boto3_value(name: str, value: Any) -> AttributeValue:
    if not isinstance(value, Mapping) or "DataType" not in value:
        raise InvalidMessage(f"message attribute {name!r} has no DataType: {_WHAT_TO_GIVE}")
    out: AttributeValue = {"DataType": str(value["DataType"])}
    if "BinaryValue" in value:
        out["BinaryValue"] = bytes(value["BinaryValue"])
    if "StringValue" in value:
        out["StringValue"] = str(value["StringValue"])
    message_shape.check_attribute_value(name, out)
    return out


def _lambda_record(raw: Mapping[str, Any]) -> ConsumerMessage:
    """Lambda's record: camel-case keys, binary values in base64, the queue by its ARN."""
    arn = str(raw.get("eventSourceARN", ""))
    parts = arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not parts[5]:
        raise InvalidMessage(
            f"eventSourceARN {arn[:200]!r} is not an SQS queue ARN: {_WHAT_TO_GIVE}"
        )
    for key in ("messageId", "receiptHandle", "body"):
        if not isinstance(raw.get(key), str):
            raise InvalidMessage(f"a Lambda SQS record without {key}: {_WHAT_TO_GIVE}")
    attributes: Attributes = {}
    for key, value in dict(raw.get("messageAttributes") or {}).items():
        attributes[str(key)] = _lambda_value(str(key), value)
    received = Received(
        message_id=raw["messageId"],
        receipt_handle=raw["receiptHandle"],
        body=raw["body"],
        attributes=attributes,
        system={str(k): str(v) for k, v in dict(raw.get("attributes") or {}).items()},
    )
    return ConsumerMessage(received, QueueRef(parts[5], account=parts[4], region=parts[3]))


def _lambda_value(name: str, value: Any) -> AttributeValue:
    if not isinstance(value, Mapping) or not isinstance(value.get("dataType"), str):
        raise InvalidMessage(f"message attribute {name!r} has no dataType: {_WHAT_TO_GIVE}")
    out: AttributeValue = {"DataType": value["dataType"]}
    binary = value.get("binaryValue")
    if binary is not None:
        try:
            out["BinaryValue"] = base64.b64decode(binary, validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise InvalidMessage(f"message attribute {name!r}: binaryValue is not base64") from None
    if value.get("stringValue") is not None:
        out["StringValue"] = str(value["stringValue"])
    message_shape.check_attribute_value(name, out)
    return out
