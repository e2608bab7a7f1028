"""What to do with a message received from a delay queue (pure).

All arithmetic is in integer milliseconds of broker time; the remaining delay is rounded up
to whole seconds only at the end, so a message is never delivered early.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqsdelay import limits, wire
from sqsdelay._types import Attributes
from sqsdelay.errors import InvalidMessage

_INTEGER = re.compile(r"[+-]?\d+")


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
        try:
            return int(self.system.get("ApproximateReceiveCount", "1"))
        except ValueError:
            return 1


@dataclass(frozen=True)
class Requeue:
    """Send back to the delay queue; the attribute carries the delay left after this hop."""

    remaining_seconds: int
    due_ms: int
    attributes: Attributes
    group_id: str
    dedup_id: str


@dataclass(frozen=True)
class HandOver:
    """Send to the destination with DelaySeconds = the remaining delay."""

    remaining_seconds: int
    due_ms: int
    attributes: Attributes


@dataclass(frozen=True)
class Poison:
    """Move to the error queue with the reason."""

    reason: str
    attributes: Attributes


Decision = Requeue | HandOver | Poison


@dataclass(frozen=True)
class Limits:
    max_native_delay_seconds: int = limits.MAX_NATIVE_DELAY_SECONDS
    max_attempts: int = 5
    max_message_bytes: int = limits.MAX_MESSAGE_BYTES


def requeue_dedup_id(received: Received) -> str:
    """Same physical message, same id: a retried requeue inside the FIFO dedup window is
    dropped by SQS, while every new cycle (a new SQS MessageId) gets a fresh id."""
    origin = received.system.get("MessageDeduplicationId", "")
    return hashlib.sha256(f"{origin}|{received.message_id}".encode()).hexdigest()


def _timestamp(system: Mapping[str, str], name: str) -> int:
    value = system.get(name)
    if value is None or not value.isdigit():
        raise InvalidMessage(f"broker attribute {name} is missing or not a timestamp ({value!r})")
    return int(value)


def _delay(attributes: Attributes) -> int:
    value = attributes.get(limits.DELAY_ATTRIBUTE)
    if value is None:
        raise InvalidMessage(f"no {limits.DELAY_ATTRIBUTE} attribute")
    text = value.get("StringValue", "")
    if not _INTEGER.fullmatch(text.strip()):
        raise InvalidMessage(f"{limits.DELAY_ATTRIBUTE} is not an integer ({text[:40]!r})")
    seconds = int(text)
    if seconds < 0:
        raise InvalidMessage(f"{limits.DELAY_ATTRIBUTE} is negative ({seconds})")
    return seconds


def _due_at(attributes: Attributes) -> int | None:
    value = attributes.get(limits.DUE_AT_ATTRIBUTE)
    text = value.get("StringValue", "") if value else ""
    # Our own attribute; if someone mangled it, fall back to the NServiceBus delay.
    return int(text) if text.isdigit() else None


def _string(attributes: Attributes, name: str) -> str | None:
    value = attributes.get(name)
    return value.get("StringValue") if value else None


def _without_own(attributes: Attributes) -> Attributes:
    return {k: v for k, v in attributes.items() if k not in limits.OWN_ATTRIBUTES}


def failure_attributes(
    received: Received, reason: str, source_queue: str, max_bytes: int
) -> Attributes:
    """Attributes for the error queue: the original ones, with our delay attributes folded
    into one `sqsdelay.Failure` record (reason and what replay needs), when it fits."""
    original = received.attributes
    record = {
        "reason": reason,
        "queue": source_queue,
        "delay_seconds": _string(original, limits.DELAY_ATTRIBUTE),
        "due_at": _string(original, limits.DUE_AT_ATTRIBUTE),
        "receive_count": received.receive_count,
    }
    attrs = _without_own(original)
    attrs[limits.FAILURE_ATTRIBUTE] = wire.string_attribute(json.dumps(record)[:4096])
    try:
        wire.check_fits(received.body, attrs, max_bytes)
    except InvalidMessage:
        return dict(original)  # no room: keep it intact; the reason is in the log event
    return attrs


def _poison(received: Received, reason: str, source_queue: str, lim: Limits) -> Poison:
    return Poison(reason, failure_attributes(received, reason, source_queue, lim.max_message_bytes))


def decide(
    received: Received,
    *,
    local_now_ms: int,
    offset_ms: int | None,
    lim: Limits,
    source_queue: str = "",
    last_error: str | None = None,
) -> Decision:
    """Requeue, hand over or poison.

    Broker "now" is `ApproximateFirstReceiveTimestamp` on a first receive; on a redelivery it
    is the local clock corrected by the estimated broker-minus-local offset.
    """
    count = received.receive_count
    if count > lim.max_attempts:
        reason = f"received {count} times (SQSDELAY_MAX_ATTEMPTS={lim.max_attempts})"
        return _poison(
            received,
            reason + (f"; last error: {last_error}" if last_error else ""),
            source_queue,
            lim,
        )
    try:
        delay = _delay(received.attributes)
        sent = _timestamp(received.system, "SentTimestamp")
        first = _timestamp(received.system, "ApproximateFirstReceiveTimestamp")
    except InvalidMessage as exc:
        return _poison(received, str(exc), source_queue, lim)
    due = _due_at(received.attributes)
    if due is None:
        due = sent + delay * 1000
    first_now = max(first, sent)
    # Broker time never runs backwards past the first receive, whatever the local clock says.
    broker_now = first_now if count == 1 else max(first_now, local_now_ms + (offset_ms or 0))
    remaining = _ceil_seconds(due - broker_now)
    # A redelivery takes the route the first attempt took (a pure function of broker
    # timestamps): if that attempt's requeue reached the queue before its delete failed, the
    # repeated requeue has the same dedup id and FIFO drops it. Handing over instead would
    # deliver the message twice.
    requeue = _ceil_seconds(due - first_now) > lim.max_native_delay_seconds
    base = _without_own(received.attributes)
    if requeue:
        attrs = {**base, limits.DELAY_ATTRIBUTE: wire.string_attribute(str(remaining))}
        with_due = {**attrs, limits.DUE_AT_ATTRIBUTE: wire.number_attribute(due)}
        for candidate in (with_due, attrs):  # DueAt only when there is room for it
            try:
                wire.check_fits(received.body, candidate, lim.max_message_bytes)
            except InvalidMessage as exc:
                problem = str(exc)
                continue
            group = received.system.get("MessageGroupId") or received.message_id
            return Requeue(remaining, due, candidate, group, requeue_dedup_id(received))
        return _poison(received, f"cannot requeue: {problem}", source_queue, lim)
    try:
        wire.check_fits(received.body, base, lim.max_message_bytes)
    except InvalidMessage as exc:
        return _poison(received, f"cannot hand over: {exc}", source_queue, lim)
    return HandOver(remaining, due, base)


def _ceil_seconds(ms: int) -> int:
    return -(-max(0, ms) // 1000)  # round up: never early


class ClockOffset:
    """Running estimate of broker clock minus local clock, in ms.

    Each first receive gives a sample (broker first-receive time minus local time when the
    response arrived). Samples are biased low by the network latency, which errs on the
    side of late rather than early. The median of recent samples ignores outliers.
    """

    def __init__(self, window: int = 101) -> None:
        self._samples: deque[int] = deque(maxlen=window)

    def observe(self, broker_ms: int, local_ms: int) -> None:
        self._samples.append(broker_ms - local_ms)

    def estimate(self) -> int | None:
        return int(statistics.median_low(self._samples)) if self._samples else None


class CircuitBreaker:
    """Per-target capped exponential backoff after whole-call failures. Pure: the caller
    passes the time."""

    def __init__(self, base_seconds: float = 1.0, cap_seconds: float = 300.0) -> None:
        self.base = base_seconds
        self.cap = cap_seconds
        self._failures: dict[str, int] = {}
        self._open_until: dict[str, float] = {}

    def retry_in(self, target: str, now: float) -> float:
        return max(0.0, float(self._open_until.get(target, 0.0)) - now)

    def failure(self, target: str, now: float) -> float:
        n = self._failures.get(target, 0) + 1
        self._failures[target] = n
        wait = min(self.cap, self.base * 2.0 ** min(n - 1, 30))
        self._open_until[target] = now + wait
        return wait

    def success(self, target: str) -> None:
        self._failures.pop(target, None)
        self._open_until.pop(target, None)


def retry_backoff_seconds(receive_count: int, cap: int = 900) -> int:
    """Visibility timeout for a message whose send failed: 2, 4, 8 ... s, capped."""
    return int(min(cap, 2 ** min(receive_count, 20)))
