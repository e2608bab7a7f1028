"""Sending delayed messages: synchronous (boto3) and asyncio (aioboto3) senders.

Both drive the same flows (`_SenderCore`), so they behave the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

from sqsdelay.aws.callers import AsyncCaller, SyncCaller
from sqsdelay.aws.clients import (
    client_kwargs,
    extra_services,
    service_kwargs,
    sync_client,
    sync_service,
)
from sqsdelay.aws.queues import ParkTargets, QueueResolver, QueueTrio, install_command
from sqsdelay.core import (
    batching,
    decision,
    defaults,
    names,
    nservicebus,
    parking,
    quotas,
    registry,
    schedules,
    tracing,
    wire,
    wirenames,
)
from sqsdelay.core.backoff import BackoffTimer
from sqsdelay.core.calls import Call, Flow, adrive, drive, gather
from sqsdelay.core.delays import DelayLike, delay_milliseconds, route
from sqsdelay.core.types import Attributes, CancelOutcome, RescheduleOutcome, Route, Sent
from sqsdelay.errors import (
    BatchSendError,
    ConfigError,
    InvalidDelay,
    InvalidInput,
    InvalidMessage,
    MessageDelayTooLong,
    RegistryError,
    SqsOperationError,
)
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings, load_settings

log = get_logger("sqsdelay.aws.sender")


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


class MessageOptions(TypedDict, total=False):
    """The keyword arguments of `send`: `Message`'s fields after the body."""

    delay: DelayLike | None
    deliver_at: datetime | None
    attributes: Mapping[str, Any]
    message_type: str | None
    id: str | None
    group_id: str | None
    trace_header: str | None


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
    settings: Settings,
    *,
    now: float,
    new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    ambient_trace: str | None = None,
) -> PlannedSend:
    """Validate a message and decide where and how it is sent. No I/O. `ambient_trace` is
    the current trace (_X_AMZN_TRACE_ID), used when the message names none."""
    destination = names.destination_name(queue, settings.queue_prefix)
    group = _group_of(message, destination)
    if message.trace_header is not None:
        trace: str | None = tracing.check(message.trace_header)
    else:  # the environment's is not the caller's doing: a bad one is left out, not refused
        trace = ambient_trace if tracing.is_header(ambient_trace) else None
    millis = delay_milliseconds(message.delay, deliver_at=message.deliver_at, now=now)
    seconds = -(-millis // 1000)
    if seconds > settings.max_delay_seconds:
        years = settings.max_delay_seconds / defaults.SECONDS_PER_YEAR
        raise InvalidDelay(
            f"a delay of {seconds} s is longer than the maximum of {settings.max_delay_seconds} s "
            f"({years:g} years, SQSDELAY_MAX_DELAY_SECONDS): was it given in milliseconds? "
            "Raise the setting if it is meant"
        )
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
    ident = registry.check_message_id(message.id) if message.id is not None else new_id()
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
        attributes[wirenames.MESSAGE_TYPE_ATTRIBUTE] = wire.string_attribute(
            nservicebus.check_message_type(message.message_type)
        )
    request: dict[str, Any] = {"MessageBody": body}
    request |= tracing.system_attributes(trace)
    fifo = names.is_fifo(destination)
    staged = False  # through a FIFO destination's staging queue
    # One key per send: a repeated call of this send (boto3's retry of a lost answer) is
    # dropped by FIFO deduplication, a new send of the same id (a Celery retry) is not.
    send_key = int(now * 1000) + millis  # the send's due time, epoch ms
    if where == "direct" and group is not None and fifo and not millis:
        target = destination  # a FIFO destination, now
        request["MessageGroupId"] = group
        request["MessageDeduplicationId"] = decision.forward_dedup_id(ident, str(send_key))
    elif where == "direct" and group is not None and fifo:
        staged = True
        # SQS takes no per-message delay on a FIFO queue: its staging queue does, and the
        # worker forwards what becomes visible there, deduplicated by the message's id and
        # this send's due time, after the fraction of a second beyond the whole seconds
        # (DelaySeconds, below).
        target = names.staging_queue_name(destination)
        attributes[wirenames.GROUP_ID_ATTRIBUTE] = wire.string_attribute(group)
        attributes[wirenames.DUE_AT_ATTRIBUTE] = wire.number_attribute(send_key)
        if millis % 1000:
            attributes[wirenames.DELAY_MS_ATTRIBUTE] = wire.string_attribute(str(millis))
        nsb_id = ident
    elif where == "direct":
        target = destination
        if seconds:
            request["DelaySeconds"] = seconds
        if group is not None:  # a fair queue's tenant
            request["MessageGroupId"] = group
    else:
        target = names.delay_queue_name(destination)
        if group is not None:
            attributes[wirenames.GROUP_ID_ATTRIBUTE] = wire.string_attribute(group)
        attributes[wirenames.DELAY_ATTRIBUTE] = wire.string_attribute(str(seconds))
        if millis % 1000:  # the worker's last hop is exact to the millisecond
            attributes[wirenames.DELAY_MS_ATTRIBUTE] = wire.string_attribute(str(millis))
        # One group per message, so no message ever blocks another; its deduplication id is
        # this send's, so that SQS's five minutes never swallow a new send of the same id.
        request["MessageGroupId"] = nsb_id = ident
        request["MessageDeduplicationId"] = hashlib.sha256(f"{ident}|{now}".encode()).hexdigest()
    if nsb_id is not None:
        attributes[wirenames.MESSAGE_ID_ATTRIBUTE] = wire.string_attribute(nsb_id)
    # No room: the fraction of a second goes first (whole seconds, rounded up), then the
    # staging send's due time (the forward then deduplicates by the staging message alone).
    for optional in (wirenames.DELAY_MS_ATTRIBUTE, wirenames.DUE_AT_ATTRIBUTE):
        if len(attributes) > quotas.MAX_MESSAGE_ATTRIBUTES:
            attributes.pop(optional, None)
    if staged:  # the whole seconds; the forward waits out the fraction it has room for
        exact = wirenames.DELAY_MS_ATTRIBUTE in attributes
        request["DelaySeconds"] = millis // 1000 if exact else seconds
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
        message_id=ident,
        nservicebus_message_id=nsb_id,
        delay_ms=millis,
        trace_header=trace,
    )


