"""A message received from a delay queue (`Received`, in boto3's shape), the system
attributes a receive asks for, and reading one from ReceiveMessage's answer or a Lambda
event's record (pure). A record that cannot be read raises KeyError, TypeError or ValueError;
the Lambda handler leaves it in the queue."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqsdelay.core import tracing
from sqsdelay.core.types import Attributes, AttributeValue

_MILLIS = re.compile(r"[0-9]{1,16}", re.ASCII)

# System attributes the decision needs (docs/wire-format.md, "What the worker reads").
SYSTEM_ATTRIBUTES = (
    "SentTimestamp",
    "ApproximateFirstReceiveTimestamp",
    "ApproximateReceiveCount",
    "MessageDeduplicationId",
    "MessageGroupId",
    tracing.ATTRIBUTE,
)


def parse_natural(text: object) -> int | None:
    """A whole number of at most 16 ASCII digits (a broker timestamp in epoch ms, our due
    time, a count or a delay), or None if the text is not one."""
    return int(text) if isinstance(text, str) and _MILLIS.fullmatch(text) else None


@dataclass(frozen=True)
class Received:
    """A message as received from a delay queue, in boto3's shape."""

    message_id: str
    receipt_handle: str
    body: str
    attributes: Attributes = field(default_factory=dict)
    system: Mapping[str, str] = field(default_factory=dict)

    @property
    def receive_count(self) -> int:
        count = parse_natural(self.system.get("ApproximateReceiveCount", "1"))
        return count if count else 1


def _attribute(value: Mapping[str, Any]) -> AttributeValue:
    # Drop the reserved list fields boto3 returns; keep values byte for byte.
    out: AttributeValue = {"DataType": value.get("DataType") or value["dataType"]}
    if "BinaryValue" in value:
        out["BinaryValue"] = value["BinaryValue"]
    elif value.get("binaryValue") is not None:
        out["BinaryValue"] = base64.b64decode(value["binaryValue"])
    if "StringValue" in value:
        out["StringValue"] = value["StringValue"]
    elif value.get("stringValue") is not None:
        out["StringValue"] = value["stringValue"]
    return out


# The keys of a message: ReceiveMessage's answer, and a Lambda event's record (lower case).
_BOTO_KEYS = ("MessageId", "ReceiptHandle", "Body", "MessageAttributes", "Attributes")
_LAMBDA_KEYS = ("messageId", "receiptHandle", "body", "messageAttributes", "attributes")


def _read(message: Mapping[str, Any], keys: tuple[str, str, str, str, str]) -> Received:
    ident, handle, body, attributes, system = keys
    return Received(
        message_id=message[ident],
        receipt_handle=message[handle],
        body=message.get(body, ""),
        attributes={k: _attribute(v) for k, v in message.get(attributes, {}).items()},
        system=dict(message.get(system, {})),
    )


def from_boto(message: Mapping[str, Any]) -> Received:
    """A message from ReceiveMessage."""
    return _read(message, _BOTO_KEYS)


def from_lambda(record: Mapping[str, Any]) -> Received:
    """A record of a Lambda SQS event (lower-case keys, base64 binary values)."""
    return _read(record, _LAMBDA_KEYS)
