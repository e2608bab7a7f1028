"""A consumer's retry later: re-send a received message through the sender with any delay,
then delete the original (only after the send succeeded); and the backoff that gives up
into the error queue. Written once as flows (`core/flows.py`) driven by a `Sender` or an
`AsyncSender`, so that both behave the same; the rules are in `core/retries.py`.
"""

from __future__ import annotations

import copy
import os
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sqsdelay import deprecations, otel
from sqsdelay.aws.queue_urls import ParkTargets, QueueResolver
from sqsdelay.aws.sender import AsyncSender, Sender
from sqsdelay.aws.sender_core import SenderCore
from sqsdelay.core import consumed as received_rules
from sqsdelay.core import retries
from sqsdelay.core.consumed import Incoming
from sqsdelay.core.delays import DelayLike
from sqsdelay.core.flows import Call, Fault, Flow
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.core.retries import Backoff
from sqsdelay.core.send import SendResult
from sqsdelay.errors import ConfigError, SqsOperationError
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings, load_settings

log = get_logger("sqsdelay.aws.retry_later")
T = TypeVar("T")


class OriginalNotDeleted(SqsOperationError):
    """The retry was sent but the original could not be deleted: it comes back after its
    visibility timeout (and is then retried again unless the handler is guarded).
    `handle_batch` reports such a record a success, so that Lambda deletes it."""


@dataclass(frozen=True)
class Retried:
    """What `retry_later` did: `attempt` is the retry's number (`sqsdelay.Attempt`); `sent`
    the sender's result (None when the message went to the error queue); `dead_lettered`
    the reason, when the backoff gave up."""

    attempt: int
    sent: SendResult | None = None
    dead_lettered: str | None = None
    message_id: str | None = None  # sqsdelay's id of the message, on every hop


def _when(delay: DelayLike | None, at: datetime | None) -> dict[str, Any]:
    return {"delay": delay, "deliver_at": at} if at is not None else {"delay": delay}


def _check(sender: SenderCore) -> None:
    if sender.settings.wire_format != "raw":
        raise ConfigError(
            "retry_later re-sends a message as received; with SQSDELAY_WIRE_FORMAT=nservicebus "
            "its body is an NServiceBus envelope already: let the NServiceBus endpoint retry "
            "it (its delayed retries), or use the raw wire format"
        )


def _check_region(sender: SenderCore, incoming: Incoming) -> None:
    """A message from another Region's queue cannot be retried with this sender's client:
    its queues would be looked up (and written to) in the client's Region instead."""
    meta = getattr(sender._client, "meta", None)  # the client the sender's calls go through
    own = getattr(meta, "region_name", None) or sender.settings.region
    if incoming.queue.region and own and incoming.queue.region != own:
        raise ConfigError(
            f"the message came from {incoming.queue.name!r} in {incoming.queue.region}, and "
            f"this sender's SQS client is in {own}: nothing was sent and the original stays. "
            f"Retry it with a sender of that Region (Sender(Settings(region="
            f"{incoming.queue.region!r}, ...)))"
        )


class _OwnedQueues(QueueResolver):
    """The sender's queue URLs, each looked up in `account` (the received message's) where a
    flow asks for the sender's own: a consumer of another account's queue retries into that
    account's queues. The URLs are kept in the sender's resolver under that account."""

    def __init__(self, inner: QueueResolver, account: str) -> None:
        super().__init__(inner.settings)
        self._inner = inner
        self._account = account

    def trio(self, queue: str) -> QueueTrio:
        return self._inner.trio(queue)

    def trio_of_delay_queue(self, delay_queue: str) -> QueueTrio:
        return self._inner.trio_of_delay_queue(delay_queue)

    def remember(self, t: QueueTrio) -> QueueTrio:
        return self._inner.remember(t)

    def failure(self, fault: Fault, operation: str, name: str) -> SqsOperationError:
        return self._inner.failure(fault, operation, name)

    def forget(self, name: str) -> None:
        self._inner.forget(name)

    def lookup(self, name: str, account: str = "") -> Flow[str]:
        return (yield from self._inner.lookup(name, account or self._account))