def _ambient_trace() -> str | None:
    return os.environ.get(tracing.AMBIENT)


def _group_of(message: Message, destination: str) -> str | None:
    """The message group: required by a FIFO destination; optional for a standard one, where
    SQS fair queues take it as the tenant (since 2025)."""
    if names.is_fifo(destination) or message.group_id is not None:
        return names.check_group_id(message.group_id, destination)
    return None


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
    due = int(now * 1000) + planned.delay_ms
    fire = parking.fire_at_ms(due, settings.max_native_delay_seconds)
    given = planned.request.get("MessageAttributes", {})
    kept = {k: v for k, v in given.items() if k != wirenames.DELAY_MS_ATTRIBUTE}  # DueAt says it
    attrs = parking.back_attributes(kept, due, fire)
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
            trace_header=planned.trace_header,
        )
    except InvalidMessage:
        return None


def _result(
    planned: PlannedSend,
    url: str,
    sqs_message_id: str | None,
    index: int = 0,
    *,
    parked: bool = False,
    duplicate: bool = False,
) -> SendResult:
    message_id = planned.message_id
    result = SendResult(
        message_id=message_id,
        route="parked" if parked else planned.route,
        queue=planned.queue,
        queue_url=url,
        destination=planned.destination,
        delay_seconds=planned.delay_seconds,
        size_bytes=planned.size_bytes,
        index=index,
        sqs_message_id=sqs_message_id,
        nservicebus_message_id=planned.nservicebus_message_id,
        duplicate=duplicate,
    )
    if duplicate:
        log.info("delay.duplicate", message_id=message_id, destination=planned.destination)
        return result
    log.info(
        "delay.scheduled",
        message_id=message_id,
        destination=planned.destination,
        queue=planned.queue,
        delay_seconds=planned.delay_seconds,
        size_bytes=planned.size_bytes,
        route=result.route,
        sqs_message_id=sqs_message_id,
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


def _written_route(delay_seconds: int, after: int | None) -> registry.RecordRoute:
    """The route `_register` records before sending: "parked" above the park threshold."""
    return "parked" if after is not None and delay_seconds > after else "delay-queue"


def _changed_route(result: SendResult, after: int | None) -> str | None:
    """The route a record must be corrected to: parking may have fallen back to the delay
    queue after `_register` wrote "parked"."""
    written = _written_route(result.delay_seconds, after)
    return None if result.route == written else result.route


def _entries(planned: Sequence[PlannedSend], batch: list[int]) -> list[dict[str, Any]]:
    return [{"Id": str(i), **planned[i].request} for i in batch]


class _SenderCore:
    """The rules of sending, written once as flows (`sqsdelay.core.calls`): plan, park at
    send time, send, send in batches, cancel. `Sender` and `AsyncSender` only make the
    calls, the way httpx's `Client` and `AsyncClient` share `BaseClient`."""

    def __init__(self, settings: Settings | None, clock: Callable[[], float]) -> None:
        self.settings = settings or load_settings()
        self._clock = clock
        self.resolver = QueueResolver(self.settings)
        self._targets = ParkTargets(self.settings, self.resolver)
        self._after = self.settings.park_after()
        # Scheduler's outages last longer than a send: wait 5 s first, then 10, 20 ...
        self._breaker = BackoffTimer(base_seconds=5)
        self._client: Any = None  # the SQS client (its region names the error queue's ARN)
        self._table = self.settings.registry_table_name()

    def _url(self, planned: PlannedSend) -> Flow[str]:
        self.resolver.trio(planned.requested)  # names the queues, so that a miss has its fix
        return (yield from self.resolver.lookup(planned.queue))

    def _paused(self, now: float) -> bool:
        """No parking: off, or the breaker is open after Scheduler failed."""
        return self._after is None or self._breaker.retry_in(parking.BREAKER_KEY, now) > 0

    def _park(self, planned: PlannedSend, now: float, index: int) -> Flow[SendResult | None]:
        """Park at send time, skipping the first hop; None: send it as usual."""
        if planned.route != "delay-queue" or self._paused(now):
            return None
        trio = self.resolver.trio(planned.requested)
        target = yield from self._targets.lookup(trio, self._client)
        if target is None:
            return None
        request = park_request(planned, self.settings, target, now=now, after=self._after)
        if request is None:
            return None
        answer = yield from schedules.create(request, self.settings.call_timeout_seconds)
        ident = planned.request["MessageGroupId"]
        refused = schedules.settle(answer, request, self._breaker, self._clock())
        if refused is not None:
            log.warning("delay.park_skipped", message_id=ident, reason=refused)
            return None
        url = yield from self._url(planned)
        return _result(planned, url, None, index, parked=True)

    def _register(self, planned: PlannedSend, now: float, index: int) -> Flow[SendResult | None]:
        """Record a delay-queue send in the registry before it is sent; a result (nothing to
        send) when the id is scheduled already. Raises RegistryError: nothing is sent."""
        if self._table is None or planned.route != "delay-queue":
            return None
        ident = planned.request["MessageGroupId"]
        now_ms = int(now * 1000)
        route = _written_route(planned.delay_seconds, self._after)
        record = registry.Record(
            planned.destination, ident, now_ms + planned.delay_ms, "scheduled", route
        )
        timeout = self.settings.call_timeout_seconds
        if (yield from registry.put(self._table, record, now_ms, timeout)):
            return None
        url = yield from self._url(planned)
        return _result(planned, url, None, index, duplicate=True)

    def _confirm(self, results: Sequence[SendResult]) -> Flow[None]:
        """Mark the records of what was sent: later sends with these ids are duplicates."""
        if self._table is None:
            return
        table, timeout = self._table, self.settings.call_timeout_seconds
        sent = [r for r in results if r.route != "direct" and not r.duplicate]
        marks = [
            registry.mark_sent(
                table,
                r.destination,
                r.message_id,
                _changed_route(r, self._after),
                timeout,
            )
            for r in sent
        ]
        for result, ok in zip(sent, (yield from gather(marks)), strict=True):
            if not ok:
                log.warning("registry.mark_failed", message_id=result.message_id)

    def send_flow(self, queue: str, message: Message) -> Flow[SendResult]:
        now = self._clock()
        planned = plan(queue, message, self.settings, now=now, ambient_trace=_ambient_trace())
        duplicate = yield from self._register(planned, now, 0)
        if duplicate is not None:
            return duplicate
        result = yield from self._park(planned, now, 0)
        if result is None:
            url = yield from self._url(planned)
            [reply] = yield [Call("sqs", "SendMessage", planned.request, planned.queue)]
            if reply.fault is not None:
                raise self.resolver.failure(reply.fault, "SendMessage", planned.queue)
            result = _result(planned, url, reply.response["MessageId"])
        yield from self._confirm([result])
        return result

    def send_batch_flow(
        self, queue: str, messages: Sequence[Message], raise_on_failure: bool
    ) -> Flow[BatchResult]:
        now = self._clock()
        ambient = _ambient_trace()
        planned = [plan(queue, m, self.settings, now=now, ambient_trace=ambient) for m in messages]
        result = BatchResult()
        done = yield from self._register_batch(planned, now, result)
        # Parks go out `park_concurrency` at a time, and stop as soon as the breaker opens.
        step = self.settings.park_concurrency
        waiting = [i for i, p in enumerate(planned) if p.route == "delay-queue" and i not in done]
        for start in range(0, len(waiting), step):
            if self._paused(self._clock()):
                break
            chunk = waiting[start : start + step]
            parked = yield from gather([self._park(planned[i], now, i) for i in chunk])
            result.sent += [r for r in parked if r is not None]
        batches = _batches(planned, self.settings, skip=done | {r.index for r in result.sent})
        urls: dict[int, str] = {}
        for batch in batches:
            try:
                urls[batch[0]] = yield from self._url(planned[batch[0]])
            except SqsOperationError as exc:
                _fail_batch(result, planned, batch, exc)
        sendable = [b for b in batches if b[0] in urls]
        entries = [{"Entries": _entries(planned, b)} for b in sendable]
        replies = yield [
            Call("sqs", "SendMessageBatch", e, planned[b[0]].queue)
            for b, e in zip(sendable, entries, strict=True)
        ]
        for batch, reply in zip(sendable, replies, strict=True):
            if reply.fault is not None:
                err = self.resolver.failure(
                    reply.fault, "SendMessageBatch", planned[batch[0]].queue
                )
                _fail_batch(result, planned, batch, err)
            else:
                _collect(result, planned, batch, urls[batch[0]], dict(reply.response))
        yield from self._confirm(result.sent)
        return _finish(result, len(planned), raise_on_failure)

    def _register_batch(
        self, planned: Sequence[PlannedSend], now: float, result: BatchResult
    ) -> Flow[set[int]]:
        """Register a batch's delay-queue sends, `park_concurrency` writes at a time: the
        indexes not to send (duplicates, in `result.sent`; unrecorded, in `result.failed`)."""
        done: set[int] = set()
        if self._table is None:
            return done
        todo = [i for i, p in enumerate(planned) if p.route == "delay-queue"]
        step = self.settings.park_concurrency
        for start in range(0, len(todo), step):
            chunk = todo[start : start + step]
            answers = yield from gather([self._try_register(planned[i], now, i) for i in chunk])
            for i, answer in zip(chunk, answers, strict=True):
                if isinstance(answer, SendResult):
                    result.sent.append(answer)
                elif isinstance(answer, SendFailure):
                    result.failed.append(answer)
                else:
                    continue
                done.add(i)
        return done

    def _try_register(
        self, planned: PlannedSend, now: float, index: int
    ) -> Flow[SendResult | SendFailure | None]:
        try:
            return (yield from self._register(planned, now, index))
        except RegistryError as exc:
            return SendFailure(index, planned.queue, exc.code, str(exc))

    def _destination(self, queue: str) -> Flow[QueueTrio]:
        """The queues of `queue`, after checking that its delay queue exists."""
        trio = self.resolver.trio(queue)
        yield from self.resolver.lookup(trio.delay)
        return trio

    def _check_findable(self, what: str, message_id: str) -> None:
        """Before a cancel or a reschedule: a valid id, and somewhere to find it."""
        registry.check_message_id(message_id)
        if self._table is None and self.settings.parking == "off":
            raise ConfigError(
                f"{what} needs the registry (SQSDELAY_REGISTRY=dynamodb) or a parked message "
                "(SQSDELAY_PARKING=scheduler); a message in the loop without a record cannot "
                "be found"
            )

    def cancel_flow(self, queue: str, message_id: str) -> Flow[CancelOutcome]:
        """Cancel a scheduled message by the id `send` returned. With the registry:
        `cancelled` until it is handed over, then `too-late`; `unknown` without a record
        (a parked one is still found by its schedule). Without: parked messages only."""
        self._check_findable("cancel", message_id)
        trio = yield from self._destination(queue)
        outcome: CancelOutcome = "unknown"
        if self._table is not None:
            status, _ = yield from registry.cancel(
                self._table,
                trio.destination,
                message_id,
                int(self._clock() * 1000),
                self.settings.call_timeout_seconds,
            )
            outcome = status
        if self.settings.parking == "scheduler" and outcome != "too-late":
            # Parked: delete the schedule too (with a record, that is tidying: the worker
            # drops a cancelled message whatever brings it back).
            name = parking.schedule_name(trio.delay, message_id)
            cycle = self.settings.max_native_delay_seconds
            group = self.settings.schedule_group
            try:
                deleted = yield from schedules.cancel(name, group, now=self._clock(), cycle=cycle)
            except SqsOperationError as exc:
                if outcome != "cancelled":
                    raise
                log.warning("schedule.delete_failed", schedule=name, code=exc.code)
                deleted = "too-late"
            if outcome == "unknown":
                outcome = "cancelled" if deleted == "cancelled" else "unknown"
            if self._table is None and deleted == "too-late":
                outcome = "too-late"
        log.info("delay.cancel", message_id=message_id, queue=trio.delay, outcome=outcome)
        return outcome

    def reschedule_flow(
        self, queue: str, message_id: str, *, delay: DelayLike | None, at: datetime | None
    ) -> Flow[tuple[RescheduleOutcome, int]]:
        """Move the due time of a scheduled message (a delay from now, or a time): the
        outcome and the new due time (epoch ms). With the registry, the worker follows the
        record at the message's next hop; a parked message's schedule is moved as well."""
        self._check_findable("reschedule", message_id)
        now = self._clock()
        millis = delay_milliseconds(delay, deliver_at=at, now=now)
        if at is not None and at.timestamp() <= now:
            raise InvalidDelay(f"--at {at.isoformat()} is in the past: give a later time")
        if millis > self.settings.max_delay_seconds * 1000:
            raise InvalidDelay(
                f"the new due time is {millis / 1000:.0f} s away, beyond the maximum delay of "
                f"{self.settings.max_delay_seconds} s (SQSDELAY_MAX_DELAY_SECONDS)"
            )
        due_ms = int(now * 1000) + millis
        trio = yield from self._destination(queue)
        outcome: RescheduleOutcome = "rescheduled"
        if self._table is not None:
            status, _ = yield from registry.reschedule(
                self._table,
                trio.destination,
                message_id,
                due_ms,
                int(now * 1000),
                self.settings.call_timeout_seconds,
            )
            if status != "done":
                outcome = "unknown" if status == "unknown" else "too-late"
        if self.settings.parking == "scheduler" and outcome == "rescheduled":
            name = parking.schedule_name(trio.delay, message_id)
            moved = yield from schedules.move(
                name,
                self.settings.schedule_group,
                message_id,
                due_ms=due_ms,
                now=now,
                cycle=self.settings.max_native_delay_seconds,
            )
            if self._table is None and moved != "rescheduled":
                outcome = "too-late"
        log.info("delay.rescheduled", message_id=message_id, queue=trio.delay, outcome=outcome)
        return outcome, due_ms

    def scheduled_flow(
        self,
        queue: str,
        *,
        due_before: datetime | None = None,
        state: registry.State | None = "scheduled",
        limit: int = 100,
    ) -> Flow[list[registry.Record]]:
        """The registry's records of a destination, soonest first."""
        if self._table is None:
            raise ConfigError("listing needs the registry: set SQSDELAY_REGISTRY=dynamodb")
        if limit < 1:
            raise InvalidInput(f"--limit {limit}: give 1 or more")
        if due_before is not None and due_before.tzinfo is None:
            raise InvalidDelay("--due-before needs a time zone, e.g. 2027-01-31T09:00:00Z")
        trio = yield from self._destination(queue)
        before = int(due_before.timestamp() * 1000) if due_before is not None else None
        return (
            yield from registry.listed(
                self._table,
                trio.destination,
                due_before_ms=before,
                state=state,
                limit=limit,
                timeout=self.settings.call_timeout_seconds,
            )
        )


class Sender(_SenderCore):
    """Synchronous sender (boto3)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: Any = None,
        scheduler: Any = None,
        dynamodb: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(settings, clock)
        self._client = client or sync_client(self.settings)
        clients = {"sqs": self._client}
        given = {"scheduler": scheduler, "dynamodb": dynamodb}
        for service in extra_services(self.settings):
            clients[service] = given[service] or sync_service(self.settings, service)
        self._caller = SyncCaller(clients, self.resolver, threads=self.settings.park_concurrency)

    def send(self, queue: str, body: str, **options: Unpack[MessageOptions]) -> SendResult:
        """Send one message; `options` are `Message`'s: `delay` or `deliver_at`,
        `attributes`, `message_type`, `id`, `group_id`."""
        return drive(self.send_flow(queue, Message(body, **options)), self._caller)

    def send_batch(
        self, queue: str, messages: Sequence[Message], *, raise_on_failure: bool = True
    ) -> BatchResult:
        """Send many messages in as few SendMessageBatch calls as the limits allow, the
        batches at once.

        Every message is validated before anything is sent. Raises `BatchSendError` (which
        carries the full result) if any entry failed, unless `raise_on_failure` is False.
        """
        return drive(self.send_batch_flow(queue, messages, raise_on_failure), self._caller)

    def cancel(self, queue: str, message_id: str) -> CancelOutcome:
        """Cancel a scheduled message by its id: `cancelled`, `too-late` or `unknown`."""
        return drive(self.cancel_flow(queue, message_id), self._caller)

    def reschedule(
        self,
        queue: str,
        message_id: str,
        *,
        delay: DelayLike | None = None,
        at: datetime | None = None,
    ) -> tuple[RescheduleOutcome, int]:
        """Move a scheduled message's due time: the outcome and the due time (epoch ms)."""
        return drive(self.reschedule_flow(queue, message_id, delay=delay, at=at), self._caller)

    def scheduled(
        self,
        queue: str,
        *,
        due_before: datetime | None = None,
        state: registry.State | None = "scheduled",
        limit: int = 100,
    ) -> list[registry.Record]:
        """What the registry holds for a destination, soonest first."""
        flow = self.scheduled_flow(queue, due_before=due_before, state=state, limit=limit)
        return drive(flow, self._caller)


class AsyncSender(_SenderCore):
    """asyncio sender (aioboto3). Use as `async with AsyncSender(settings) as sender:`."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(settings, clock)
        import aioboto3  # here, not at the top: a synchronous sender should not pay ~0.25 s

        self._session = aioboto3.Session()
        self._stack = contextlib.AsyncExitStack()
        self._caller: AsyncCaller | None = None

    async def __aenter__(self) -> AsyncSender:
        kwargs = client_kwargs(self.settings, max_pool=50)
        self._client = await self._stack.enter_async_context(self._session.client("sqs", **kwargs))
        clients = {"sqs": self._client}
        for service in extra_services(self.settings):
            kwargs = service_kwargs(self.settings, max_pool=50)
            clients[service] = await self._stack.enter_async_context(
                self._session.client(service, **kwargs)
            )
        self._caller = AsyncCaller(clients, self.resolver)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    @property
    def caller(self) -> AsyncCaller:
        if self._caller is None:
            raise RuntimeError("use the sender as `async with AsyncSender(...) as sender:`")
        return self._caller

    async def send(self, queue: str, body: str, **options: Unpack[MessageOptions]) -> SendResult:
        """As `Sender.send`."""
        return await adrive(self.send_flow(queue, Message(body, **options)), self.caller)

    async def send_batch(
        self, queue: str, messages: Sequence[Message], *, raise_on_failure: bool = True
    ) -> BatchResult:
        """As `Sender.send_batch`."""
        return await adrive(self.send_batch_flow(queue, messages, raise_on_failure), self.caller)

    async def cancel(self, queue: str, message_id: str) -> CancelOutcome:
        """As `Sender.cancel`."""
        return await adrive(self.cancel_flow(queue, message_id), self.caller)

    async def reschedule(
        self,
        queue: str,
        message_id: str,
        *,
        delay: DelayLike | None = None,
        at: datetime | None = None,
    ) -> tuple[RescheduleOutcome, int]:
        """As `Sender.reschedule`."""
        flow = self.reschedule_flow(queue, message_id, delay=delay, at=at)
        return await adrive(flow, self.caller)

    async def scheduled(
        self,
        queue: str,
        *,
        due_before: datetime | None = None,
        state: registry.State | None = "scheduled",
        limit: int = 100,
    ) -> list[registry.Record]:
        """As `Sender.scheduled`."""
        flow = self.scheduled_flow(queue, due_before=due_before, state=state, limit=limit)
        return await adrive(flow, self.caller)


__all__ = [
    "AsyncSender",
    "BatchResult",
    "Message",
    "MessageOptions",
    "SendFailure",
    "SendResult",
    "Sender",
    "plan",
]
