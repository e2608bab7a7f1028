"""The failure record: what a poison message carries to the error queue in one
`sqsdelay.Failure` attribute (reason, source queue, original delay and due time), written
when the worker dead-letters it and read back by `replay-errors` (pure; the replay's flow is
`core/replay.py`)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqsdelay.core import message_shape, queue_names, quotas, trace_context, wire_format
from sqsdelay.core.received import Received, parse_natural
from sqsdelay.core.types import Attributes
from sqsdelay.errors import InvalidMessage, InvalidQueueName

# A record longer than this is cut: its reason is free text (an exception's message).
MAX_RECORD_CHARS = 4096


def attributes(received: Received, reason: str, source_queue: str, max_bytes: int) -> Attributes:
    """Attributes for the error queue: the original ones, with our delay attributes folded
    into one `sqsdelay.Failure` record (reason and what replay needs), when it fits."""
    original = received.attributes
    record = {
        "reason": reason,
        "queue": source_queue,
        "delay_seconds": message_shape.string_value(original, wire_format.DELAY_ATTRIBUTE),
        "due_at": message_shape.string_value(original, wire_format.DUE_AT_ATTRIBUTE),
        "receive_count": received.receive_count,
    }
    attrs = message_shape.without_own(original)
    attrs[wire_format.FAILURE_ATTRIBUTE] = message_shape.string_attribute(
        json.dumps(record)[:MAX_RECORD_CHARS]
    )
    try:
        message_shape.check_fits(received.body, attrs, max_bytes)
    except InvalidMessage:
        return dict(original)  # no room: keep it intact; the reason is in the log event
    return attrs


def _sources(delay_queue: str) -> set[str]:
    """The queues whose dead letters go back to `delay_queue`: itself and, for a FIFO
    destination, its staging queue (a forward the destination refused goes through the
    delay queue again: found by the state machine of the whole way, issue 58)."""
    try:
        destination = queue_names.destination_of_delay_queue(delay_queue)
    except InvalidQueueName:
        return {delay_queue}
    if not queue_names.is_fifo(destination):
        return {delay_queue}
    return {delay_queue, queue_names.staging_queue_name(destination)}


@dataclass(frozen=True)
class Replay:
    """Where a dead-lettered message goes back to, and with which attributes (pure)."""

    queue: str
    attributes: Attributes


def plan_replay(message: Received, delay_queue: str) -> Replay | str:
    """A Replay for a message dead-lettered from `delay_queue`, or why it cannot be replayed.

    A replay is a new delivery of the same message (docs/consumers.md#replay): its id, its
    delay and due time as recorded, no retry count (`sqsdelay.Attempt`: it starts again),
    and a replay token, `sqsdelay.Replay`, new for each replay (the error-queue message's
    own SQS MessageId). The registry lets that token claim a message handed over before,
    and the guard keys on it: without it, a replay of a message that reached its destination
    once was dropped as a duplicate, or skipped as processed (issue 58)."""
    raw = message_shape.string_value(message.attributes, wire_format.FAILURE_ATTRIBUTE)
    if raw is None:
        return "no sqsdelay.Failure record (no room for it), so its queue is unknown"
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        return "sqsdelay.Failure record is not JSON"
    if not isinstance(record, dict):
        return "sqsdelay.Failure record is not a JSON object"
    if record.get("queue") not in _sources(delay_queue):
        return f"belongs to {record.get('queue')!r}"
    delay = str(record.get("delay_seconds") or "")
    seconds = parse_natural(delay)
    due = parse_natural(str(record.get("due_at") or ""))
    if seconds is None and due is not None:
        # Dead-lettered from a FIFO destination's staging queue (the forward was refused):
        # its hand-over left no delay attribute, only the due time, which decides.
        delay, seconds = "0", 0
    if seconds is None:
        return f"no valid delay to restore ({str(record.get('reason', 'unknown reason'))[:300]})"
    dropped = {wire_format.FAILURE_ATTRIBUTE, wire_format.ATTEMPT_ATTRIBUTE}
    attrs = {k: v for k, v in message.attributes.items() if k not in dropped}
    attrs[wire_format.DELAY_ATTRIBUTE] = message_shape.string_attribute(delay)
    if due is not None:  # keeps the original due time; if it has passed, delivery is immediate
        attrs[wire_format.DUE_AT_ATTRIBUTE] = message_shape.number_attribute(due)
    attrs[wire_format.REPLAY_ATTRIBUTE] = message_shape.string_attribute(message.message_id)
    if len(attrs) > quotas.MAX_MESSAGE_ATTRIBUTES and seconds == 0:
        # Nothing left to wait (a give-up's record): the due time adds nothing but a slot.
        attrs.pop(wire_format.DUE_AT_ATTRIBUTE, None)
    # The trace context gives way next: a replay without it is a replay.
    attrs = trace_context.make_room(attrs, quotas.MAX_MESSAGE_ATTRIBUTES)
    if len(attrs) > quotas.MAX_MESSAGE_ATTRIBUTES:
        # Without its token a replay is dropped as a duplicate where the registry or the
        # guard is on: it stays in the error queue rather than be lost there.
        return (
            f"no room for {wire_format.REPLAY_ATTRIBUTE} ({len(attrs)} attributes, SQS takes "
            f"{quotas.MAX_MESSAGE_ATTRIBUTES}): move one of its attributes into the body and "
            "send it again, or receive it from the error queue yourself"
        )
    return Replay(delay_queue, attrs)
