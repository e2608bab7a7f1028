"""From received messages to outgoing SendMessageBatch entries (pure, shared by the ECS
worker and the Lambda handler)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sqsdelay import wire
from sqsdelay._types import Attributes, AttributeValue
from sqsdelay.decision import (
    ClockOffset,
    Decision,
    HandOver,
    Limits,
    Poison,
    Received,
    Requeue,
    decide,
)

Target = Literal["delay", "destination", "error"]

# System attributes the decision needs (DESIGN.md, "The worker").
SYSTEM_ATTRIBUTES = (
    "SentTimestamp",
    "ApproximateFirstReceiveTimestamp",
    "ApproximateReceiveCount",
    "MessageDeduplicationId",
    "MessageGroupId",
)


@dataclass(frozen=True)
class Outgoing:
    source: Received
    decision: Decision
    target: Target
    entry: dict[str, Any]  # a SendMessageBatch entry without its Id
    size: int


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


def from_boto(message: Mapping[str, Any]) -> Received:
    """A message from ReceiveMessage."""
    return Received(
        message_id=message["MessageId"],
        receipt_handle=message["ReceiptHandle"],
        body=message.get("Body", ""),
        attributes={k: _attribute(v) for k, v in message.get("MessageAttributes", {}).items()},
        system=dict(message.get("Attributes", {})),
    )


def from_lambda(record: Mapping[str, Any]) -> Received:
    """A record of a Lambda SQS event (lower-case keys, base64 binary values)."""
    return Received(
        message_id=record["messageId"],
        receipt_handle=record["receiptHandle"],
        body=record.get("body", ""),
        attributes={k: _attribute(v) for k, v in record.get("messageAttributes", {}).items()},
        system=dict(record.get("attributes", {})),
    )


def outgoing(received: Received, decision: Decision) -> Outgoing:
    attributes: Attributes
    entry: dict[str, Any] = {"MessageBody": received.body}
    if isinstance(decision, Requeue):
        target: Target = "delay"
        attributes = decision.attributes
        entry["MessageGroupId"] = decision.group_id
        entry["MessageDeduplicationId"] = decision.dedup_id
    elif isinstance(decision, HandOver):
        target = "destination"
        attributes = decision.attributes
        if decision.remaining_seconds:
            entry["DelaySeconds"] = decision.remaining_seconds
    else:
        assert isinstance(decision, Poison)
        target = "error"
        attributes = decision.attributes
    if attributes:
        entry["MessageAttributes"] = attributes
    return Outgoing(received, decision, target, entry, wire.message_size(received.body, attributes))


def decide_batch(
    received: list[Received],
    *,
    local_ms: int,
    offset: ClockOffset,
    lim: Limits,
    source_queue: str,
    last_errors: Mapping[str, str] | None = None,
) -> list[Outgoing]:
    """Decide a received batch. First receives also feed the clock-offset estimate, which
    the redeliveries in the same batch already use. `local_ms` is when the batch arrived."""
    for r in received:
        first = r.system.get("ApproximateFirstReceiveTimestamp", "")
        if r.receive_count == 1 and first.isdigit():
            offset.observe(int(first), local_ms)
    estimate = offset.estimate()
    errors = last_errors or {}
    return [
        outgoing(
            r,
            decide(
                r,
                local_now_ms=local_ms,
                offset_ms=estimate,
                lim=lim,
                source_queue=source_queue,
                last_error=errors.get(r.message_id),
            ),
        )
        for r in received
    ]


def event_fields(out: Outgoing, destination: str) -> tuple[str, dict[str, Any]]:
    """The log event for an outgoing message once it was sent."""
    d = out.decision
    fields: dict[str, Any] = {
        "message_id": out.source.message_id,
        "group_id": out.source.system.get("MessageGroupId"),
        "destination": destination,
        "receive_count": out.source.receive_count,
        "size_bytes": out.size,
    }
    if isinstance(d, Poison):
        return "delay.dead_lettered", {**fields, "reason": d.reason}
    fields.update(remaining_seconds=d.remaining_seconds, due_at_ms=d.due_ms)
    return ("delay.requeued" if isinstance(d, Requeue) else "delay.handed_over"), fields
