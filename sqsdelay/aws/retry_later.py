"""A consumer's retry later, driven: `retry_later`, `RetryPolicy` and Lambda's
`handle_batch` make the calls of `core/retry_flows.py`'s flows (the retry's send, then the
original's delete; the backoff into the error queue) with a `Sender` or an `AsyncSender`,
so that both behave the same; the rules are in `core/retries.py`.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqsdelay import deprecations, otel
from sqsdelay.aws.sender import AsyncSender, Sender
from sqsdelay.core import consumer_message
from sqsdelay.core.delays import DelayLike
from sqsdelay.core.retries import Backoff
from sqsdelay.core.retry_flows import (
    OriginalNotDeleted,
    Retried,
    backoff_flow,
    retry_flow,
)
from sqsdelay.errors import ConfigError
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings, load_settings

log = get_logger("sqsdelay.aws.retry_later")

__all__ = [
    "AsyncRetryPolicy",
    "OriginalNotDeleted",
    "Retried",
    "RetryLater",
    "RetryPolicy",
    "aretry_later",
    "async_retry_later",
    "handle_batch",
    "held_sender",
    "retry_later",
]


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
    incoming = consumer_message.read(message, queue_url)
    s = sender or held_sender()
    return s.run(retry_flow(s.flows, incoming, delay=delay, at=at))


async def async_retry_later(
    message: object,
    delay: DelayLike | None = None,
    *,
    at: datetime | None = None,
    queue_url: str | None = None,
    sender: AsyncSender,
) -> Retried:
    """As `retry_later`, with an entered `AsyncSender`."""
    incoming = consumer_message.read(message, queue_url)
    return await sender.run(retry_flow(sender.flows, incoming, delay=delay, at=at))


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
    to read than a retry's calls. The one it replaces is closed. Static keys in
    ~/.aws/credentials are read when a sender is made, so one rewritten there (by a sidecar)
    is not seen until a variable changes: give `sender=` to control that (docs/consumers.md)."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.upper().startswith(_KEYED)))
    key = (os.getpid(), env)
    held: tuple[tuple[int, object], Sender] | None = getattr(_HELD, "sender", None)
    if held is None or held[0] != key:
        replaced = held
        held = (key, Sender())
        _HELD.sender = held
        # This thread's only: no other call can be using it. In a forked child its clients'
        # connections are the parent's too, so closing them there is left to the parent.
        if replaced is not None and replaced[0][0] == key[0]:
            replaced[1].close()
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
        incoming = consumer_message.read(message, queue_url)
        s = sender or held_sender()
        return s.run(backoff_flow(s.flows, incoming, self.backoff, self.draw(), reason))

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
        incoming = consumer_message.read(message, queue_url)
        return await sender.run(
            backoff_flow(sender.flows, incoming, self.backoff, self.draw(), reason)
        )


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
