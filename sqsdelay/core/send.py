"""Sending, planned: the messages a caller gives, and the requests that send them (the
route, the queue, the attributes, the FIFO group and deduplication id), with no I/O.

`aws/sender.py` makes the calls; this module decides what they are, as `decision.py` does
for the worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypedDict

from sqsdelay.core import (
    batch_entries,
    defaults,
    fifo_dedup,
    identity,
    message_shape,
    message_tags,
    nservicebus,
    parking,
    queue_names,
    quotas,
    registry,
    trace_context,
    tracing,
    wire_format,
)
from sqsdelay.core.delays import DelayLike, delay_milliseconds, route, whole_seconds
from sqsdelay.core.types import Attributes, Route, Sent, WireFormat
from sqsdelay.errors import (
    InvalidDelay,
    InvalidMessage,
    MessageDelayTooLong,
    MessageTooLarge,
    TooManyAttributes,
)


@dataclass(frozen=True)
class SendLimits:
    """What a send is checked and routed by; `Settings.send_limits()` builds it."""

    queue_prefix: str
    max_delay_seconds: int
    max_native_delay_seconds: int
    unrestricted: bool
    wire_format: WireFormat
    max_message_bytes: int
    # The command that installs a destination's delay queue, for the error that needs one.
    install_hint: Callable[[str], str]


@dataclass(frozen=True)
class Message:
    """A message to send. Give either `delay` (seconds or timedelta) or `deliver_at`.

    `message_type` is the receiving NServiceBus endpoint's message type (the .NET type's full
    name): required when SQSDELAY_WIRE_FORMAT=nservicebus; in raw mode it is sent as the
    `MessageTypeFullName` attribute that NServiceBus.AmazonSQS 6+ reads."""

    body: str
    delay: DelayLike | None = None
    deliver_at: datetime | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    message_type: str | None = None
    id: str | None = None  # the message's id (default: a new UUID); the registry's key
    # The message group: required in a FIFO destination, where the message joins its group
    # when it is due (docs/fifo-destinations.md); optional in a standard one, an SQS fair
    # queue's tenant, set on the hand-over.
    group_id: str | None = None
    # The X-Ray trace header (AWSTraceHeader) carried through every hop; default: the
    # ambient one (_X_AMZN_TRACE_ID), if any.
    trace_header: str | None = None
    # A FIFO destination's MessageDeduplicationId, as SQS takes it: a send with the id of
    # one that reached the destination in the last five minutes is dropped there, on every
    # route (docs/fifo-destinations.md). Refused for a standard destination, as SQS does.
    deduplication_id: str | None = None
    tags: Mapping[str, str] | None = None  # a bulk cancel's selection (core/message_tags.py)
    # Instead of a delay: debounce by `id`, at most `max_wait` after the first (core/debounce.py)
    debounce: DelayLike | None = None
    max_wait: DelayLike | None = None


class MessageOptions(TypedDict, total=False):
    """The keyword arguments of `send`: `Message`'s fields after the body."""

    delay: DelayLike | None
    deliver_at: datetime | None
    attributes: Mapping[str, Any]
    message_type: str | None
    id: str | None
    group_id: str | None
    trace_header: str | None
    deduplication_id: str | None
    tags: Mapping[str, str] | None
    debounce: DelayLike | None
    max_wait: DelayLike | None


@dataclass(frozen=True)
class PlannedSend:
    requested: str  # the queue as the caller named it, without the prefix
    destination: str
    queue: str
    route: Route
    delay_seconds: int
    size_bytes: int
    request: dict[str, Any]
    message_id: str  # the message's own id (`id=`, or a new UUID)
    nservicebus_message_id: str | None = None
    delay_ms: int = 0  # the delay asked for, to the millisecond (rounded up)
    trace_header: str | None = None  # AWSTraceHeader, on every hop
    trace: trace_context.Placed | None = None  # W3C trace context (docs/opentelemetry.md)
    tags: message_tags.Tags = ()  # sorted (core/message_tags.py)


