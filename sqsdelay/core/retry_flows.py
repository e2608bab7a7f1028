"""A consumer's retry later as flows: re-send a received message through the sender's
flows with any delay, then delete the original (only after the send succeeded); and the
backoff that gives up into the error queue, with the record the worker writes on poison.
The rules are `core/retries.py`'s; `aws/retry_later.py` drives these flows with a `Sender`
or an `AsyncSender`, so that both behave the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqsdelay.core import retries
from sqsdelay.core.consumer_message import ConsumerMessage
from sqsdelay.core.delays import DelayLike
from sqsdelay.core.flows import Call, Fault, Flow
from sqsdelay.core.queue_lookup import QueueLookup
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.core.retries import Backoff
from sqsdelay.core.send import SendResult
from sqsdelay.core.send_flows import SendFlows
from sqsdelay.errors import ConfigError, SqsOperationError
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.aws.retry_later")  # the name operators' log filters know
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


def _check(flows: SendFlows) -> None:
    if flows.config.limits.wire_format != "raw":
        raise ConfigError(
            "retry_later re-sends a message as received; with SQSDELAY_WIRE_FORMAT=nservicebus "
            "its body is an NServiceBus envelope already: let the NServiceBus endpoint retry "
            "it (its delayed retries), or use the raw wire format"
        )


def _check_region(flows: SendFlows, incoming: ConsumerMessage) -> None:
    """A message from another Region's queue cannot be retried with this sender's client:
    its queues would be looked up (and written to) in the client's Region instead."""
    own = flows.region()
    if incoming.queue.region and own and incoming.queue.region != own:
        raise ConfigError(
            f"the message came from {incoming.queue.name!r} in {incoming.queue.region}, and "
            f"this sender's SQS client is in {own}: nothing was sent and the original stays. "
            f"Retry it with a sender of that Region (Sender(Settings(region="
            f"{incoming.queue.region!r}, ...)))"
        )


class _OwnedQueues(QueueLookup):
    """The sender's queue URLs, each looked up in `account` (the received message's) where a
    flow asks for the sender's own: a consumer of another account's queue retries into that
    account's queues. The URLs are kept in the sender's resolver under that account."""

    def __init__(self, inner: QueueLookup, account: str) -> None:
        super().__init__(inner.queue_prefix, inner.error_queue, inner.install_hint)
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


def _owned_by(flows: SendFlows, account: str) -> SendFlows:
    """`flows`, on the queues of `account` (themselves when the account is unknown): the
    same configuration, breaker and registry, another resolver, and parking's targets (the
    delay queue a schedule sends to) that account's too."""
    if not account:
        return flows
    return flows.on_queues(_OwnedQueues(flows.resolver, account))


def _addressed(flow: Flow[T], resolver: QueueLookup) -> Flow[T]:
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


def _original_url(flows: SendFlows, incoming: ConsumerMessage) -> Flow[str]:
    if incoming.queue.url:
        return incoming.queue.url
    return (yield from flows.resolver.lookup(incoming.queue.name, incoming.queue.account))


def _delete_original(flows: SendFlows, incoming: ConsumerMessage) -> Flow[None]:
    url = yield from _original_url(flows, incoming)
    params = {"QueueUrl": url, "ReceiptHandle": incoming.received.receipt_handle}
    [reply] = yield [Call("sqs", "DeleteMessage", params, timeout=flows.config.call_timeout)]
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
    flows: SendFlows,
    incoming: ConsumerMessage,
    *,
    delay: DelayLike | None,
    at: datetime | None,
    attempt: int | None = None,
) -> Flow[Retried]:
    """Send the retry, then delete the original. A send that fails raises, and the original
    stays where it is (it comes back after its visibility timeout); so does a retry without
    room for its id (`TooManyAttributes`, `MessageTooLarge`), refused before sending."""
    _check(flows)
    _check_region(flows, incoming)
    number = (
        attempt if attempt is not None else retries.attempt_of(incoming.received.attributes) + 1
    )
    message = retries.retry_message(incoming, attempt=number, **_when(delay, at))
    queue = retries.requested_queue(incoming.queue.name, flows.config.limits.queue_prefix)
    owner = _owned_by(flows, incoming.queue.account)
    # The id is required here: a retry without it could be keyed by no guard.
    send = owner.send_flow(queue, message, require_id=True)
    result = yield from _addressed(send, owner.resolver)
    yield from _delete_original(flows, incoming)
    log.info(
        "consumer.retried",
        message_id=result.message_id,
        attempt=number,
        route=result.route,
        delay_seconds=result.delay_seconds,
        queue=incoming.queue.name,
    )
    return Retried(number, sent=result, message_id=result.message_id)


def dead_letter_flow(flows: SendFlows, incoming: ConsumerMessage, reason: str) -> Flow[Retried]:
    """To the error queue with the reason, in the `sqsdelay.Failure` record the worker writes
    on poison, so that `sqsdelay replay-errors QUEUE` brings it back; then delete."""
    _check(flows)
    _check_region(flows, incoming)
    number = retries.attempt_of(incoming.received.attributes)
    queue = retries.requested_queue(incoming.queue.name, flows.config.limits.queue_prefix)
    trio = flows.resolver.trio(queue)
    attributes = retries.dead_letter_attributes(
        incoming, reason, trio.delay, flows.config.limits.max_message_bytes
    )
    error = trio.error
    # The error queue of the message's account, where its replay-errors looks.
    url = yield from flows.resolver.lookup(error, incoming.queue.account)
    params: dict[str, Any] = {"QueueUrl": url, "MessageBody": incoming.received.body}
    if attributes:
        params["MessageAttributes"] = attributes
    [reply] = yield [Call("sqs", "SendMessage", params, timeout=flows.config.call_timeout)]
    if reply.fault is not None:
        raise flows.resolver.failure(reply.fault, "SendMessage", error)
    yield from _delete_original(flows, incoming)
    log.warning(
        "consumer.dead_lettered",
        message_id=incoming.message_id,
        attempt=number,
        queue=incoming.queue.name,
        reason=reason[:300],
    )
    return Retried(number, dead_lettered=reason, message_id=incoming.message_id)


def backoff_flow(
    flows: SendFlows, incoming: ConsumerMessage, backoff: Backoff, draw: float, reason: str
) -> Flow[Retried]:
    """The next retry after the backoff's wait, or the error queue once it gives up."""
    number = retries.attempt_of(incoming.received.attributes) + 1
    if backoff.gives_up(number):
        return (yield from dead_letter_flow(flows, incoming, backoff.reason(number, reason)))
    wait = backoff.delay(number, draw)
    return (yield from retry_flow(flows, incoming, delay=wait, at=None, attempt=number))