def _owned_by(sender: SenderCore, account: str) -> SenderCore:
    """`sender`, for flows on the queues of `account` (itself when the account is unknown).
    A shallow copy: the same clients, settings, breaker and registry, another resolver."""
    if not account:
        return sender
    view = copy.copy(sender)
    view.resolver = _OwnedQueues(sender.resolver, account)
    # Parking's targets (the delay queue a schedule sends to) are that account's too.
    view._targets = ParkTargets(view.settings, view.resolver)
    return view


def _addressed(flow: Flow[T], resolver: QueueResolver) -> Flow[T]:
    """`flow` with each call that names a queue given that queue's URL from `resolver`: the
    sender's caller would look the name up in the sender's own account."""
    try:
        calls = next(flow)
        while True:
            given = []
            for call in calls:
                if call.queue is not None and call.service == "sqs":
                    url = yield from resolver.lookup(call.queue)
                    call = Call(
                        call.service, call.api, {**call.params, "QueueUrl": url}, None, call.timeout
                    )
                given.append(call)
            calls = flow.send((yield given))
    except StopIteration as stop:
        result: T = stop.value
        return result


def _original_url(sender: SenderCore, incoming: Incoming) -> Flow[str]:
    if incoming.queue.url:
        return incoming.queue.url
    return (yield from sender.resolver.lookup(incoming.queue.name, incoming.queue.account))


def _delete_original(sender: SenderCore, incoming: Incoming) -> Flow[None]:
    url = yield from _original_url(sender, incoming)
    params = {"QueueUrl": url, "ReceiptHandle": incoming.received.receipt_handle}
    [reply] = yield [
        Call("sqs", "DeleteMessage", params, timeout=sender.settings.call_timeout_seconds)
    ]
    if reply.fault is not None:
        raise OriginalNotDeleted(
            "DeleteMessage",
            incoming.queue.name,
            reply.fault.code,
            (
                f"{reply.fault.detail[:200]}; the retry was sent, and the original comes back "
                "after its visibility timeout: guard the handler (sqsdelay.consumer.Guard) so "
                "that it runs once"
            ),
        )


def retry_flow(
    sender: SenderCore,
    incoming: Incoming,
    *,
    delay: DelayLike | None,
    at: datetime | None,
    attempt: int | None = None,
) -> Flow[Retried]:
    """Send the retry, then delete the original. A send that fails raises, and the original
    stays where it is (it comes back after its visibility timeout); so does a retry without
    room for its id (`TooManyAttributes`, `MessageTooLarge`), refused before sending."""
    _check(sender)
    _check_region(sender, incoming)
    number = (
        attempt if attempt is not None else retries.attempt_of(incoming.received.attributes) + 1
    )
    message = retries.retry_message(incoming, attempt=number, **_when(delay, at))
    queue = retries.requested_queue(incoming.queue.name, sender.settings.queue_prefix)
    owner = _owned_by(sender, incoming.queue.account)
    # The id is required here: a retry without it could be keyed by no guard.
    send = owner.send_flow(queue, message, require_id=True)
    result = yield from _addressed(send, owner.resolver)
    yield from _delete_original(sender, incoming)
    log.info(
        "consumer.retried",
        message_id=result.message_id,
        attempt=number,
        route=result.route,
        delay_seconds=result.delay_seconds,
        queue=incoming.queue.name,
    )
    return Retried(number, sent=result, message_id=result.message_id)


