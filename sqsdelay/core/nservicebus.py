"""The NServiceBus TransportMessage envelope (pure).

An NServiceBus endpoint reading SQS takes a message body of the form
`{"Body": "<base64 payload>", "S3BodyKey": null, "Headers": {...}}`; every transport version
reads it (up to 5.x it is the only form an endpoint accepts). Ported from
Particular/NServiceBus.AmazonSQS: `TransportMessage.cs` (commit 090d31e8: the payload is
base64, the message id header is always set) and `ReducedPayloadSerializerConverter.cs`
(commit 090d31e8: the property order Body, S3BodyKey, Headers). The time format is
NServiceBus core's `DateTimeExtensions.ToWireFormattedString` (Particular/NServiceBus,
src/NServiceBus.Core/DateTimeExtensions.cs, commit 0096d34e).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import UTC, datetime

from sqsdelay.errors import InvalidMessage

MESSAGE_ID = "NServiceBus.MessageId"
ENCLOSED_MESSAGE_TYPES = "NServiceBus.EnclosedMessageTypes"
CONTENT_TYPE = "NServiceBus.ContentType"
TIME_SENT = "NServiceBus.TimeSent"
MESSAGE_INTENT = "NServiceBus.MessageIntent"
CONVERSATION_ID = "NServiceBus.ConversationId"
CORRELATION_ID = "NServiceBus.CorrelationId"
DEFAULT_CONTENT_TYPE = "application/json"


def wire_time(moment: datetime) -> str:
    """`yyyy-MM-dd HH:mm:ss:ffffff Z` in UTC, as NServiceBus writes TimeSent."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S:%f Z")


def check_message_type(message_type: str | None) -> str:
    if not message_type or not message_type.strip():
        raise InvalidMessage(
            "SQSDELAY_WIRE_FORMAT=nservicebus needs a message type: give --message-type "
            "(or message_type=) with the .NET type's full name, e.g. 'Sales.OrderPlaced, Sales'"
        )
    return message_type.strip()


def envelope(
    payload: str,
    *,
    message_id: str,
    message_type: str,
    time_sent: datetime,
    content_type: str = DEFAULT_CONTENT_TYPE,
    trace: Mapping[str, str] | None = None,
) -> str:
    """The SQS body an NServiceBus endpoint of any version processes as `message_type`.
    `trace`: W3C `traceparent` and `tracestate`, the headers NServiceBus 8+ reads its
    OpenTelemetry context from (`Headers.DiagnosticsTraceParent`, `DiagnosticsTraceState`)."""
    headers = {
        MESSAGE_ID: message_id,
        ENCLOSED_MESSAGE_TYPES: check_message_type(message_type),
        CONTENT_TYPE: content_type,
        TIME_SENT: wire_time(time_sent),
        MESSAGE_INTENT: "Send",
        CONVERSATION_ID: message_id,
        CORRELATION_ID: message_id,
        **(trace or {}),
    }
    body = base64.b64encode(payload.encode()).decode()
    # Compact, as System.Text.Json writes it.
    envelope = {"Body": body, "S3BodyKey": None, "Headers": headers}
    return json.dumps(envelope, separators=(",", ":"))
