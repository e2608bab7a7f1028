"""Parking long delays in EventBridge Scheduler (pure: requests and rules, no I/O).

A message with more than the park threshold left goes into a one-time schedule instead of
looping. The schedule fires one cycle plus a margin before the due time and sends the
message back to its delay queue through Scheduler's universal target `sqs:sendMessage`;
the last hop is the ordinary loop, exact to the second. See docs/parking.md.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from sqsdelay.core import message_shape, quotas, trace_context, tracing, wire_format
from sqsdelay.core.delays import whole_seconds
from sqsdelay.core.types import Attributes, AttributeValue
from sqsdelay.errors import InvalidMessage

# The universal target for SQS SendMessage (Scheduler user guide, "Using universal targets").
SEND_MESSAGE_TARGET: Final = "arn:aws:scheduler:::aws-sdk:sqs:sendMessage"
# Scheduler quotas page: a schedule's payload (target input included) is at most 256 KB.
MAX_INPUT_BYTES: Final = 256 * 1024
# With FlexibleTimeWindow OFF Scheduler invokes "within a minute" of the time; the margin
# before the due time covers that, and a cancel this close to the firing is too late.
SCHEDULER_PRECISION_SECONDS: Final = 60
MARGIN_SECONDS: Final = 120
# Scheduler's retry policy maxima (botocore's model: 86400 s, 185 attempts): a late message
# beats a dead-lettered one.
RETRY_POLICY: Final = {"MaximumEventAgeInSeconds": 86_400, "MaximumRetryAttempts": 185}
# Failures after which parking waits (circuit breaker) rather than trying the next message.
SERVICE_FAULT_CODES: Final = frozenset(
    {
        "ThrottlingException",
        "ServiceQuotaExceededException",
        "AccessDeniedException",
        "InternalServerException",
        "ResourceNotFoundException",  # the schedule group is missing
    }
)
BREAKER_KEY: Final = "eventbridge-scheduler"


def precision_seconds(cycle: int) -> int:
    """Scheduler's precision, 60 s. A cycle compressed below that runs only against the
    emulator, whose schedule runner fires within 0.2 s: then one cycle."""
    return min(SCHEDULER_PRECISION_SECONDS, cycle)


def margin_seconds(cycle: int) -> int:
    """The safety margin: 120 s; under a compressed cycle, half a cycle, so that the message
    is back with at most one cycle left (at() rounds the fire time down by up to 1 s)."""
    return min(MARGIN_SECONDS, cycle // 2)


def lead_seconds(cycle: int) -> int:
    """How long before the due time a parked message is back in its delay queue."""
    return cycle + margin_seconds(cycle)


def min_park_after_seconds(cycle: int) -> int:
    """The smallest threshold that still leaves a schedule worth creating: the lead, plus
    Scheduler's precision, so the fire time is always in the future."""
    return lead_seconds(cycle) + precision_seconds(cycle)


# At the shipped list prices (data/pricing.yaml: FIFO requests $0.50, Scheduler invocations
# $1.00 per million), parking a 1 KiB message pays once it saves this many batched cycles.
# `cost.pricing.park_break_even_seconds` works it out for any price list; a test holds this
# figure to the shipped one, so that settings need not load the price list to know it.
LIST_PRICE_BREAK_EVEN_CYCLES = 10


def park_after_seconds(cycle: int, cycles: int = LIST_PRICE_BREAK_EVEN_CYCLES) -> int:
    """The park threshold once parking saves `cycles` cycles: a message back one lead before
    it is due still makes the last hop, so the threshold is the lead plus those cycles."""
    return max(min_park_after_seconds(cycle), lead_seconds(cycle) + cycles * cycle)


def fire_at_ms(due_ms: int, cycle: int) -> int:
    """When the schedule fires: whole seconds (at() has no finer), rounded down: earlier."""
    return (due_ms - lead_seconds(cycle) * 1000) // 1000 * 1000


# The last millisecond a datetime (and so an at() expression) can say: 9999-12-31T23:59:59.999.
LAST_EXPRESSIBLE_MS = 253_402_300_799_999


def expressible(fire_ms: int) -> bool:
    return 0 <= fire_ms <= LAST_EXPRESSIBLE_MS


