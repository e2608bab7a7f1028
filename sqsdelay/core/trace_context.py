"""W3C trace context (`traceparent`, `tracestate`) across the delay (pure; the OpenTelemetry
calls are `sqsdelay/otel.py`'s, docs/opentelemetry.md).

The carrier is two String message attributes named as the W3C headers, the names
opentelemetry-instrumentation-botocore writes into SQS and SNS messages too, so that a
consumer's instrumentation finds them. They are the user's kind of attribute, not
sqsdelay's: the worker carries them unchanged on every hop, as it carries any attribute
(`message_shape.without_own`). Only sqsdelay's sender adds them, and only into room nothing
else needs: after the caller's attributes and sqsdelay's own, within SQS's ten and the size
limit. Without room it sends without them and says so (`Placed.skipped`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sqsdelay.core import message_shape, quotas, wire_format
from sqsdelay.core.received import Received
from sqsdelay.core.types import Attributes

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
FIELDS = (TRACEPARENT, TRACESTATE)
# version-traceid-parentid-flags, lower-case hex; all-zero ids and version ff are invalid
# (W3C Trace Context, section 3.2). A later version may append fields after a dash.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
# tracestate: at most 32 list members, printable ASCII; kept whole or dropped whole.
_TRACESTATE = re.compile(r"[\x20-\x7e]{0,512}", re.ASCII)


def is_traceparent(value: object) -> bool:
    if not isinstance(value, str):
        return False
    m = _TRACEPARENT.fullmatch(value)
    if m is None:
        return False
    version, trace_id, parent_id, _, rest = m.groups()
    if version == "ff" or trace_id == "0" * 32 or parent_id == "0" * 16:
        return False
    return version != "00" or rest is None  # version 00 has exactly four fields


def is_tracestate(value: object) -> bool:
    return isinstance(value, str) and bool(_TRACESTATE.fullmatch(value))


def valid(context: Mapping[str, str] | None) -> dict[str, str]:
    """The valid part of a trace context given as headers ({} without a valid traceparent)."""
    return carried({k: message_shape.string_attribute(v) for k, v in (context or {}).items()})


def _string(attributes: Attributes, name: str) -> str | None:
    value = attributes.get(name)
    if value is None or value.get("DataType") != "String":
        return None
    text = value.get("StringValue")
    return text if isinstance(text, str) else None


def carried(attributes: Attributes) -> dict[str, str]:
    """The valid trace context among a message's attributes ({} when it has none): a
    tracestate only beside a valid traceparent."""
    parent = _string(attributes, TRACEPARENT)
    if not is_traceparent(parent):
        return {}
    assert parent is not None
    out = {TRACEPARENT: parent}
    state = _string(attributes, TRACESTATE)
    if state and is_tracestate(state):
        out[TRACESTATE] = state
    return out


def malformed(attributes: Attributes) -> str | None:
    """Why a received message's trace context is not one (None: valid, or none at all)."""
    if TRACEPARENT in attributes:
        parent = attributes[TRACEPARENT]
        if not is_traceparent(_string(attributes, TRACEPARENT)):
            shown = parent.get("StringValue", parent.get("DataType"))
            return f"traceparent {str(shown)[:60]!r} is not a W3C traceparent"
    if TRACESTATE in attributes:
        if TRACEPARENT not in attributes:
            return "tracestate without a traceparent"
        if not is_tracestate(_string(attributes, TRACESTATE)):
            return "tracestate is not printable ASCII of at most 512 characters"
    return None


def sanitized(received: Received) -> tuple[Received, str | None]:
    """The message with a malformed trace context left behind, and why (None: unchanged).
    Whatever a producer wrote there must never stop a hop, nor reach a consumer whose
    instrumentation would read it."""
    reason = malformed(received.attributes)
    if reason is None:
        return received, None
    kept = {k: v for k, v in received.attributes.items() if k not in FIELDS}
    return dataclasses.replace(received, attributes=kept), reason


@dataclass(frozen=True)
class Placed:
    attributes: Attributes
    added: tuple[str, ...] = ()  # the fields sqsdelay added
    kept: bool = False  # a traceparent was there already (botocore's instrumentation, a retry)
    skipped: tuple[str, ...] = ()  # the fields with no room