@dataclass(frozen=True)
class SendResult:
    """`message_id`: the message's own id (`id=`, or a new UUID), the one `cancel`,
    `reschedule` and `scheduled` use; `sqs_message_id`: SQS's id of what was sent (None when
    parked, or a duplicate that sent nothing)."""

    message_id: str
    route: Sent
    queue: str
    queue_url: str
    destination: str
    delay_seconds: int
    size_bytes: int
    index: int = 0
    sqs_message_id: str | None = None
    nservicebus_message_id: str | None = None  # the NServiceBus.MessageId it carries
    # The registry had this id scheduled already: nothing was sent.
    duplicate: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "duplicate": self.duplicate,
            "message_id": self.message_id,
            "sqs_message_id": self.sqs_message_id,
            "route": self.route,
            "queue": self.queue,
            "queue_url": self.queue_url,
            "destination": self.destination,
            "delay_seconds": self.delay_seconds,
            "size_bytes": self.size_bytes,
            "nservicebus_message_id": self.nservicebus_message_id,
        }


@dataclass(frozen=True)
class SendFailure:
    index: int
    queue: str
    code: str
    message: str


@dataclass
class BatchResult:
    """Per-entry outcome of a batch send, in input order."""

    sent: list[SendResult] = field(default_factory=list)
    failed: list[SendFailure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


def plan(
    queue: str,
    message: Message,
    limits: SendLimits,
    *,
    now: float,
    new_id: Callable[[], str] = identity.new_message_id,
    ambient_trace: str | None = None,
    require_id: bool = False,
    trace: Mapping[str, str] | None = None,  # W3C trace context (docs/opentelemetry.md)
) -> PlannedSend:
    """Validate a message and decide where and how it is sent. No I/O. `ambient_trace` is
    the current trace (_X_AMZN_TRACE_ID), used when the message names none. `require_id`:
    a direct send without room for `NServiceBus.MessageId` is refused rather than sent
    without it (`retry_later`: the id is the guard's key of every later copy)."""
    destination = queue_names.destination_name(queue, limits.queue_prefix)
    group = group_of(message, destination)
    dedup = deduplication_id_of(message, destination)
    if message.trace_header is not None:
        xray: str | None = tracing.check(message.trace_header)
    else:  # the environment's is not the caller's doing: a bad one is left out, not refused
        xray = ambient_trace if tracing.is_header(ambient_trace) else None
    millis = delay_milliseconds(message.delay, deliver_at=message.deliver_at, now=now)
    seconds = whole_seconds(millis)
    if seconds > limits.max_delay_seconds:
        years = limits.max_delay_seconds / defaults.SECONDS_PER_YEAR
        raise InvalidDelay(
            f"a delay of {seconds} s is longer than the maximum of {limits.max_delay_seconds} s "
            f"({years:g} years, SQSDELAY_MAX_DELAY_SECONDS): was it given in milliseconds? "
            "Raise the setting if it is meant"
        )
    try:
        where = route(
            seconds,
            max_native_delay=limits.max_native_delay_seconds,
            unrestricted=limits.unrestricted,
        )
    except MessageDelayTooLong as exc:
        raise MessageDelayTooLong(f"{exc} ({limits.install_hint(queue)})") from None
    tags = message_tags.check(message.tags, where, seconds, limits.max_native_delay_seconds)
    message_shape.check_body(message.body)
    attributes, trace = trace_context.split(message.attributes, trace)
    message_shape.check_user_attributes(attributes)
    # One id names the message everywhere: envelope, NServiceBus.MessageId (on every send
    # that has room for it), group, dedup.
    ident = identity.check_message_id(message.id) if message.id is not None else new_id()
    body = message.body
    nsb_id: str | None = None
    if limits.wire_format == "nservicebus":
        body = nservicebus.envelope(
            message.body,
            message_id=ident,
            message_type=nservicebus.check_message_type(message.message_type),
            time_sent=datetime.fromtimestamp(now, UTC),
            trace=trace_context.valid(trace),
        )
    elif message.message_type is not None:
        attributes[wire_format.MESSAGE_TYPE_ATTRIBUTE] = message_shape.string_attribute(
            nservicebus.check_message_type(message.message_type)
        )
    request: dict[str, Any] = {"MessageBody": body}
    request |= tracing.system_attributes(xray)
    fifo = queue_names.is_fifo(destination)
    staged = False  # through a FIFO destination's staging queue
    # One key per send: a repeated call of this send (boto3's retry of a lost answer) is
    # dropped by FIFO deduplication, a new send of the same id (a Celery retry) is not.
    send_key = int(now * 1000) + millis  # the send's due time, epoch ms
    if where == "direct" and group is not None and fifo and not millis:
        target = destination  # a FIFO destination, now
        request["MessageGroupId"] = group
        request["MessageDeduplicationId"] = fifo_dedup.direct_key(ident, send_key, dedup)
    elif where == "direct" and group is not None and fifo:
        staged = True
        # SQS takes no per-message delay on a FIFO queue: its staging queue does, and the
        # worker forwards what becomes visible there, deduplicated by the message's id and
        # this send's due time, after the fraction of a second beyond the whole seconds
        # (DelaySeconds, below).
        target = queue_names.staging_queue_name(destination)
        attributes[wire_format.GROUP_ID_ATTRIBUTE] = message_shape.string_attribute(group)
        attributes[wire_format.DUE_AT_ATTRIBUTE] = message_shape.number_attribute(send_key)
        if millis % 1000:
            attributes[wire_format.DELAY_MS_ATTRIBUTE] = message_shape.string_attribute(str(millis))
        if dedup is not None:  # the forward's MessageDeduplicationId, instead of the due time
            attributes[wire_format.DEDUPLICATION_ID_ATTRIBUTE] = message_shape.string_attribute(
                dedup
            )
        nsb_id = ident
    elif where == "direct":
        target = destination
        if seconds:
            request["DelaySeconds"] = seconds
        if group is not None:  # a fair queue's tenant
            request["MessageGroupId"] = group
    else:
        target = queue_names.delay_queue_name(destination)
        if group is not None:
            attributes[wire_format.GROUP_ID_ATTRIBUTE] = message_shape.string_attribute(group)
        if dedup is not None:  # rides every hop to the forward (FIFO destinations only)
            attributes[wire_format.DEDUPLICATION_ID_ATTRIBUTE] = message_shape.string_attribute(
                dedup
            )
        attributes[wire_format.DELAY_ATTRIBUTE] = message_shape.string_attribute(str(seconds))
        if limits.wire_format == "nservicebus":
            # NServiceBus's own request, attribute for attribute (docs/nservicebus.md), and
            # the fraction of a second beside it, so that the last hop is exact.
            if millis % 1000:
                fraction = message_shape.string_attribute(str(millis))
                attributes[wire_format.DELAY_MS_ATTRIBUTE] = fraction
        else:
            # The send's due time, to the millisecond (the last hop is exact), as its registry
            # record has it: a copy of an earlier send of the id is told apart by it
            # (`registry.Record.of_generation`) from the first hop on.
            attributes[wire_format.DUE_AT_ATTRIBUTE] = message_shape.number_attribute(send_key)
        # One group per message, so no message ever blocks another; its deduplication id is
        # this send's, so that SQS's five minutes never swallow a new send of the same id.
        request["MessageGroupId"] = nsb_id = ident
        request["MessageDeduplicationId"] = identity.send_dedup_id_of_due(ident, now, send_key)
    if nsb_id is not None:  # the worker and the forward need it: a send without room is refused
        attributes[wire_format.MESSAGE_ID_ATTRIBUTE] = message_shape.string_attribute(nsb_id)
    elif _id_fits(body, attributes, ident, limits.max_message_bytes):
        # Straight to the destination: the id rides along when there is room, as NServiceBus
        # sets it on every send (SqsPreparedMessage.MessageId), so that a consumer's guard
        # keys every copy alike. Without room (the caller's 10 attributes, or a body at the
        # size limit) the message goes as given; an nservicebus envelope has the id inside.
        nsb_id = ident
        attributes[wire_format.MESSAGE_ID_ATTRIBUTE] = message_shape.string_attribute(nsb_id)
    elif require_id:
        raise _no_room_for_id(body, attributes, ident, limits.max_message_bytes)
    # No room: the fraction of a second goes first (whole seconds, rounded up), then the
    # staging send's due time (the forward then deduplicates by the id and the content).
    for optional in (wire_format.DELAY_MS_ATTRIBUTE, wire_format.DUE_AT_ATTRIBUTE):
        if len(attributes) > quotas.MAX_MESSAGE_ATTRIBUTES or (
            message_shape.message_size(body, attributes) > limits.max_message_bytes
        ):
            attributes.pop(optional, None)
    if dedup is not None and len(attributes) > quotas.MAX_MESSAGE_ATTRIBUTES:
        raise _no_room_for_dedup(attributes, sorted(set(attributes) - set(message.attributes)))
    if staged:  # the whole seconds; the forward waits out the fraction it has room for
        exact = wire_format.DELAY_MS_ATTRIBUTE in attributes
        request["DelaySeconds"] = millis // 1000 if exact else seconds
    placed = trace_context.place_in_send(body, attributes, trace, limits.max_message_bytes, where)
    attributes = placed.attributes
    message_shape.check_fits(body, attributes, limits.max_message_bytes)
    if attributes:
        request["MessageAttributes"] = attributes
    return PlannedSend(
        requested=queue,
        destination=destination,
        queue=target,
        route=where,
        delay_seconds=seconds,
        size_bytes=message_shape.message_size(body, attributes),
        request=request,
        message_id=ident,
        nservicebus_message_id=nsb_id,
        delay_ms=millis,
        trace_header=xray,
        trace=placed,
        tags=tags,
    )


def a_millisecond_later(planned: PlannedSend, now: float) -> PlannedSend:
    """A delay-queue send planned at `now`, due a millisecond later: its due time, delay,
    deduplication id and size as `plan` would have made them for that delay (an earlier,
    ended send of the id had its due time: `registry.put`)."""
    millis = planned.delay_ms + 1
    seconds = whole_seconds(millis)
    send_key = int(now * 1000) + millis
    attributes = dict(planned.request.get("MessageAttributes", {}))
    attributes[wire_format.DELAY_ATTRIBUTE] = message_shape.string_attribute(str(seconds))
    if wire_format.DELAY_MS_ATTRIBUTE in attributes:
        attributes[wire_format.DELAY_MS_ATTRIBUTE] = message_shape.string_attribute(str(millis))
    if wire_format.DUE_AT_ATTRIBUTE in attributes:
        attributes[wire_format.DUE_AT_ATTRIBUTE] = message_shape.number_attribute(send_key)
    body = planned.request["MessageBody"]
    request = {**planned.request, "MessageAttributes": attributes}
    request["MessageDeduplicationId"] = identity.send_dedup_id_of_due(
        planned.message_id, now, send_key
    )
    trace = planned.trace and replace(planned.trace, attributes=attributes)
    return replace(
        planned,
        request=request,
        trace=trace,
        delay_ms=millis,
        delay_seconds=seconds,
        size_bytes=message_shape.message_size(body, attributes),
    )


def _id_fits(body: str, attributes: Attributes, ident: str, max_bytes: int) -> bool:
    """Whether NServiceBus.MessageId fits beside `attributes` (count and size)."""
    with_id = {
        **attributes,
        wire_format.MESSAGE_ID_ATTRIBUTE: message_shape.string_attribute(ident),
    }
    if len(with_id) > quotas.MAX_MESSAGE_ATTRIBUTES:
        return False
    return message_shape.message_size(body, with_id) <= max_bytes


def _no_room_for_id(
    body: str, attributes: Attributes, ident: str, max_bytes: int
) -> InvalidMessage:
    """Why a retry cannot carry its id, and what to do. Refused before anything is sent:
    without the id the guard could key none of its copies (it would raise on every delivery
    until the dead-letter queue), and a foreign message would get a new id on every retry."""
    with_id = {
        **attributes,
        wire_format.MESSAGE_ID_ATTRIBUTE: message_shape.string_attribute(ident),
    }
    then = "Nothing was sent and the original stays (it comes back after its visibility timeout): "
    if len(with_id) > quotas.MAX_MESSAGE_ATTRIBUTES:
        return TooManyAttributes(
            f"the retry needs {len(with_id)} attributes with sqsdelay.Attempt and its id "
            f"(NServiceBus.MessageId, the guard's key); SQS allows "
            f"{quotas.MAX_MESSAGE_ATTRIBUTES}. {then}have the producer send at most "
            f"{quotas.MAX_MESSAGE_ATTRIBUTES - 2} attributes (move the rest into the body), or "
            "handle this message without retry_later"
        )
    size = message_shape.message_size(body, with_id)
    return MessageTooLarge(
        f"the retry is {size} bytes with sqsdelay.Attempt and its id (NServiceBus.MessageId, "
        f"the guard's key); the limit is {max_bytes} (SQSDELAY_MAX_MESSAGE_BYTES, which "
        f"should equal the queue's MaximumMessageSize). {then}have the producer store the "
        "payload elsewhere (e.g. S3) and send a reference, or handle this message without "
        "retry_later"
    )


def _no_room_for_dedup(attributes: Attributes, own: list[str]) -> TooManyAttributes:
    """A delayed send into a FIFO destination carries its deduplication id in an attribute,
    and without it the forward could not keep it: refused rather than sent without."""
    return TooManyAttributes(
        f"the message needs {len(attributes)} attributes with sqsdelay's own ({', '.join(own)}); "
        f"SQS allows {quotas.MAX_MESSAGE_ATTRIBUTES}. With deduplication_id, give at most "
        f"{quotas.MAX_MESSAGE_ATTRIBUTES - len(own)} attributes of your own (move the rest "
        "into the body)"
    )


def deduplication_id_of(message: Message, destination: str) -> str | None:
    """The caller's deduplication id, checked as SQS checks a MessageDeduplicationId. SQS
    refuses one on a standard queue (InvalidParameterValue: "not valid for this queue
    type"), so a standard destination refuses it before anything is sent."""
    if message.deduplication_id is None:
        return None
    if not queue_names.is_fifo(destination):
        raise InvalidMessage(
            f"deduplication_id is for a FIFO destination, and {destination!r} is a standard "
            "queue, where SQS refuses a MessageDeduplicationId (it delivers at least once): "
            "leave it out and have the consumer skip duplicates (docs/consumers.md), or send "
            "to a FIFO destination (NAME.fifo)"
        )
    return identity.check_deduplication_id(message.deduplication_id)


def group_of(message: Message, destination: str) -> str | None:
    """The message group: required by a FIFO destination; optional for a standard one, where
    SQS fair queues take it as the tenant (since 2025)."""
    if queue_names.is_fifo(destination) or message.group_id is not None:
        return queue_names.check_group_id(message.group_id, destination)
    return None


def park_request(
    planned: PlannedSend,
    limits: SendLimits,
    target: parking.ParkTarget,
    *,
    now: float,
    after: int | None,
) -> dict[str, Any] | None:
    """The CreateSchedule request that parks a planned delay-queue send at once, or None
    when it should go to the delay queue as usual: parking off (`after` None), not enough
    delay, or no room for the sqsdelay.DueAt attribute or in Scheduler's input."""
    if after is None or planned.route != "delay-queue" or planned.delay_seconds <= after:
        return None
    ident = planned.request["MessageGroupId"]
    due = int(now * 1000) + planned.delay_ms
    fire = parking.fire_at_ms(due, limits.max_native_delay_seconds)
    given = planned.request.get("MessageAttributes", {})
    kept = {k: v for k, v in given.items() if k != wire_format.DELAY_MS_ATTRIBUTE}  # DueAt says it
    attrs = parking.back_attributes(kept, due, fire)
    body = planned.request["MessageBody"]
    try:
        message_shape.check_fits(body, attrs, limits.max_message_bytes)
        return parking.create_schedule_request(
            name=identity.schedule_name(planned.queue, ident),
            fire_ms=fire,
            target=target,
            body=body,
            attributes=attrs,
            group_id=ident,
            dedup=identity.park_dedup_id(ident, due),
            trace_header=planned.trace_header,
        )
    except InvalidMessage:
        return None


def batches(
    planned: Sequence[PlannedSend], limits: SendLimits, skip: set[int] | None = None
) -> list[list[int]]:
    """Batches of indexes into `planned`, leaving out `skip` (already parked)."""
    size, most = (lambda p: p.size_bytes), limits.max_message_bytes
    chunks = batch_entries.chunk(planned, key=lambda p: p.queue, size=size, max_bytes=most)
    return [kept for b in chunks if (kept := [i for i in b if i not in (skip or set())])]


def written_route(delay_seconds: int, after: int | None) -> registry.RecordRoute:
    """The route the registry write records before sending: "parked" above the park threshold."""
    return "parked" if after is not None and delay_seconds > after else "delay-queue"


def changed_route(result: SendResult, after: int | None) -> str | None:
    """The route a record must be corrected to: parking may have fallen back to the delay
    queue after the registry write wrote "parked"."""
    written = written_route(result.delay_seconds, after)
    return None if result.route == written else result.route


def entries(planned: Sequence[PlannedSend], batch: list[int]) -> list[dict[str, Any]]:
    return [{"Id": str(i), **planned[i].request} for i in batch]