def at_expression(fire_ms: int) -> str:
    return "at(" + datetime.fromtimestamp(fire_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S") + ")"


def fire_ms_of(expression: str) -> int | None:
    """The fire time of an `at(...)` expression in UTC, or None for another kind."""
    if not (expression.startswith("at(") and expression.endswith(")")):
        return None
    when = datetime.strptime(expression[3:-1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def back_attributes(attributes: Attributes, due_ms: int, fire_ms: int) -> Attributes:
    """The attributes a parked message comes back with: the absolute due time, and the
    delay counted from Scheduler's send (rounded up), so that a reader without
    sqsdelay.DueAt (NServiceBus) is never early either. A due time the attributes carry
    stays as it is (`decision._due_carried`: the registry knows a copy of its send by it)."""
    left = whole_seconds(due_ms - fire_ms)
    due = attributes.get(wire_format.DUE_AT_ATTRIBUTE) or message_shape.number_attribute(due_ms)
    return {
        **attributes,
        wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute(str(left)),
        wire_format.DUE_AT_ATTRIBUTE: due,
    }


@dataclass(frozen=True)
class ParkTarget:
    """Where a parked message goes back to, and how Scheduler is allowed to send it."""

    group: str
    role_arn: str
    delay_queue_url: str
    dead_letter_arn: str


def _json_attributes(attributes: Attributes) -> dict[str, Any]:
    # The universal target takes the SendMessage request in the API's JSON form, where a
    # binary value is base64 text.
    out: dict[str, Any] = {}
    for name, value in attributes.items():
        v: dict[str, Any] = {"DataType": value["DataType"]}
        if "BinaryValue" in value:
            v["BinaryValue"] = base64.b64encode(value["BinaryValue"]).decode()
        if "StringValue" in value:
            v["StringValue"] = value["StringValue"]
        out[name] = v
    return out


def create_schedule_request(
    *,
    name: str,
    fire_ms: int,
    target: ParkTarget,
    body: str,
    attributes: Attributes,
    group_id: str,
    dedup: str,
    trace_header: str | None = None,
) -> dict[str, Any]:
    """The CreateSchedule request. Raises InvalidMessage when it exceeds Scheduler's input
    limit (the caller then keeps the message in the loop)."""
    send = {
        "QueueUrl": target.delay_queue_url,
        "MessageBody": body,
        "MessageGroupId": group_id,
        "MessageDeduplicationId": dedup,
        "MessageAttributes": _json_attributes(attributes),
        **tracing.system_attributes(trace_header),
    }
    text = json.dumps(send, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode()) > MAX_INPUT_BYTES:
        raise InvalidMessage(
            f"too large to park ({len(text.encode())} bytes of schedule input, Scheduler "
            f"takes {MAX_INPUT_BYTES}); it stays in the loop"
        )
    return {
        "Name": name,
        "GroupName": target.group,
        "ScheduleExpression": at_expression(fire_ms),
        "ScheduleExpressionTimezone": "UTC",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "ActionAfterCompletion": "DELETE",
        "State": "ENABLED",
        "Target": {
            "Arn": SEND_MESSAGE_TARGET,
            "RoleArn": target.role_arn,
            "Input": text,
            "RetryPolicy": dict(RETRY_POLICY),
            "DeadLetterConfig": {"Arn": target.dead_letter_arn},
        },
    }


def is_own_schedule(existing: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    """After ConflictException: whether the schedule that exists is this very request (a
    retry after a crash, safe to count as done), not some other message's."""
    same_time = existing.get("ScheduleExpression") == request["ScheduleExpression"]
    same_input = existing.get("Target", {}).get("Input") == request["Target"]["Input"]
    return bool(same_time and same_input)


def send_message_of(input_text: str) -> dict[str, Any]:
    """The boto3 SendMessage keyword arguments for a universal target's input (the
    emulator's schedule runner uses this; AWS does the same on its side)."""
    request: dict[str, Any] = json.loads(input_text)
    for value in request.get("MessageAttributes", {}).values():
        if "BinaryValue" in value:
            value["BinaryValue"] = base64.b64decode(value["BinaryValue"])
    return request


# ---- a schedule's dead letter, read back for `replay-errors` ----

# What Scheduler writes to a schedule's dead-letter queue once its retry policy is spent
# (user guide, "Configuring a dead-letter queue"): the target's input as the body, and
# attributes of its own about the failure. SCHEDULE_ARN is how sqsdelay tells such a dead
# letter from the worker's (which carry sqsdelay.Failure instead).
SCHEDULER_DEAD_LETTER_ATTRIBUTES: Final = (
    "ERROR_CODE",
    "ERROR_MESSAGE",
    "EXECUTION_ID",
    "SCHEDULE_ARN",
    "TARGET_ARN",
)
_SCHEDULE_ARN: Final = "SCHEDULE_ARN"
# The universal target's SendMessage request, as parking and recurring schedules write it;
# MessageDeduplicationId is replaced by the replay's own.
_REQUEST_KEYS: Final = frozenset(
    {
        "QueueUrl",
        "MessageBody",
        "MessageAttributes",
        "MessageSystemAttributes",
        "MessageGroupId",
        "MessageDeduplicationId",
        "DelaySeconds",
    }
)
_KEYWORD: Final = "<aws.scheduler."  # a context keyword Scheduler did not fill in
_SHOWN: Final = 80  # characters of a foreign value quoted in a refusal


class NotReplayable(InvalidMessage):
    """A Scheduler dead letter that `replay-errors` cannot send again as its schedule would
    have: it stays in the error queue, and this says why and what to do."""


def is_scheduler_dead_letter(attributes: Mapping[str, Any]) -> bool:
    """Whether an error-queue message is Scheduler's dead letter: it carries the schedule's
    ARN and no sqsdelay.Failure (the worker's dead letters have that record)."""
    return _SCHEDULE_ARN in attributes and wire_format.FAILURE_ATTRIBUTE not in attributes


@dataclass(frozen=True)
class Resend:
    """What a schedule would have sent: the queue (its name, from the input's QueueUrl), the
    body, the attributes (binary values decoded) and the rest of the SendMessage request."""

    queue: str
    body: str
    attributes: Attributes
    group_id: str | None = None
    delay_seconds: int | None = None
    system: dict[str, Any] = field(default_factory=dict)  # MessageSystemAttributes


def resend_of_dead_letter(body: str) -> Resend:
    """The SendMessage request a schedule's dead letter holds (its body is the target's
    input), checked field by field. Raises NotReplayable for anything else: a body that is
    not such a request, a value of the wrong type, or a context keyword Scheduler left
    unfilled (an occurrence whose time is unknown)."""
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        raise NotReplayable(
            "its body is not JSON, so not a SendMessage target's input: receive it from the "
            "error queue yourself"
        ) from None
    if not isinstance(request, dict):
        raise NotReplayable("its body is not a SendMessage request (a JSON object)")
    unknown = sorted(str(k)[:_SHOWN] for k in set(request) - _REQUEST_KEYS)
    if unknown:
        raise NotReplayable(
            f"its SendMessage request has fields sqsdelay does not write ({', '.join(unknown)}):"
            " not one of sqsdelay's schedules; receive it from the error queue yourself"
        )
    url, text = request.get("QueueUrl"), request.get("MessageBody")
    if not isinstance(url, str) or not url.rstrip("/").rpartition("/")[2]:
        raise NotReplayable("its SendMessage request has no QueueUrl naming a queue")
    if not isinstance(text, str) or not text:
        raise NotReplayable("its SendMessage request has no MessageBody")
    if _KEYWORD in body:
        raise NotReplayable(
            "it still holds a Scheduler context keyword (<aws.scheduler.…>): the occurrence's "
            "time is unknown, and sent as it is every occurrence would share one id. Send it "
            "yourself with the time filled in, or let the next occurrence run"
        )
    group = request.get("MessageGroupId")
    if group is not None and (not isinstance(group, str) or not group):
        raise NotReplayable("its MessageGroupId is not a string")
    delay = request.get("DelaySeconds")
    if delay is not None and (
        isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= 900
    ):
        raise NotReplayable("its DelaySeconds is not a whole number of 0 to 900")
    return Resend(
        queue=url.rstrip("/").rpartition("/")[2],
        body=text,
        attributes=_attributes_of(request.get("MessageAttributes", {})),
        group_id=group,
        delay_seconds=delay,
        system=_system_of(request.get("MessageSystemAttributes", {})),
    )


def _attributes_of(raw: object) -> Attributes:
    """Message attributes from the API's JSON form (binary values base64), each checked."""
    if not isinstance(raw, dict) or len(raw) > quotas.MAX_MESSAGE_ATTRIBUTES:
        raise NotReplayable(
            f"its MessageAttributes are not a map of at most {quotas.MAX_MESSAGE_ATTRIBUTES}"
        )
    out: Attributes = {}
    for name, value in raw.items():
        shown = repr(str(name)[:_SHOWN])
        if not isinstance(name, str) or not name or not isinstance(value, dict):
            raise NotReplayable(f"its message attribute {shown} is not a name and a value")
        kind, string, binary = (
            value.get("DataType"),
            value.get("StringValue"),
            value.get("BinaryValue"),
        )
        if not isinstance(kind, str) or set(value) - {"DataType", "StringValue", "BinaryValue"}:
            raise NotReplayable(f"its message attribute {shown} has no DataType, or extra fields")
        if kind.startswith("Binary") and isinstance(binary, str) and string is None:
            try:
                out[name] = {
                    "DataType": kind,
                    "BinaryValue": base64.b64decode(binary, validate=True),
                }
            except (binascii.Error, ValueError):
                raise NotReplayable(f"its message attribute {shown} is not base64") from None
        elif kind.startswith(("String", "Number")) and isinstance(string, str) and binary is None:
            out[name] = AttributeValue(DataType=kind, StringValue=string)
        else:
            raise NotReplayable(
                f"its message attribute {shown} has no value of its DataType ({kind[:_SHOWN]!r})"
            )
    return out


def _system_of(raw: object) -> dict[str, Any]:
    """MessageSystemAttributes: only the trace header, which parking may carry."""
    if raw == {}:
        return {}
    header = raw.get(tracing.ATTRIBUTE) if isinstance(raw, dict) else None
    if (
        not isinstance(raw, dict)
        or set(raw) != {tracing.ATTRIBUTE}
        or not isinstance(header, dict)
        or header.get("DataType") != "String"
        or not isinstance(header.get("StringValue"), str)
    ):
        raise NotReplayable(
            f"its MessageSystemAttributes hold more than a {tracing.ATTRIBUTE} string"
        )
    return {tracing.ATTRIBUTE: {"DataType": "String", "StringValue": header["StringValue"]}}


def replay_of_dead_letter(body: str, token: str, queues: Collection[str]) -> Resend | str:
    """How a schedule's dead letter is sent again: to the queue its schedule would have sent
    it to, when that is one of `queues` (the destination's delay queue, where a parked
    message goes back; the destination, where a recurring occurrence goes), with the
    attributes its schedule carried and a replay token (`token`, new for each replay: the
    registry lets it claim a handed-over record and the guard keys on it, as for the
    worker's own dead letters); no retry count. A string when it is another queue's (not
    ours to move); raises NotReplayable for what cannot be read or sent as it was."""
    resend = resend_of_dead_letter(body)
    if resend.queue not in queues:
        return f"belongs to {resend.queue!r} (a schedule's dead letter)"
    attrs = {k: v for k, v in resend.attributes.items() if k != wire_format.ATTEMPT_ATTRIBUTE}
    attrs[wire_format.REPLAY_ATTRIBUTE] = message_shape.string_attribute(token)
    attrs = trace_context.make_room(attrs, quotas.MAX_MESSAGE_ATTRIBUTES)
    if len(attrs) > quotas.MAX_MESSAGE_ATTRIBUTES:
        raise NotReplayable(
            f"no room for {wire_format.REPLAY_ATTRIBUTE} ({len(attrs)} attributes, SQS takes "
            f"{quotas.MAX_MESSAGE_ATTRIBUTES}): without it a replay is dropped as a duplicate "
            "where the registry or the guard is on. Receive it from the error queue yourself"
        )
    if resend.queue.endswith(wire_format.FIFO_SUFFIX) and resend.group_id is None:
        raise NotReplayable(
            f"it goes to the FIFO queue {resend.queue!r} without a MessageGroupId, which SQS "
            "would refuse: not a schedule of sqsdelay's"
        )
    return Resend(
        resend.queue, resend.body, attrs, resend.group_id, resend.delay_seconds, resend.system
    )
