"""A consumer's retry later: re-send a received message through the sender with any delay,
then delete the original (only after the send succeeded); and the backoff that gives up
into the error queue. Written once as flows (`core/flows.py`) driven by a `Sender` or an
`AsyncSender`, so that both behave the same; the rules are in `core/retries.py`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqsdelay.aws.sender import AsyncSender, Sender
from sqsdelay.aws.sender_core import SenderCore
from sqsdelay.core import consumed as received_rules
from sqsdelay.core import retries
from sqsdelay.core.consumed import Incoming
from sqsdelay.core.delays import DelayLike
from sqsdelay.core.flows import Call, Flow
from sqsdelay.core.retries import Backoff
from sqsdelay.core.send import SendResult
from sqsdelay.errors import ConfigError, SqsOperationError
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.aws.retry_later")


class OriginalNotDeleted(SqsOperationError):
    """The retry was sent but the original could not be deleted: it comes back after its
    visibility timeout (and is then retried again unless the handler is guarded)."""


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
    number = (
        attempt if attempt is not None else retries.attempt_of(incoming.received.attributes) + 1
    )
    message = retries.retry_message(incoming, attempt=number, **_when(delay, at))
    queue = retries.requested_queue(incoming.queue.name, sender.settings.queue_prefix)
    # The id is required here: a retry without it could be keyed by no guard.
    result = yield from sender.send_flow(queue, message, require_id=True)
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
    number = retries.attempt_of(incoming.received.attributes)
    queue = retries.requested_queue(incoming.queue.name, sender.settings.queue_prefix)
    trio = sender.resolver.trio(queue)
    attributes = retries.dead_letter_attributes(
        incoming.received, reason, trio.delay, sender.settings.max_message_bytes
    )
    error = trio.error
    params: dict[str, Any] = {"MessageBody": incoming.received.body}
    if attributes:
        params["MessageAttributes"] = attributes
    [reply] = yield [
        Call("sqs", "SendMessage", params, error, timeout=sender.settings.call_timeout_seconds)
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
    s = sender or Sender()
    return s.run(retry_flow(s, incoming, delay=delay, at=at))


async def aretry_later(
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


@dataclass
class RetryPolicy:
    """`retry_later` with exponential backoff and full jitter, then the error queue:
    `policy.retry(message, reason)` after a failure."""

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
        s = sender or Sender()
        return s.run(backoff_flow(s, incoming, self.backoff, self.draw(), reason))

    async def aretry(
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


def handle_batch(
    event: Mapping[str, Any],
    handler: Callable[[Mapping[str, Any]], object],
    *,
    sender: Sender | None = None,
) -> dict[str, Any]:
    """Run `handler` on every record of a Lambda SQS event and answer Lambda's partial-batch
    response (`ReportBatchItemFailures`): a record whose handler raised is a failure (Lambda
    hands it out again); one whose handler raised `RetryLater` and whose retry was sent is a
    success (its retry is a new message). On a FIFO queue the records after a failure are
    failures too, unrun, so that their group keeps its order (as Powertools'
    `SqsFifoPartialProcessor`)."""
    failures: list[dict[str, str]] = []
    s = sender
    for record in event.get("Records", []):
        ident = str(record.get("messageId", ""))
        if failures and str(record.get("eventSourceARN", "")).endswith(".fifo"):
            failures.append({"itemIdentifier": ident})
            continue
        try:
            handler(record)
        except RetryLater as later:
            s = s or Sender()
            try:
                retry_later(record, later.delay, at=later.at, sender=s)
            except Exception as exc:  # the original stays: Lambda hands it out again
                log.warning("consumer.retry_failed", sqs_message_id=ident, error=type(exc).__name__)
                failures.append({"itemIdentifier": ident})
        except Exception as exc:
            log.warning("consumer.failed", sqs_message_id=ident, error=type(exc).__name__)
            failures.append({"itemIdentifier": ident})
    return {"batchItemFailures": failures}