def dead_letter_flow(sender: SenderCore, incoming: Incoming, reason: str) -> Flow[Retried]:
    """To the error queue with the reason, in the `sqsdelay.Failure` record the worker writes
    on poison, so that `sqsdelay replay-errors QUEUE` brings it back; then delete."""
    _check(sender)
    _check_region(sender, incoming)
    number = retries.attempt_of(incoming.received.attributes)
    queue = retries.requested_queue(incoming.queue.name, sender.settings.queue_prefix)
    trio = sender.resolver.trio(queue)
    attributes = retries.dead_letter_attributes(
        incoming, reason, trio.delay, sender.settings.max_message_bytes
    )
    error = trio.error
    # The error queue of the message's account, where its replay-errors looks.
    url = yield from sender.resolver.lookup(error, incoming.queue.account)
    params: dict[str, Any] = {"QueueUrl": url, "MessageBody": incoming.received.body}
    if attributes:
        params["MessageAttributes"] = attributes
    [reply] = yield [
        Call("sqs", "SendMessage", params, timeout=sender.settings.call_timeout_seconds)
    ]
    if reply.fault is not None:
        raise sender.resolver.failure(reply.fault, "SendMessage", error)
    yield from _delete_original(sender, incoming)
    log.warning(
        "consumer.dead_lettered",
        message_id=incoming.message_id,
        attempt=number,
        queue=incoming.queue.name,
        reason=reason[:300],
    )
    return Retried(number, dead_lettered=reason, message_id=incoming.message_id)


def backoff_flow(
    sender: SenderCore, incoming: Incoming, backoff: Backoff, draw: float, reason: str
) -> Flow[Retried]:
    """The next retry after the backoff's wait, or the error queue once it gives up."""
    number = retries.attempt_of(incoming.received.attributes) + 1
    if backoff.gives_up(number):
        return (yield from dead_letter_flow(sender, incoming, backoff.reason(number, reason)))
    wait = backoff.delay(number, draw)
    return (yield from retry_flow(sender, incoming, delay=wait, at=None, attempt=number))


def retry_later(
    message: object,
    delay: DelayLike | None = None,
    *,
    at: datetime | None = None,
    queue_url: str | None = None,
    sender: Sender | None = None,
) -> Retried:
    """Re-send a received message through sqsdelay `delay` from now (seconds or a
    timedelta, any length) or `at` a time, then delete the original. `message`: a boto3
    ReceiveMessage message (with `queue_url`), a Lambda SQS event record, or a Powertools
    SQSRecord. A failed send raises and leaves the original in place."""
    incoming = received_rules.read(message, queue_url)
    s = sender or held_sender()
    return s.run(retry_flow(s, incoming, delay=delay, at=at))


async def async_retry_later(
    message: object,
    delay: DelayLike | None = None,
    *,
    at: datetime | None = None,
    queue_url: str | None = None,
    sender: AsyncSender,
) -> Retried:
    """As `retry_later`, with an entered `AsyncSender`."""
    incoming = received_rules.read(message, queue_url)
    return await sender.run(retry_flow(sender, incoming, delay=delay, at=at))


async def aretry_later(
    message: object,
    delay: DelayLike | None = None,
    *,
    at: datetime | None = None,
    queue_url: str | None = None,
    sender: AsyncSender,
) -> Retried:
    """Deprecated: `async_retry_later`."""
    deprecations.warn("sqsdelay.consumer.aretry_later", "sqsdelay.consumer.async_retry_later")
    return await async_retry_later(message, delay, at=at, queue_url=queue_url, sender=sender)


_HELD = threading.local()
_KEYED = ("SQSDELAY_", "AWS_")  # what `Sender()` reads: its settings, its boto3 client


