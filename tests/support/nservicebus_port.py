"""Test doubles: the NServiceBus SQS transport's rules, ported from its own source.

Every rule cites the file and commit of Particular/NServiceBus.AmazonSQS it comes from
(read file by file; the paths are under src/NServiceBus.Transport.SQS/). Only the parts that
decide what goes on the wire, or whether an endpoint accepts a message, are ported; S3 bodies,
SNS, renewal and batching are left out.

- `dispatch`: Sending/MessageDispatcher.cs @ 02384c8d, `ApplyUnicastOperationMapping` and
  `PrepareMessage` (wrapped outgoing messages); Sending/SqsPreparedMessage.cs @ 56946ecd (the
  `MessageId` setter writes the `NServiceBus.MessageId` attribute); TransportMessage.cs and
  ReducedPayloadSerializerConverter.cs @ 090d31e8 (the envelope).
- `pump`: Receiving/DelayedMessagesPump.cs @ 1722174f, `PrepareMessages`; its
  `CopyMessageAttributes` (SqsPreparedMessageExtensions.cs @ eb6bffa6) skips names
  already set.
- `input_queue`: Receiving/InputQueuePump.cs @ 5380f8c4, `ExtractMessageId`,
  `ExtractTransportMessage`, `CouldBeNativeMessage`; Extensions/TransportMessageExtensions.cs
  @ 19d29887, `ConvertBody` (base64 when it decodes, else UTF-16). NServiceBus core then needs
  the message type (`NServiceBus.EnclosedMessageTypes`) to find a handler; a message without
  one fails every retry and ends in the error queue.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

DELAY_SECONDS = "NServiceBus.AmazonSQS.DelaySeconds"
HEADERS = "NServiceBus.AmazonSQS.Headers"
MESSAGE_TYPE_FULL_NAME = "MessageTypeFullName"
MESSAGE_ID = "NServiceBus.MessageId"
ENCLOSED_MESSAGE_TYPES = "NServiceBus.EnclosedMessageTypes"
CONTROL_MESSAGE = "NServiceBus.ControlMessage"
EMPTY_MESSAGE = "empty message"
DELAY_QUEUE_SUFFIX = "-delay.fifo"
AWS_MAXIMUM_QUEUE_DELAY = 900
SQS_MAX_ATTRIBUTES = 10
_LONG = re.compile(r"\s*[+-]?\d+\s*")


def _string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def envelope(payload: bytes, headers: dict[str, str]) -> str:
    """TransportMessage(OutgoingMessage, ...) serialized by ReducedPayloadSerializerConverter."""
    body = base64.b64encode(payload).decode() if payload else EMPTY_MESSAGE
    return json.dumps({"Body": body, "S3BodyKey": None, "Headers": headers}, separators=(",", ":"))


def dispatch(
    destination: str,
    message_id: str,
    headers: dict[str, str],
    payload: bytes,
    delay_seconds: int,
    queue_delay_seconds: int = AWS_MAXIMUM_QUEUE_DELAY,
) -> dict[str, Any]:
    """The SendMessage request an endpoint makes for one unicast send (queue by name)."""
    headers = {**headers}
    headers.setdefault(MESSAGE_ID, message_id)
    attributes = {MESSAGE_ID: _string(message_id)}  # set first: `new SqsPreparedMessage {...}`
    request: dict[str, Any] = {"MessageBody": envelope(payload, headers)}
    if delay_seconds > queue_delay_seconds:
        request["QueueName"] = destination + DELAY_QUEUE_SUFFIX
        request["MessageDeduplicationId"] = request["MessageGroupId"] = message_id
        attributes[DELAY_SECONDS] = _string(str(delay_seconds))
    else:
        request["QueueName"] = destination
        if delay_seconds > 0:
            request["DelaySeconds"] = delay_seconds
    request["MessageAttributes"] = attributes
    return request


def _try_parse_long(text: str | None) -> int:
    # long.TryParse(NumberStyles.Integer): surrounding blanks and a sign; 0 when it fails.
    if text is None or not _LONG.fullmatch(text):
        return 0
    value = int(text)
    return value if -(2**63) <= value < 2**63 else 0


def _copy(target: dict[str, Any], source: dict[str, Any]) -> None:
    for name, value in source.items():
        target.setdefault(name, value)


def pump(
    received: dict[str, Any],
    *,
    now_ms: int,
    destination: str,
    queue_delay_seconds: int = AWS_MAXIMUM_QUEUE_DELAY,
) -> dict[str, Any]:
    """The request DelayedMessagesPump makes for one received delay-queue message
    (boto3's ReceiveMessage shape), with the target queue under `QueueName`."""
    attrs: dict[str, Any] = received.get("MessageAttributes", {})
    system: dict[str, str] = received["Attributes"]
    delay = _try_parse_long(attrs.get(DELAY_SECONDS, {}).get("StringValue"))
    original_id = attrs[MESSAGE_ID]["StringValue"] if MESSAGE_ID in attrs else received["MessageId"]
    sent = int(system["SentTimestamp"])
    at = int(system["ApproximateFirstReceiveTimestamp"])
    if int(system["ApproximateReceiveCount"]) > 1:
        at = now_ms
    elapsed_ms = at - sent
    elapsed = abs(elapsed_ms) // 1000 * (1 if elapsed_ms >= 0 else -1)  # (long)TotalSeconds
    remaining = delay - elapsed
    out: dict[str, Any] = {}
    request: dict[str, Any] = {"MessageBody": received["Body"]}
    if remaining > queue_delay_seconds:
        request["QueueName"] = destination + DELAY_QUEUE_SUFFIX
        out[DELAY_SECONDS] = _string(str(remaining))
        _copy(out, attrs)
        dedup = system["MessageDeduplicationId"]
        if queue_delay_seconds < AWS_MAXIMUM_QUEUE_DELAY:  # acceptance-test mode only
            dedup = str(uuid.uuid4())
        request["MessageGroupId"] = system.get("MessageGroupId", dedup)
        request["MessageDeduplicationId"] = dedup
    else:
        request["QueueName"] = destination
        _copy(out, attrs)
        out.pop(DELAY_SECONDS, None)
        if remaining > 0:
            request["DelaySeconds"] = remaining
    if not original_id:
        original_id = system["MessageDeduplicationId"]
    out[MESSAGE_ID] = _string(original_id)
    request["MessageAttributes"] = out
    return request


class Refused(Exception):
    """The endpoint cannot process the message: it fails and ends in the error queue."""


@dataclass(frozen=True)
class Accepted:
    headers: dict[str, str]
    body: bytes
    native: bool  # read as a native (non-NServiceBus) message


def _convert_body(body: str) -> bytes:
    if body == EMPTY_MESSAGE:
        return b""
    try:  # Convert.TryFromBase64String ignores whitespace
        return base64.b64decode(re.sub(r"\s", "", body), validate=True)
    except (binascii.Error, ValueError):
        return body.encode("utf-16-le")  # Encoding.Unicode


def _native(received: dict[str, Any], headers: dict[str, str]) -> dict[str, str]:
    for name, value in received.get("MessageAttributes", {}).items():
        if "StringValue" in value:
            headers.setdefault(name, value["StringValue"])
    return headers


def input_queue(received: dict[str, Any]) -> Accepted:
    """What an endpoint's input queue does with a message; raises Refused when it fails."""
    attrs: dict[str, Any] = received.get("MessageAttributes", {})
    if len(attrs) > SQS_MAX_ATTRIBUTES:
        raise Refused(f"{len(attrs)} attributes: SQS refuses the send that carries them")
    override = attrs[MESSAGE_ID]["StringValue"] if MESSAGE_ID in attrs else received["MessageId"]
    body = received["Body"]
    native = True
    if HEADERS in attrs:
        headers = _native(received, json.loads(attrs[HEADERS]["StringValue"]))
        headers.setdefault(MESSAGE_ID, override)
    elif MESSAGE_TYPE_FULL_NAME in attrs:
        headers = _native(received, {})
        headers[MESSAGE_ID] = override
        headers[ENCLOSED_MESSAGE_TYPES] = attrs[MESSAGE_TYPE_FULL_NAME]["StringValue"]
    else:
        try:
            parsed = json.loads(body)
            wrapped = parsed.get("Headers") if isinstance(parsed, dict) else None
        except ValueError:
            wrapped = None
        if isinstance(wrapped, dict) and (
            wrapped.get(CONTROL_MESSAGE) == "True"
            or MESSAGE_ID in wrapped
            or ENCLOSED_MESSAGE_TYPES in wrapped
        ):
            headers = {str(k): str(v) for k, v in wrapped.items()}
            headers.setdefault(MESSAGE_ID, override)
            body = parsed.get("Body") or EMPTY_MESSAGE
            native = False
        else:  # CouldBeNativeMessage, or not JSON at all
            headers = _native(received, {})
            headers[MESSAGE_ID] = received["MessageId"]
    if not headers.get(ENCLOSED_MESSAGE_TYPES):
        raise Refused(
            "no message type: NServiceBus cannot pick a handler and moves the message to "
            "the error queue after its retries"
        )
    return Accepted(headers, _convert_body(body), native)
