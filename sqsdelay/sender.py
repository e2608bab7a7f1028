"""Sending delayed messages: synchronous (boto3) and asyncio (aioboto3) senders.

Both use the same pure planning (`plan`), so they behave the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aioboto3
from botocore.exceptions import BotoCoreError, ClientError

from sqsdelay import batching, limits, names, nservicebus, parking, schedules, wire
from sqsdelay._types import Attributes, CancelOutcome, Route, Sent
from sqsdelay.backoff import BackoffTimer
from sqsdelay.clients import (
    client_kwargs,
    error_code,
    is_service_fault,
    scheduler_kwargs,
    sync_client,
    sync_scheduler,
)
from sqsdelay.delays import DelayLike, delay_seconds, route
from sqsdelay.errors import (
    BatchSendError,
    ConfigError,
    InvalidMessage,
    MessageDelayTooLong,
    SqsOperationError,
)
from sqsdelay.logs import get_logger
from sqsdelay.processing import park_after_seconds
from sqsdelay.queues import QueueResolver, install_command, park_target
from sqsdelay.settings import Settings, load_settings

log = get_logger("sqsdelay.sender")


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


@dataclass(frozen=True)
class PlannedSend:
    requested: str  # the queue as the caller named it, without the prefix
    destination: str
    queue: str
    route: Route
    delay_seconds: int
    size_bytes: int
    request: dict[str, Any]
    nservicebus_message_id: str | None = None


@dataclass(frozen=True)
class SendResult:
    """`message_id`: SQS's id; for a parked message (no SQS message yet) the message's own
    id, the one `cancel` takes (also `group_id` on the delay-queue route)."""

    message_id: str
    route: Sent
    queue: str
    queue_url: str
    destination: str
    delay_seconds: int
    size_bytes: int
    index: int = 0
    group_id: str | None = None  # delay-queue route: stable id of the message across hops
    nservicebus_message_id: str | None = None  # the NServiceBus.MessageId it carries

    def as_dict(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "route": self.route,
            "queue": self.queue,
            "queue_url": self.queue_url,
            "destination": self.destination,
            "delay_seconds": self.delay_seconds,
            "size_bytes": self.size_bytes,
            "group_id": self.group_id,
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
    settings: Settings,
    *,
    now: float,
    new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
) -> PlannedSend:
    """Validate a message and decide where and how it is sent. No I/O."""
    destination = names.destination_name(queue, settings.queue_prefix)
    seconds = delay_seconds(message.delay, deliver_at=message.deliver_at, now=now)
    try:
        where = route(
            seconds,
            max_native_delay=settings.max_native_delay_seconds,
            unrestricted=settings.unrestricted,
        )
    except MessageDelayTooLong as exc:
        raise MessageDelayTooLong(f"{exc} ({install_command(settings, queue)})") from None
    wire.check_body(message.body)
    attributes: Attributes = dict(message.attributes)
    wire.check_user_attributes(attributes)
    # One id names the message everywhere: envelope, NServiceBus.MessageId, group, dedup.
    ident = new_id()
    body = message.body
    nsb_id: str | None = None
    if settings.wire_format == "nservicebus":
        body = nservicebus.envelope(
            message.body,
            message_id=ident,
            message_type=nservicebus.check_message_type(message.message_type),
            time_sent=datetime.fromtimestamp(now, UTC),
        )
        nsb_id = ident  # NServiceBus sets the attribute on every send (SqsPreparedMessage)
    elif message.message_type is not None:
        attributes[limits.MESSAGE_TYPE_ATTRIBUTE] = wire.string_attribute(
            nservicebus.check_message_type(message.message_type)
        )
    request: dict[str, Any] = {"MessageBody": body}
    if where == "direct":
        target = destination
        if seconds:
            request["DelaySeconds"] = seconds
    else:
        target = names.delay_queue_name(destination)
        attributes[limits.DELAY_ATTRIBUTE] = wire.string_attribute(str(seconds))
        # One group per message, so no message ever blocks another.
        request["MessageGroupId"] = request["MessageDeduplicationId"] = nsb_id = ident
    if nsb_id is not None:
        attributes[limits.MESSAGE_ID_ATTRIBUTE] = wire.string_attribute(nsb_id)
    wire.check_fits(body, attributes, settings.max_message_bytes)
    if attributes:
        request["MessageAttributes"] = attributes
    return PlannedSend(
        requested=queue,
        destination=destination,
        queue=target,
        route=where,
        delay_seconds=seconds,
        size_bytes=wire.message_size(body, attributes),
        request=request,
        nservicebus_message_id=nsb_id,
    )


def park_request(
    planned: PlannedSend,
    settings: Settings,
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
    due = int(now * 1000) + planned.delay_seconds * 1000
    fire = parking.fire_at_ms(due, settings.max_native_delay_seconds)
    attrs = parking.back_attributes(planned.request.get("MessageAttributes", {}), due, fire)
    body = planned.request["MessageBody"]
    try:
        wire.check_fits(body, attrs, settings.max_message_bytes)
        return parking.create_schedule_request(
            name=parking.schedule_name(planned.queue, ident),
            fire_ms=fire,
            target=target,
            body=body,
            attributes=attrs,
            group_id=ident,
            dedup=parking.dedup_id(ident, due),
        )
    except InvalidMessage:
        return None


class SenderParking:
    """A sender's parking state: the threshold (computed once) and a circuit breaker, so
    that a Scheduler in trouble costs one failed call per backoff, not one per send."""

    def __init__(self, settings: Settings) -> None:
        self.after = park_after_seconds(settings)
        # Scheduler's outages last longer than a send: wait 5 s first, then 10, 20 ...
        self._breaker = BackoffTimer(base_seconds=5)

    def paused(self, now: float) -> bool:
        return self.after is None or self._breaker.retry_in(parking.BREAKER_KEY, now) > 0

    def parked(
        self,
        planned: PlannedSend,
        request: dict[str, Any],
        answer: tuple[Exception | None, dict[str, Any] | None],
        now: float,
    ) -> bool:
        """Whether the CreateSchedule answer parked it (a retried create that met its own
        schedule counts); otherwise it is sent to the delay queue as usual."""
        if schedules.accepted(answer, request):
            self._breaker.success(parking.BREAKER_KEY)
            return True
        error = answer[0]
        assert error is not None
        code = error_code(error)
        if is_service_fault(error, parking.SERVICE_FAULT_CODES):
            wait = self._breaker.failure(parking.BREAKER_KEY, now)
            log.error("scheduler.unavailable", code=code, retry_in_seconds=wait)
        log.warning("delay.park_skipped", message_id=planned.request["MessageGroupId"], reason=code)
        return False


def _cancel_names(settings: Settings, resolver: QueueResolver, queue: str) -> tuple[str, str]:
    if settings.parking == "off":
        raise ConfigError(
            "cancel works on parked messages: set SQSDELAY_PARKING=scheduler (a message in "
            "the loop cannot be cancelled)"
        )
    return resolver.trio(queue).delay, settings.schedule_group


def _result(
    planned: PlannedSend, url: str, message_id: str, index: int = 0, *, parked: bool = False
) -> SendResult:
    result = SendResult(
        message_id=message_id,
        route="parked" if parked else planned.route,
        queue=planned.queue,
        queue_url=url,
        destination=planned.destination,
        delay_seconds=planned.delay_seconds,
        size_bytes=planned.size_bytes,
        index=index,
        group_id=planned.request.get("MessageGroupId"),
        nservicebus_message_id=planned.nservicebus_message_id,
    )
    log.info(
        "delay.scheduled",
        message_id=message_id,
        destination=planned.destination,
        queue=planned.queue,
        delay_seconds=planned.delay_seconds,
        size_bytes=planned.size_bytes,
        route=result.route,
        group_id=result.group_id,
    )
    return result


def _batches(
    planned: Sequence[PlannedSend], settings: Settings, skip: set[int] | None = None
) -> list[list[int]]:
    """Batches of indexes into `planned`, leaving out `skip` (already parked)."""
    batches = batching.chunk(
        planned,
        key=lambda p: p.queue,
        size=lambda p: p.size_bytes,
        max_bytes=settings.max_message_bytes,
    )
    return [kept for b in batches if (kept := [i for i in b if i not in (skip or set())])]


def _collect(
    result: BatchResult,
    planned: Sequence[PlannedSend],
    batch: list[int],
    url: str,
    response: dict[str, Any],
) -> None:
    ok, failed = batching.read_batch_response(response, (str(i) for i in batch))
    for index in batch:
        entry_id = str(index)
        if entry_id in ok:
            result.sent.append(_result(planned[index], url, ok[entry_id]["MessageId"], index))
        else:
            f = failed[entry_id]
            result.failed.append(SendFailure(index, planned[index].queue, f.code, f.message))


def _fail_batch(
    result: BatchResult, planned: Sequence[PlannedSend], batch: list[int], err: SqsOperationError
) -> None:
    for index in batch:
        result.failed.append(SendFailure(index, planned[index].queue, err.code, err.detail))


def _finish(result: BatchResult, total: int, raise_on_failure: bool) -> BatchResult:
    result.sent.sort(key=lambda r: r.index)
    result.failed.sort(key=lambda f: f.index)
    if result.failed:
        log.error("delay.batch_failed", failed=len(result.failed), total=total)
        if raise_on_failure:
            raise BatchSendError(result, len(result.failed), total)
    return result


def _entries(planned: Sequence[PlannedSend], batch: list[int]) -> list[dict[str, Any]]:
    return [{"Id": str(i), **planned[i].request} for i in batch]


class Sender:
    """Synchronous sender (boto3)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: Any = None,
        scheduler: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or load_settings()
        self._client = client or sync_client(self.settings)
        self._scheduler = scheduler
        self._clock = clock
        self.resolver = QueueResolver(self.settings)
        self._parking = SenderParking(self.settings)

    @property
    def scheduler(self) -> Any:
        if self._scheduler is None:
            self._scheduler = sync_scheduler(self.settings)
        return self._scheduler

    def _url(self, planned: PlannedSend) -> str:
        self.resolver.trio(planned.requested)
        return self.resolver.url(self._client, planned.queue)

    def _park(self, planned: PlannedSend, now: float, index: int = 0) -> SendResult | None:
        """Park at send time (skipping the first hop); None: send it as usual."""
        if self._parking.paused(now) or planned.route != "delay-queue":
            return None
        t = self.resolver.trio(planned.requested)
        url = self._url(planned)
        error_url = self.resolver.url(self._client, t.error)
        target = park_target(self.settings, self._client, url, error_url)
        request = park_request(planned, self.settings, target, now=now, after=self._parking.after)
        if request is None:
            return None
        answer = schedules.create(self.scheduler, request)
        if not self._parking.parked(planned, request, answer, self._clock()):
            return None
        return _result(planned, url, planned.request["MessageGroupId"], index, parked=True)

    def cancel(self, queue: str, message_id: str) -> CancelOutcome:
        """Cancel a parked message by the id `send` returned: `cancelled`, or `too-late`
        when it is no longer parked (in its last hops, delivered, or never parked)."""
        delay_queue, group = _cancel_names(self.settings, self.resolver, queue)
        name = parking.schedule_name(delay_queue, message_id)
        cycle = self.settings.max_native_delay_seconds
        outcome = schedules.cancel(self.scheduler, name, group, now=self._clock(), cycle=cycle)
        log.info("delay.cancel", message_id=message_id, queue=delay_queue, outcome=outcome)
        return outcome

    def send(
        self,
        queue: str,
        body: str,
        *,
        delay: DelayLike | None = None,
        deliver_at: datetime | None = None,
        attributes: Mapping[str, Any] | None = None,
        message_type: str | None = None,
    ) -> SendResult:
        message = Message(body, delay, deliver_at, attributes or {}, message_type)
        now = self._clock()
        planned = plan(queue, message, self.settings, now=now)
        parked = self._park(planned, now)
        if parked is not None:
            return parked
        url = self._url(planned)
        try:
            resp = self._client.send_message(QueueUrl=url, **planned.request)
        except (ClientError, BotoCoreError) as exc:
            raise self.resolver.error(exc, "SendMessage", planned.queue) from None
        return _result(planned, url, resp["MessageId"])

    def send_batch(
        self, queue: str, messages: Sequence[Message], *, raise_on_failure: bool = True
    ) -> BatchResult:
        """Send many messages in as few SendMessageBatch calls as the limits allow.

        Every message is validated before anything is sent. Raises `BatchSendError` (which
        carries the full result) if any entry failed, unless `raise_on_failure` is False.
        """
        now = self._clock()
        planned = [plan(queue, m, self.settings, now=now) for m in messages]
        result = BatchResult()
        parked = [self._park(p, now, i) for i, p in enumerate(planned)]
        result.sent += [r for r in parked if r is not None]
        for batch in _batches(planned, self.settings, skip={r.index for r in result.sent}):
            try:
                url = self._url(planned[batch[0]])
                resp = self._client.send_message_batch(
                    QueueUrl=url, Entries=_entries(planned, batch)
                )
            except SqsOperationError as exc:
                _fail_batch(result, planned, batch, exc)
                continue
            except (ClientError, BotoCoreError) as exc:
                err = self.resolver.error(exc, "SendMessageBatch", planned[batch[0]].queue)
                _fail_batch(result, planned, batch, err)
                continue
            _collect(result, planned, batch, url, resp)
        return _finish(result, len(planned), raise_on_failure)