def place(
    body: str,
    attributes: Attributes,
    context: Mapping[str, str] | None,
    max_bytes: int,
    *,
    reserve: int = 0,
) -> Placed:
    """`attributes` with the trace context added where there is room: the traceparent, then
    the tracestate, each only if the message still fits SQS's ten attributes less `reserve`
    (kept for sqsdelay's own later hops) and the size limit. An attribute named
    traceparent already there is kept as it is (no second injection: it is the context of
    whoever put it there; the sender takes a valid one out first and places it here as the
    context, `split`, so that it too takes only room nothing else needs)."""
    if TRACEPARENT in attributes:
        return Placed(attributes, kept=True)
    given = {k: v for k, v in (context or {}).items() if k in FIELDS and v}
    if not is_traceparent(given.get(TRACEPARENT)):
        return Placed(attributes)
    out = dict(attributes)
    added: list[str] = []
    skipped: list[str] = []
    for name in FIELDS:
        if name not in given or (name == TRACESTATE and not is_tracestate(given[name])):
            continue
        trial = {**out, name: message_shape.string_attribute(given[name])}
        fits = len(trial) <= quotas.MAX_MESSAGE_ATTRIBUTES - reserve
        if fits and message_shape.message_size(body, trial) <= max_bytes and not skipped:
            out, added = trial, [*added, name]
        else:
            skipped.append(name)
    return Placed(out, tuple(added), skipped=tuple(skipped))


def without(attributes: Attributes) -> Attributes:
    """`attributes` less the trace context."""
    return {k: v for k, v in attributes.items() if k not in FIELDS}


def split(
    given: Mapping[str, Any], context: Mapping[str, str] | None
) -> tuple[Attributes, Mapping[str, str] | None]:
    """A send's own attributes, and the trace context to place: the one its attributes
    carry (a retry of a traced message), taken out so that it is placed as the sender's own
    is, last and into room nothing else needs (`place`); else `context`, the sender's."""
    attributes: Attributes = dict(given)
    own = carried(attributes)
    return (without(attributes), own) if own else (attributes, context)


def make_room(attributes: Attributes, limit: int) -> Attributes:
    """`attributes` within `limit` attributes by dropping the trace context first (its
    tracestate, then its traceparent): the one kind of attribute a message may lose, never a
    caller's own nor sqsdelay's."""
    out = dict(attributes)
    for name in (TRACESTATE, TRACEPARENT):
        if len(out) > limit:
            out.pop(name, None)
    return out


def place_in_send(
    body: str, attributes: Attributes, context: Mapping[str, str] | None, max_bytes: int, route: str
) -> Placed:
    """The sender's placement, after every attribute of the caller's and of sqsdelay's: into
    the delay queue one attribute stays free for the worker's `sqsdelay.DueAt` (its first
    hop adds it, and parking needs it) unless the send's own due time, or the fraction of a
    second (NServiceBus wire format), holds its place."""
    own = {wire_format.DUE_AT_ATTRIBUTE, wire_format.DELAY_MS_ATTRIBUTE}
    reserve = route == "delay-queue" and not own & set(attributes)
    return place(body, attributes, context, max_bytes, reserve=int(reserve))


@dataclass(frozen=True)
class Hop:
    """A span of the worker's, recorded by the step (pure) for the driver to turn into an
    OpenTelemetry span (`sqsdelay.otel`): one message moved, and the trace context it
    carries, whose span it links to (or is the child of)."""

    operation: str  # send, requeue, hand-over, park, dead-letter
    destination: str  # the queue it was sent to (a parked message's: the delay queue)
    sqs_message_id: str  # the SQS id of the message moved
    message_id: str  # sqsdelay's id of it
    due_ms: int | None  # its due time, epoch ms (broker time)
    context: Mapping[str, str]  # the carried traceparent and tracestate ({}: none)
    start_ms: int  # epoch ms, local clock: the batch's arrival
    end_ms: int  # when the move succeeded


OPERATIONS: Final = {
    "delay.requeued": "requeue",
    "delay.handed_over": "hand-over",
    "delay.forwarded": "hand-over",
    "delay.parked": "park",
    "delay.dead_lettered": "dead-letter",
}