def held_sender() -> Sender:
    """The `Sender` a call without `sender=` uses: one per thread (a consumer's threads never
    share one), made again when a SQSDELAY_* or AWS_* variable changes, or in a forked
    child. It was a new `Sender` per call: a boto3 client and every queue URL looked up
    again for each retry. Keyed by the variables, not by `Settings`, which take far longer
    to read than a retry's calls."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.upper().startswith(_KEYED)))
    key = (os.getpid(), env)
    held: tuple[object, Sender] | None = getattr(_HELD, "sender", None)
    if held is None or held[0] != key:
        held = (key, Sender())
        _HELD.sender = held
    return held[1]


@dataclass
class RetryPolicy:
    """`retry_later` with exponential backoff and full jitter, then the error queue:
    `policy.retry(message, reason)` after a failure. `AsyncRetryPolicy` with asyncio."""

    backoff: Backoff = field(default_factory=Backoff)
    draw: Callable[[], float] = random.random

    def retry(
        self,
        message: object,
        reason: str,
        *,
        queue_url: str | None = None,
        sender: Sender | None = None,
    ) -> Retried:
        incoming = received_rules.read(message, queue_url)
        s = sender or held_sender()
        return s.run(backoff_flow(s, incoming, self.backoff, self.draw(), reason))

    async def aretry(
        self, message: object, reason: str, *, queue_url: str | None = None, sender: AsyncSender
    ) -> Retried:
        """Deprecated: `AsyncRetryPolicy(backoff, draw).retry`."""
        deprecations.warn("RetryPolicy.aretry", "AsyncRetryPolicy(...).retry")
        policy = AsyncRetryPolicy(self.backoff, self.draw)
        return await policy.retry(message, reason, queue_url=queue_url, sender=sender)


@dataclass
class AsyncRetryPolicy:
    """`RetryPolicy` with an entered `AsyncSender`: `await policy.retry(message, reason,
    sender=sender)` after a failure."""

    backoff: Backoff = field(default_factory=Backoff)
    draw: Callable[[], float] = random.random

    async def retry(
        self, message: object, reason: str, *, queue_url: str | None = None, sender: AsyncSender
    ) -> Retried:
        incoming = received_rules.read(message, queue_url)
        return await sender.run(backoff_flow(sender, incoming, self.backoff, self.draw(), reason))


class RetryLater(Exception):
    """Raised by a `handle_batch` handler: retry this record `delay` from now (or `at`)."""

    def __init__(self, delay: DelayLike | None = None, *, at: datetime | None = None) -> None:
        super().__init__(f"retry later: delay={delay!r} at={at!r}")
        self.delay = delay
        self.at = at


def _tracing_settings(sender: Sender | None) -> Settings | None:
    """The settings that say how handlers are traced; None (the defaults) when SQSDELAY_*
    is invalid: that fails the retries, never the handlers."""
    if sender is not None:
        return sender.settings
    try:
        return load_settings()
    except ConfigError:
        return None


def handle_batch(
    event: Mapping[str, Any],
    handler: Callable[[Mapping[str, Any]], object],
    *,
    sender: Sender | None = None,
) -> dict[str, Any]:
    """Run `handler` on every record of a Lambda SQS event and answer Lambda's partial-batch
    response (`ReportBatchItemFailures`): a record whose handler raised is a failure (Lambda
    hands it out again); one whose handler raised `RetryLater` and whose retry was sent is a
    success (its retry is a new message), even when its own delete failed: Lambda deletes it.
    On a FIFO queue the records after a failure are failures too, unrun, so that their group
    keeps its order (as Powertools' `SqsFifoPartialProcessor`). With OpenTelemetry
    (docs/opentelemetry.md) each handler runs in a `process` span linked to the record's
    producer, or its child (SQSDELAY_OTEL_PARENT=child)."""
    failures: list[dict[str, str]] = []
    s = sender
    settings = _tracing_settings(sender)
    for record in event.get("Records", []):
        ident = str(record.get("messageId", ""))
        if failures and str(record.get("eventSourceARN", "")).endswith(".fifo"):
            failures.append({"itemIdentifier": ident})
            continue
        try:
            with otel.message_span(settings, record):
                handler(record)
        except RetryLater as later:
            try:  # the sender too: a bad SQSDELAY_* setting fails this record, not the batch
                s = s or held_sender()
                retry_later(record, later.delay, at=later.at, sender=s)
            except OriginalNotDeleted as exc:
                # The retry was sent: reported a success, Lambda deletes the original itself.
                # A failure would hand it out again, and this attempt would be retried twice.
                log.warning("consumer.original_not_deleted", sqs_message_id=ident, error=exc.code)
            except Exception as exc:  # the original stays: Lambda hands it out again
                log.warning("consumer.retry_failed", sqs_message_id=ident, error=type(exc).__name__)
                failures.append({"itemIdentifier": ident})
        except Exception as exc:
            log.warning("consumer.failed", sqs_message_id=ident, error=type(exc).__name__)
            failures.append({"itemIdentifier": ident})
    return {"batchItemFailures": failures}