class AsyncSender:
    """asyncio sender (aioboto3). Use as `async with AsyncSender(settings) as sender:`."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or load_settings()
        self._clock = clock
        self.resolver = QueueResolver(self.settings)
        self._parking = SenderParking(self.settings)
        self._session = aioboto3.Session()
        self._stack = contextlib.AsyncExitStack()
        self._client: Any = None
        self._scheduler: Any = None

    async def __aenter__(self) -> AsyncSender:
        kwargs = client_kwargs(self.settings, max_pool=50)
        self._client = await self._stack.enter_async_context(self._session.client("sqs", **kwargs))
        if self.settings.parking == "scheduler":
            kwargs = scheduler_kwargs(self.settings, max_pool=50)
            self._scheduler = await self._stack.enter_async_context(
                self._session.client("scheduler", **kwargs)
            )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    async def _url(self, planned: PlannedSend) -> str:
        self.resolver.trio(planned.requested)
        return await self.resolver.aurl(self._client, planned.queue)

    async def _park(self, planned: PlannedSend, now: float, index: int = 0) -> SendResult | None:
        """As `Sender._park`."""
        if self._parking.paused(now) or planned.route != "delay-queue":
            return None
        t = self.resolver.trio(planned.requested)
        url = await self._url(planned)
        error_url = await self.resolver.aurl(self._client, t.error)
        target = park_target(self.settings, self._client, url, error_url)
        request = park_request(planned, self.settings, target, now=now, after=self._parking.after)
        if request is None:
            return None
        answer = await schedules.acreate(self._scheduler, request)
        if not self._parking.parked(planned, request, answer, self._clock()):
            return None
        return _result(planned, url, planned.request["MessageGroupId"], index, parked=True)

    async def cancel(self, queue: str, message_id: str) -> CancelOutcome:
        """As `Sender.cancel`."""
        delay_queue, group = _cancel_names(self.settings, self.resolver, queue)
        name = parking.schedule_name(delay_queue, message_id)
        cycle = self.settings.max_native_delay_seconds
        outcome = await schedules.acancel(
            self._scheduler, name, group, now=self._clock(), cycle=cycle
        )
        log.info("delay.cancel", message_id=message_id, queue=delay_queue, outcome=outcome)
        return outcome

    async def send(
        self,
        queue: str,
        body: str,
        *,
        delay: DelayLike | None = None,
        deliver_at: datetime | None = None,
        attributes: Mapping[str, Any] | None = None,
        message_type: str | None = None,
    ) -> SendResult:
        message = Message(body, delay, deliver_at, attributes or {}, message_type)
        now = self._clock()
        planned = plan(queue, message, self.settings, now=now)
        parked = await self._park(planned, now)
        if parked is not None:
            return parked
        url = await self._url(planned)
        try:
            resp = await self._client.send_message(QueueUrl=url, **planned.request)
        except (ClientError, BotoCoreError) as exc:
            raise self.resolver.error(exc, "SendMessage", planned.queue) from None
        return _result(planned, url, resp["MessageId"])

    async def send_batch(
        self, queue: str, messages: Sequence[Message], *, raise_on_failure: bool = True
    ) -> BatchResult:
        """As `Sender.send_batch`; the batches go out concurrently."""
        now = self._clock()
        planned = [plan(queue, m, self.settings, now=now) for m in messages]
        result = BatchResult()
        parked = await asyncio.gather(*(self._park(p, now, i) for i, p in enumerate(planned)))
        result.sent += [r for r in parked if r is not None]

        async def one(batch: list[int]) -> None:
            try:
                url = await self._url(planned[batch[0]])
                resp = await self._client.send_message_batch(
                    QueueUrl=url, Entries=_entries(planned, batch)
                )
            except SqsOperationError as exc:
                _fail_batch(result, planned, batch, exc)
                return
            except (ClientError, BotoCoreError) as exc:
                err = self.resolver.error(exc, "SendMessageBatch", planned[batch[0]].queue)
                _fail_batch(result, planned, batch, err)
                return
            _collect(result, planned, batch, url, resp)

        skip = {r.index for r in result.sent}
        await asyncio.gather(*(one(b) for b in _batches(planned, self.settings, skip)))
        return _finish(result, len(planned), raise_on_failure)


__all__ = [
    "AsyncSender",
    "BatchResult",
    "Message",
    "SendFailure",
    "SendResult",
    "Sender",
    "plan",
]
