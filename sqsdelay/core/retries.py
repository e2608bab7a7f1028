"""A consumer's retry later (pure): which attempt a message is, what its retry sends, and the
backoff that spaces the attempts (exponential with full jitter, a cap, a maximum number of
attempts, then the error queue).

The retry is an ordinary sqsdelay send (`core/send.py` plans it): the same body, the
caller's attributes, the message's group and trace header, its id, and `sqsdelay.Attempt`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqsdelay.core import failure_record, identity, message_shape, wire_format
from sqsdelay.core.consumer_message import ConsumerMessage
from sqsdelay.core.received import Received, parse_natural
from sqsdelay.core.send import Message
from sqsdelay.core.types import Attributes
from sqsdelay.errors import InvalidInput, InvalidMessage, InvalidQueueName

# The reason a give-up writes into its failure record: an exception's message can be long,
# and JSON escapes a character in up to 12, so 300 keep the record under its 4,096.
MAX_REASON_CHARS = 300


def attempt_of(attributes: Attributes) -> int:
    """The retries made so far: `sqsdelay.Attempt`, 0 for a first delivery (or a value that
    is not a count: a producer's, not ours)."""
    value = attributes.get(wire_format.ATTEMPT_ATTRIBUTE)
    count = parse_natural(value.get("StringValue")) if value else None
    return count or 0


def retry_message(incoming: ConsumerMessage, *, attempt: int, **when: object) -> Message:
    """The send that retries `incoming` as retry number `attempt`: the body as received; the
    attributes as received, less those the sender sets itself (it sets them again: the id,
    the message type), with `sqsdelay.Attempt`; the group and the trace header. `when` is
    `delay=` or `deliver_at=`, checked by the sender."""
    received = incoming.received
    kept = {k: v for k, v in received.attributes.items() if k not in wire_format.SENDER_ATTRIBUTES}
    kept.pop(wire_format.ATTEMPT_ATTRIBUTE, None)
    kept[wire_format.ATTEMPT_ATTRIBUTE] = message_shape.number_attribute(attempt)
    type_value = received.attributes.get(wire_format.MESSAGE_TYPE_ATTRIBUTE)
    message_type = type_value.get("StringValue") if type_value else None
    ident = incoming.message_id
    return Message(
        received.body,
        attributes=kept,
        message_type=message_type,
        # Its own id on every hop (a foreign message gets one now, and keeps it: `retry_flow`
        # has the sender refuse a retry without room for it): the guard's stable key.
        id=ident if ident is not None and identity.is_message_id(ident) else None,
        group_id=incoming.group_id,
        trace_header=incoming.trace_header,
        **when,  # type: ignore[arg-type]
    )


def dead_letter_attributes(
    incoming: ConsumerMessage, reason: str, delay_queue: str, max_bytes: int
) -> Attributes:
    """The error queue's attributes for a message the backoff gave up on: the worker's
    failure record (`failure_record.attributes`), written as if the message had failed in
    its delay queue with no delay left, which is what `replay-errors` restores: a replay
    hands it over at once. Its group rides in `sqsdelay.GroupId`, as in any delay-queue
    message, so that the hand-over puts it back in its FIFO group or fair-queue tenant (the
    forward refuses a FIFO message without it). `sqsdelay.Attempt` is left out, so a replay
    starts counting anew; the record keeps the attempt and the reason. Without room for the
    record, the attributes as received."""
    received = incoming.received
    dropped = {wire_format.ATTEMPT_ATTRIBUTE, wire_format.GROUP_ID_ATTRIBUTE}
    attrs = {k: v for k, v in received.attributes.items() if k not in dropped}
    attrs[wire_format.DELAY_ATTRIBUTE] = message_shape.string_attribute("0")
    if incoming.group_id is not None:
        attrs[wire_format.GROUP_ID_ATTRIBUTE] = message_shape.string_attribute(incoming.group_id)
    failing = Received(
        received.message_id, received.receipt_handle, received.body, attrs, received.system
    )
    # Cut here: the record is cut at its own limit, and a cut JSON text cannot be replayed.
    folded = failure_record.attributes(failing, reason[:MAX_REASON_CHARS], delay_queue, max_bytes)
    if wire_format.FAILURE_ATTRIBUTE not in folded:
        return dict(received.attributes)
    return _with_attempt(folded, attempt_of(received.attributes), received.body, max_bytes)


def _with_attempt(attrs: Attributes, attempt: int, body: str, max_bytes: int) -> Attributes:
    """The failure record with the attempt the message failed on (the retries made)."""
    raw = message_shape.string_value(attrs, wire_format.FAILURE_ATTRIBUTE) or ""
    try:
        record = json.loads(raw)
    except json.JSONDecodeError:
        return attrs
    if not isinstance(record, dict):
        return attrs
    text = json.dumps({**record, "attempt": attempt})
    out = {**attrs, wire_format.FAILURE_ATTRIBUTE: message_shape.string_attribute(text)}
    try:
        message_shape.check_fits(body, out, max_bytes)
    except InvalidMessage:
        return attrs  # the record as the worker writes it: still replayable
    return out if len(text) <= failure_record.MAX_RECORD_CHARS else attrs


def requested_queue(physical: str, prefix: str) -> str:
    """The name to give the sender for the queue a message came from: without the prefix the
    sender adds."""
    if not prefix:
        return physical
    if not physical.startswith(prefix):
        raise InvalidQueueName(
            f"the message came from {physical!r}, which is not under the queue prefix "
            f"{prefix!r} (SQSDELAY_QUEUE_PREFIX): retry it with the prefix it was sent with"
        )
    return physical[len(prefix) :]


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter (AWS Architecture Blog, "Exponential Backoff And
    Jitter", 2015: `random_between(0, min(cap, base * 2 ** attempt))`): retry number n waits a
    uniform draw below min(cap, base * 2^(n-1)). After `max_attempts` retries the next
    failure sends the message to the error queue."""

    base_seconds: float = 60.0
    cap_seconds: float = 7 * 86_400.0
    max_attempts: int = 10

    def __post_init__(self) -> None:
        if not (self.base_seconds > 0 and self.cap_seconds >= self.base_seconds):
            raise InvalidInput(
                f"backoff base {self.base_seconds} s and cap {self.cap_seconds} s: give a base "
                "above 0 and a cap at least as long"
            )
        if self.max_attempts < 0:
            raise InvalidInput(f"max_attempts {self.max_attempts}: give 0 or more")

    def ceiling(self, attempt: int) -> float:
        """The longest wait before retry number `attempt` (1, 2, ...)."""
        return min(self.cap_seconds, self.base_seconds * 2.0 ** min(max(attempt, 1) - 1, 60))

    def delay(self, attempt: int, draw: float) -> float:
        """The wait before retry number `attempt`, for a uniform `draw` in [0, 1)."""
        return min(max(draw, 0.0), 1.0) * self.ceiling(attempt)

    def gives_up(self, attempt: int) -> bool:
        """Whether retry number `attempt` is one too many."""
        return attempt > self.max_attempts

    def reason(self, attempt: int, why: str) -> str:
        return f"gave up after {attempt - 1} retries (max_attempts={self.max_attempts}): {why}"
