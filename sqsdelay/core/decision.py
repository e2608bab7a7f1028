"""What to do with a message received from a delay queue (pure).

All arithmetic is in integer milliseconds of broker time; the remaining delay is rounded up
to whole seconds only at the end, so a message is never delivered early.

Longer than most files (about 500 lines): the decision types and the rules that choose
between them read each other (the due time, the attributes a hop carries, the limits).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqsdelay.core import (
    defaults,
    failure_record,
    fifo_dedup,
    identity,
    message_shape,
    parking,
    queue_names,
    quotas,
    wire_format,
)
from sqsdelay.core.delays import whole_seconds
from sqsdelay.core.received import Received, parse_natural
from sqsdelay.core.types import Attributes, InvalidDelayAction, Target
from sqsdelay.errors import InvalidMessage

# ASCII digits only: str.isdigit() and \d accept "²" and other digits int() refuses or
# NServiceBus reads differently.
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)


_LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, datetime's last


def utc_month(epoch_ms: int) -> tuple[int, int]:
    """(year, month) of a broker time, UTC (times past year 9999 count as its December)."""
    at = datetime.fromtimestamp(min(epoch_ms, _LAST_MS) / 1000, UTC)
    return at.year, at.month


def _fitting(body: str, attributes: Attributes, max_bytes: int) -> int:
    """The size of a message that fits SQS's limits (message_shape.check_fits, which raises
    saying why for one that does not). A decision keeps it as its `size`, so that its
    outgoing entry need not count the bytes again (record_decisions.outgoing)."""
    size = message_shape.message_size(body, attributes)
    if size > max_bytes or len(attributes) > quotas.MAX_MESSAGE_ATTRIBUTES:
        message_shape.check_fits(body, attributes, max_bytes)
    return size


@dataclass(frozen=True)
class Requeue:
    """Send back to the delay queue; the attribute carries the delay left after this hop."""

    target: ClassVar[Target] = "delay"
    event: ClassVar[str] = "delay.requeued"

    remaining_seconds: int
    due_ms: int
    attributes: Attributes
    group_id: str
    dedup_id: str
    # The first hop of this message in a calendar month (UTC): logged at INFO, so that the
    # cost report sees every month a message loops in; the other ~2,900 hops a month are
    # DEBUG (they were the largest log line of the bill; the metrics count them all).
    first_in_month: bool = False
    size: int | None = field(default=None, compare=False, repr=False)  # _fitting's

    @property
    def level(self) -> str:
        return "info" if self.first_in_month else "debug"

    def request(self) -> dict[str, Any]:
        return {"MessageGroupId": self.group_id, "MessageDeduplicationId": self.dedup_id}

    def log_fields(self) -> dict[str, Any]:
        return {"remaining_seconds": self.remaining_seconds, "due_at_ms": self.due_ms}


@dataclass(frozen=True)
class HandOver:
    """Send to the destination with DelaySeconds = the whole seconds left, `wait_ms` after the
    decision: DelaySeconds is an integer, so the worker waits out the fraction of a second
    itself and the message becomes visible when it is due, not up to a second later."""

    target: ClassVar[Target] = "destination"
    event: ClassVar[str] = "delay.handed_over"
    level: ClassVar[str] = "info"

    remaining_seconds: int
    due_ms: int
    attributes: Attributes
    wait_ms: int = 0  # 0..999
    # The sender's message group on a standard destination (an SQS fair queue's tenant).
    group_id: str | None = None
    size: int | None = field(default=None, compare=False, repr=False)  # _fitting's

    def request(self) -> dict[str, Any]:
        out: dict[str, Any] = {"MessageGroupId": self.group_id} if self.group_id else {}
        return out | ({"DelaySeconds": self.remaining_seconds} if self.remaining_seconds else {})

    def log_fields(self) -> dict[str, Any]:
        return {
            "remaining_seconds": self.remaining_seconds,
            "wait_ms": self.wait_ms,
            "due_at_ms": self.due_ms,
        }

    def at_once(self) -> HandOver:
        """Without the wait: the fraction rounded up into DelaySeconds (never early)."""
        seconds = self.remaining_seconds + (1 if self.wait_ms else 0)
        return HandOver(
            seconds, self.due_ms, self.attributes, group_id=self.group_id, size=self.size
        )


@dataclass(frozen=True)
class Poison:
    """Move to the error queue with the reason."""

    target: ClassVar[Target] = "error"
    event: ClassVar[str] = "delay.dead_lettered"
    level: ClassVar[str] = "error"

    reason: str
    attributes: Attributes
    size: int | None = field(default=None, compare=False, repr=False)  # not counted

    def request(self) -> dict[str, Any]:
        return {}

    def log_fields(self) -> dict[str, Any]:
        return {"reason": self.reason}


@dataclass(frozen=True)
class Park:
    """Put into a one-time schedule that sends it back to the delay queue shortly before it
    is due (sqsdelay.core.parking). `fallback` is the requeue to make when Scheduler refuses."""

    target: ClassVar[Target] = "delay"
    event: ClassVar[str] = "delay.parked"
    level: ClassVar[str] = "info"

    remaining_seconds: int
    due_ms: int
    attributes: Attributes  # as Scheduler sends it back
    message_id: str  # the id send printed (NServiceBus.MessageId): names the schedule
    fire_ms: int  # when the schedule sends it back (parking.fire_at_ms)
    fallback: Requeue
    size: int | None = field(default=None, compare=False, repr=False)  # not counted

    def request(self) -> dict[str, Any]:
        return {}

    def log_fields(self) -> dict[str, Any]:
        return {"remaining_seconds": self.remaining_seconds, "due_at_ms": self.due_ms}


@dataclass(frozen=True)
class Forward:
    """From a FIFO destination's staging queue to the destination, `wait_ms` after the
    decision: in the sender's message group, deduplicated by the caller's deduplication id
    or else the message's id and due time (a retried hand-over within SQS's five minutes is
    delivered once). A message is visible there when its whole seconds are up; the wait is
    the fraction of a second the sender asked for beyond them (a FIFO queue takes no
    DelaySeconds to round it up into)."""

    target: ClassVar[Target] = "destination"
    event: ClassVar[str] = "delay.forwarded"

    attributes: Attributes
    group_id: str
    dedup_id: str
    wait_ms: int = 0  # 0..999
    # Why a producer's sqsdelay.DeduplicationId was not used (not one SQS takes): the
    # message is forwarded under sqsdelay's own key, and the forward logged as a warning.
    dedup_ignored: str | None = None
    size: int | None = field(default=None, compare=False, repr=False)  # _fitting's

    @property
    def level(self) -> str:
        return "warning" if self.dedup_ignored else "info"

    def request(self) -> dict[str, Any]:
        return {"MessageGroupId": self.group_id, "MessageDeduplicationId": self.dedup_id}

    def log_fields(self) -> dict[str, Any]:
        ignored = {"deduplication_id_ignored": self.dedup_ignored} if self.dedup_ignored else {}
        return {"wait_ms": self.wait_ms} | ignored


Decision = Requeue | HandOver | Poison | Park | Forward
DelayDecision = Requeue | HandOver | Poison | Park  # of a message from a delay queue


@dataclass(frozen=True)
class Limits:
    max_native_delay_seconds: int = quotas.MAX_NATIVE_DELAY_SECONDS
    max_attempts: int = defaults.DEFAULT_MAX_ATTEMPTS
    max_message_bytes: int = quotas.MAX_MESSAGE_BYTES
    # "error": a missing or bad delay attribute is poison; "deliver": hand it over at once,
    # as NServiceBus's pump does (it reads such a delay as 0).
    invalid_delay: InvalidDelayAction = "error"
    # Park in EventBridge Scheduler what has more than this many seconds left (None: never).
    park_after_seconds: int | None = None
    # The longest delay a message may carry (SQSDELAY_MAX_DELAY_SECONDS).
    max_delay_seconds: int = defaults.DEFAULT_MAX_DELAY_SECONDS


def _timestamp(system: Mapping[str, str], name: str) -> int:
    value = system.get(name)
    ms = parse_natural(value)
    if ms is None:
        shown = value[:40] if isinstance(value, str) else value
        raise InvalidMessage(f"broker attribute {name} is missing or not a timestamp ({shown!r})")
    return ms


def _delay(attributes: Attributes, max_seconds: int) -> int:
    value = attributes.get(wire_format.DELAY_ATTRIBUTE)
    if value is None:
        raise InvalidMessage(f"no {wire_format.DELAY_ATTRIBUTE} attribute")
    text = value.get("StringValue", "")
    if not isinstance(text, str) or not _INTEGER.fullmatch(text.strip()):
        shown = text[:40] if isinstance(text, str) else type(text).__name__
        raise InvalidMessage(f"{wire_format.DELAY_ATTRIBUTE} is not an integer ({shown!r})")
    text = text.strip()
    if text.startswith("-") and text.strip("-0"):
        raise InvalidMessage(f"{wire_format.DELAY_ATTRIBUTE} is negative ({text[:40]})")
    # More digits than any allowed delay has: compared as text, so int() never sees 5000 of them.
    if len(text.lstrip("+-0")) > len(str(max_seconds)) or int(text) > max_seconds:
        raise InvalidMessage(
            f"{wire_format.DELAY_ATTRIBUTE} is {text[:40]} s, above the maximum delay of "
            f"{max_seconds} s (SQSDELAY_MAX_DELAY_SECONDS); raise the setting and replay it if "
            "it is meant"
        )
    return int(text)


def _due_at(attributes: Attributes, sent_ms: int, max_seconds: int) -> int | None:
    """Our own attribute; if someone mangled it (not a time, or further off than any delay
    may be), the NServiceBus delay decides instead."""
    value = attributes.get(wire_format.DUE_AT_ATTRIBUTE)
    due = parse_natural(value.get("StringValue")) if value else None
    return due if due is not None and due - sent_ms <= max_seconds * 1000 else None


def carried_due(attributes: Attributes) -> int | None:
    """The due time a copy carries (`sqsdelay.DueAt`) as it is, None without a valid one."""
    return parse_natural(message_shape.string_value(attributes, wire_format.DUE_AT_ATTRIBUTE))


def _due_carried(received: Received, due: int) -> int:
    """The due time a requeue carries on: the one it came with, even when this hop could not
    take it (further from this copy's send than any delay may be: a sender's clock ahead of
    the broker's, or a reschedule near the maximum), as the registry knows a copy of its send
    by it (`registry.Record.of_generation`); else the due time this hop worked out."""
    carried = carried_due(received.attributes)
    return carried if carried is not None else due


def _delay_ms(attributes: Attributes, delay: int) -> int | None:
    """The sender's delay in milliseconds, if it agrees with the whole seconds beside it: an
    NServiceBus pump that requeued the message keeps our attribute but counts the seconds
    from its own send, and then the seconds decide."""
    value = attributes.get(wire_format.DELAY_MS_ATTRIBUTE)
    ms = parse_natural(value.get("StringValue")) if value else None
    return ms if ms is not None and whole_seconds(ms) == delay else None


def _poison(received: Received, reason: str, source_queue: str, lim: Limits) -> Poison:
    attrs = failure_record.attributes(received, reason, source_queue, lim.max_message_bytes)
    return Poison(reason, attrs)


def decide(
    received: Received,
    *,
    local_now_ms: int,
    offset_ms: int | None,
    lim: Limits,
    source_queue: str = "",
    own_failures: int = 0,
    last_error: str | None = None,
    staging: bool = False,
    claims: bool = False,
) -> DelayDecision:
    """Requeue, hand over or poison. `staging`: the destination is FIFO, and its hand-overs
    go to its staging queue. `claims`: this SQS message will claim the message's registry
    record before its hand-over, which then carries the claim's deduplication key
    (`fifo_dedup.forward_dedup_id_of_claim`).

    Broker "now" is `ApproximateFirstReceiveTimestamp` on a first receive; on a redelivery it
    is the local clock corrected by the estimated broker-minus-local offset.

    `own_failures` counts the sends of this message that failed for reasons of its own (see
    `failures.is_message_fault`). Redeliveries after outages, throttling or crashes raise
    `ApproximateReceiveCount` but never this count, so they never dead-letter a good message.
    """
    count = received.receive_count
    if own_failures >= lim.max_attempts:
        return _gave_up(received, own_failures, last_error, source_queue, lim)
    try:
        sent = _timestamp(received.system, "SentTimestamp")
        first = _timestamp(received.system, "ApproximateFirstReceiveTimestamp")
    except InvalidMessage as exc:
        return _poison(received, str(exc), source_queue, lim)
    try:
        delay = _delay(received.attributes, lim.max_delay_seconds)
    except InvalidMessage as exc:
        if lim.invalid_delay != "deliver":
            return _poison(received, str(exc), source_queue, lim)
        return _hand_over(
            received, 0, max(first, sent), source_queue, lim, staging=staging, claims=claims
        )
    due = _due_at(received.attributes, sent, lim.max_delay_seconds)
    if due is None:
        due = sent + (_delay_ms(received.attributes, delay) or delay * 1000)
    first_now = max(first, sent)
    broker_now = _broker_now(first_now, count, local_now_ms, offset_ms)
    remaining = whole_seconds(due - broker_now)
    left_ms = max(0, due - broker_now)
    # A redelivery takes the route the first attempt took (a pure function of broker
    # timestamps): if that attempt's requeue reached the queue before its delete failed, the
    # repeated requeue has the same dedup id and FIFO drops it. Handing over instead would
    # deliver the message twice.
    if whole_seconds(due - first_now) <= lim.max_native_delay_seconds:
        return _hand_over(received, left_ms, due, source_queue, lim, staging=staging, claims=claims)
    with_id = _with_message_id(received)
    attrs = {**with_id, wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute(str(remaining))}
    candidates = [
        {
            **attrs,
            wire_format.DUE_AT_ATTRIBUTE: message_shape.number_attribute(
                _due_carried(received, due)
            ),
        },
        attrs,
    ]
    if len(with_id) > len(message_shape.without_own(received.attributes)):
        # No room for NServiceBus.MessageId (a foreign message with 9 attributes of its own):
        # requeue it as it came rather than lose it.
        as_came = message_shape.without_own(received.attributes)
        candidates.append(
            {**as_came, wire_format.DELAY_ATTRIBUTE: attrs[wire_format.DELAY_ATTRIBUTE]}
        )
    for candidate in candidates:
        try:
            size = _fitting(received.body, candidate, lim.max_message_bytes)
        except InvalidMessage as exc:
            problem = str(exc)
            continue
        system = received.system
        group = identity.requeue_group_id(system.get("MessageGroupId"), received.message_id)
        dedup = identity.requeue_dedup_id(
            system.get("MessageDeduplicationId", ""), received.message_id
        )
        crossed = utc_month(sent) != utc_month(first_now)
        requeue = Requeue(
            remaining, due, candidate, group, dedup, first_in_month=crossed, size=size
        )
        return _parked(requeue, whole_seconds(due - first_now), lim) or requeue
    return _poison(received, f"cannot requeue: {problem}", source_queue, lim)


def _broker_now(first_now: int, count: int, local_now_ms: int, offset_ms: int | None) -> int:
    """Now on the broker's clock: its first receive's timestamp on a first receive; on a
    redelivery the local clock corrected by the offset. Broker time never runs backwards past
    the first receive, whatever the local clock says."""
    return first_now if count == 1 else max(first_now, local_now_ms + (offset_ms or 0))


def _gave_up(
    received: Received, own_failures: int, last_error: str | None, source_queue: str, lim: Limits
) -> Poison:
    reason = f"failed {own_failures} times (SQSDELAY_MAX_ATTEMPTS={lim.max_attempts})"
    reason += f"; last error: {last_error}" if last_error else ""
    return _poison(received, reason, source_queue, lim)


def forward(
    received: Received,
    *,
    lim: Limits,
    local_now_ms: int = 0,
    offset_ms: int | None = None,
    source_queue: str = "",
    own_failures: int = 0,
    last_error: str | None = None,
) -> Forward | Poison:
    """A message from a FIFO destination's staging queue: visible, so its whole seconds are
    up; what is left is the fraction of a second in `sqsdelay.DelayMilliseconds`, if the
    sender gave one (a hand-over from the worker waited out its own)."""
    if own_failures >= lim.max_attempts:
        return _gave_up(received, own_failures, last_error, source_queue, lim)
    group = message_shape.string_value(received.attributes, wire_format.GROUP_ID_ATTRIBUTE)
    if group is None or not queue_names.is_group_id(group):
        reason = (
            f"no valid {wire_format.GROUP_ID_ATTRIBUTE} attribute: a message for a FIFO "
            "destination needs its message group (send it with group_id=)"
        )
        return _poison(received, reason, source_queue, lim)
    ident = (
        message_shape.string_value(received.attributes, wire_format.MESSAGE_ID_ATTRIBUTE)
        or received.message_id
    )
    attrs = {
        k: v
        for k, v in message_shape.without_own(received.attributes).items()
        if k not in _LEFT_AT_THE_FORWARD
    }
    try:
        size = _fitting(received.body, attrs, lim.max_message_bytes)
    except InvalidMessage as exc:
        return _poison(received, f"cannot forward: {exc}", source_queue, lim)
    wait = _fraction_left(received, local_now_ms, offset_ms)
    # The send's due time, which its hand-over into staging carries. Without it (no room)
    # what every copy carries unchanged: not the staging message's SQS id, new per copy.
    due = parse_natural(
        message_shape.string_value(received.attributes, wire_format.DUE_AT_ATTRIBUTE)
    )
    dedup, ignored = fifo_dedup.forward_key(ident, received.body, received.attributes, due)
    return Forward(attrs, group, dedup, wait, dedup_ignored=ignored, size=size)


# The staging message's attributes that stay behind: SQS's own MessageGroupId and
# MessageDeduplicationId of the forward say them. A consumer's retry of the message so has
# no deduplication id to be dropped by.
_LEFT_AT_THE_FORWARD = frozenset(
    {wire_format.GROUP_ID_ATTRIBUTE, wire_format.DEDUPLICATION_ID_ATTRIBUTE}
)


def _fraction_left(received: Received, local_now_ms: int, offset_ms: int | None) -> int:
    """Milliseconds until the sender's due time (SentTimestamp + its milliseconds), at most
    999: the staging queue's DelaySeconds were the whole seconds, so no more can be left
    (a larger figure is not the sender's, and is not waited for). 0 when anything is
    missing."""
    delay_ms = parse_natural(
        message_shape.string_value(received.attributes, wire_format.DELAY_MS_ATTRIBUTE)
    )
    sent = parse_natural(received.system.get("SentTimestamp"))
    first = parse_natural(received.system.get("ApproximateFirstReceiveTimestamp"))
    if delay_ms is None or sent is None or first is None:
        return 0
    now = _broker_now(max(first, sent), received.receive_count, local_now_ms, offset_ms)
    left = sent + delay_ms - now
    return left if 0 < left < 1000 else 0


def _parked(requeue: Requeue, left_at_first: int, lim: Limits) -> Park | None:
    """Park when enough is left and the absolute due time travels with the message (the
    worker needs it to be exact after the Scheduler hop). Like the hand-over, this is
    decided from the first receive's broker timestamps (`left_at_first`): a redelivery
    after a crash between CreateSchedule and the delete parks again, meets its own schedule
    and is deleted, instead of looping while that schedule also fires."""
    after = lim.park_after_seconds
    attrs = requeue.attributes
    if after is None or left_at_first <= after or wire_format.DUE_AT_ATTRIBUTE not in attrs:
        return None
    ident = message_shape.string_value(attrs, wire_format.MESSAGE_ID_ATTRIBUTE)
    if not ident:
        return None
    fire = parking.fire_at_ms(requeue.due_ms, lim.max_native_delay_seconds)
    if not parking.expressible(fire):  # a broker clock past the year 9999: loop, do not park
        return None
    back = parking.back_attributes(attrs, requeue.due_ms, fire)
    return Park(requeue.remaining_seconds, requeue.due_ms, back, ident, fire, requeue)


def _with_message_id(received: Received) -> Attributes:
    """The attributes to pass on, with NServiceBus.MessageId as NServiceBus's pump sets it:
    kept when present, else the received SQS MessageId (DelayedMessagesPump.PrepareMessages).
    With the attribute always there, a pump overwrites it instead of adding an 11th."""
    base = message_shape.without_own(received.attributes)
    if wire_format.MESSAGE_ID_ATTRIBUTE not in base:
        base[wire_format.MESSAGE_ID_ATTRIBUTE] = message_shape.string_attribute(received.message_id)
    return base


def _hand_over(
    received: Received,
    left_ms: int,
    due: int,
    source_queue: str,
    lim: Limits,
    *,
    staging: bool = False,
    claims: bool = False,
) -> HandOver | Poison:
    """To a FIFO destination's staging queue, the group rides in its attribute, with the due
    time as the forward's deduplication key (`fifo_dedup.staging_key_attributes`) unless the message
    carries the caller's own (`sqsdelay.DeduplicationId`, kept as it came); to a standard
    destination, a group becomes the message's MessageGroupId (SQS fair queues)."""
    problem = ""
    group = message_shape.string_value(received.attributes, wire_format.GROUP_ID_ATTRIBUTE)
    fair = group if not staging and group is not None and queue_names.is_group_id(group) else None
    for candidate in _hand_over_attributes(received, due, staging, claims):
        try:
            size = _fitting(received.body, candidate, lim.max_message_bytes)
        except InvalidMessage as exc:
            problem = str(exc)
            continue
        seconds, wait_ms = divmod(left_ms, 1000)
        return HandOver(seconds, due, candidate, wait_ms, group_id=fair, size=size)
    return _poison(received, f"cannot hand over: {problem}", source_queue, lim)


def _hand_over_attributes(
    received: Received, due: int, staging: bool, claims: bool = False
) -> Iterator[Attributes]:
    """What a hand-over may carry, the first that fits taken: with NServiceBus.MessageId
    (and into staging the due time, and the registry claim's deduplication key), else the
    message's own. Each made only if the one before did not fit (nearly always the first
    does)."""
    with_id = _with_message_id(received)
    if staging:
        yield from fifo_dedup.staging_key_attributes(
            with_id, due, received.message_id if claims else None
        )
        yield with_id
        yield message_shape.without_own(received.attributes)
    else:  # a standard destination: SQS would refuse a deduplication id there
        yield _without(with_id, *_LEFT_AT_THE_FORWARD)
        yield _without(message_shape.without_own(received.attributes), *_LEFT_AT_THE_FORWARD)


def _without(attributes: Attributes, *names: str) -> Attributes:
    return {k: v for k, v in attributes.items() if k not in names}
