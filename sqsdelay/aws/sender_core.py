"""The sender's flows: send, send in batches, park at send time, record in the registry,
cancel, reschedule, list. Written once as flows (`core/flows.py`) over what `core/send.py`
plans, so that `Sender` and `AsyncSender` (`sender.py`) only make the calls.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypedDict

from sqsdelay import otel
from sqsdelay.aws.queue_urls import ParkTargets, QueueResolver
from sqsdelay.core import (
    batch_entries,
    debounce,
    identity,
    message_tags,
    parked,
    parking,
    registry,
    registry_pages,
    schedules,
    send,
    tracing,
    wire_format,
)
from sqsdelay.core.backoff import BackoffTimer
from sqsdelay.core.delays import DelayLike, delay_milliseconds
from sqsdelay.core.flows import Call, Flow, gather
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.core.send import (
    BatchResult,
    Message,
    PlannedSend,
    SendFailure,
    SendResult,
)
from sqsdelay.core.types import CancelOutcome, RescheduleOutcome
from sqsdelay.errors import (
    BatchSendError,
    ConfigError,
    InvalidDelay,
    InvalidInput,
    RegistryError,
    SqsOperationError,
)
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings, load_settings

log = get_logger("sqsdelay.aws.sender")


def plan(queue: str, message: Message, settings: Settings, **when: Any) -> PlannedSend:
    """What `send` would send, without sending: `core.send.plan` under these settings
    (`now`, and optionally `new_id` and `ambient_trace`, as there)."""
    return send.plan(queue, message, settings.send_limits(), **when)


class NewDueTime(TypedDict, total=False):
    """The keyword arguments of `reschedule`: one of them."""

    delay: DelayLike | None
    at: datetime | None


class ScheduledQuery(TypedDict, total=False):
    """The keyword arguments of `scheduled` (their defaults: `scheduled_flow`'s)."""

    due_before: datetime | None
    state: registry.State | None
    limit: int


def _ambient_trace() -> str | None:
    return os.environ.get(tracing.AMBIENT)


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


def _collect(
    result: BatchResult,
    planned: Sequence[PlannedSend],
    batch: list[int],
    url: str,
    response: dict[str, Any],
) -> None:
    ok, failed = batch_entries.read_batch_response(response, (str(i) for i in batch))
    for index in batch:
        entry_id = str(index)
        if entry_id in ok:
            result.sent.append(_result(planned[index], url, ok[entry_id]["MessageId"], index))
        else:
            f = failed[entry_id]
            result.failed.append(SendFailure(index, planned[index].queue, f.code, f.message))


def _traced(
    producer: otel.Producer | None, planned: PlannedSend, result: SendResult, now: float
) -> SendResult:
    """End the send's span with what was sent (`sqsdelay.otel`)."""
    if producer is not None:
        due_ms = int(now * 1000) + planned.delay_ms
        producer.sent(result.queue, result.sqs_message_id, result.message_id, due_ms)
    return result


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


class SenderCore:
    """The rules of sending, written once as flows (`sqsdelay.core.flows`): plan, park at
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
        self._limits = self.settings.send_limits()

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
        request = send.park_request(planned, self._limits, target, now=now, after=self._after)
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

    def _check_tagged(self, planned: Sequence[PlannedSend]) -> None:
        if self._table is None and any(p.tags for p in planned):
            raise ConfigError(
                "tags need the registry, which indexes them for cancel --tag: set "
                "SQSDELAY_REGISTRY=dynamodb (and run sqsdelay install), or send without tags"
            )

    def _register(self, planned: PlannedSend, now: float, index: int) -> Flow[SendResult | None]:
        """Record a delay-queue send in the registry before it is sent; a result (nothing to
        send) when the id is scheduled already. Raises RegistryError: nothing is sent."""
        if self._table is None or planned.route != "delay-queue":
            return None
        ident = planned.request["MessageGroupId"]
        now_ms = int(now * 1000)
        record = self._record(planned, now)
        timeout = self.settings.call_timeout_seconds
        if (yield from registry.put(self._table, record, now_ms, timeout)):
            if planned.tags:  # indexed before the send: a bulk cancel finds what went out
                expires = record.due_ms // 1000 + registry.KEEP_AFTER_DUE_SECONDS
                yield from message_tags.write(
                    self._table, planned.destination, ident, planned.tags, expires, timeout
                )
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
                send.changed_route(r, self._after),
                timeout,
            )
            for r in sent
        ]
        for result, ok in zip(sent, (yield from gather(marks)), strict=True):
            if not ok:
                log.warning("registry.mark_failed", message_id=result.message_id)

    def send_flow(
        self, queue: str, message: Message, *, require_id: bool = False
    ) -> Flow[SendResult]:
        """`require_id`: refuse a direct send without room for its id (`send.plan`)."""
        producer = otel.Producer.start(self.settings, queue)  # None: OpenTelemetry is off
        try:
            result = yield from self._send_one(queue, message, require_id, producer)
        except BaseException as exc:
            if producer is not None:
                producer.failed(exc)
            raise
        return result

    def _send_one(
        self, queue: str, message: Message, require_id: bool, producer: otel.Producer | None
    ) -> Flow[SendResult]:
        if message.debounce is not None or message.max_wait is not None:
            return (yield from self._debounced(queue, message, producer))
        now = self._clock()
        planned = send.plan(
            queue,
            message,
            self._limits,
            now=now,
            ambient_trace=_ambient_trace(),
            require_id=require_id,
            trace=producer.carrier if producer is not None else None,
        )
        otel.placed(planned)
        self._check_tagged([planned])
        duplicate = yield from self._register(planned, now, 0)
        if duplicate is not None:
            return _traced(producer, planned, duplicate, now)
        return (yield from self._deliver(planned, now, producer))

    def _deliver(
        self, planned: PlannedSend, now: float, producer: otel.Producer | None
    ) -> Flow[SendResult]:
        """A planned send, registered: parked, or sent; then confirmed."""
        result = yield from self._park(planned, now, 0)
        if result is None:
            url = yield from self._url(planned)
            [reply] = yield [Call("sqs", "SendMessage", planned.request, planned.queue)]
            if reply.fault is not None:
                raise self.resolver.failure(reply.fault, "SendMessage", planned.queue)
            result = _result(planned, url, reply.response["MessageId"])
        yield from self._confirm([result])
        return _traced(producer, planned, result, now)

    def _debounced(
        self, queue: str, message: Message, producer: otel.Producer | None
    ) -> Flow[SendResult]:
        """Debounce by key (`core/debounce.py`): move the key to its next generation in one
        transaction (cancelling the pending one while it is movable), then send this body
        as that generation, due at now + debounce but never past the window's cap."""
        if self._table is None:
            raise ConfigError("debounce needs the registry: set SQSDELAY_REGISTRY=dynamodb")
        if message.debounce is None:
            raise InvalidInput("max_wait goes with debounce: send(..., debounce=..., max_wait=...)")
        if message.delay is not None or message.deliver_at is not None:
            raise InvalidInput("give debounce instead of delay or deliver_at, not both")
        cycle = self.settings.max_native_delay_seconds
        wait_ms = delay_milliseconds(message.debounce, deliver_at=None, now=0)
        cap_ms = (
            delay_milliseconds(message.max_wait, deliver_at=None, now=0)
            if message.max_wait is not None
            else None
        )
        key = debounce.check(message.id, wait_ms, cap_ms, cycle)
        table, timeout = self._table, self.settings.call_timeout_seconds
        trio = yield from self._destination(queue)
        for _ in range(debounce.ATTEMPTS):
            now = self._clock()
            now_ms = int(now * 1000)
            before = yield from debounce.read(table, trio.destination, key, timeout)
            movable = debounce.movable(before, now_ms, cycle)
            for replace in (True, False) if movable else (False,):
                after = debounce.next_window(
                    before,
                    key=key,
                    now_ms=now_ms,
                    debounce_ms=wait_ms,
                    max_wait_ms=cap_ms,
                    replace=replace,
                )
                one = dataclasses.replace(
                    message,
                    id=after.message_id,
                    delay=timedelta(milliseconds=after.due_ms - now_ms),
                    debounce=None,
                    max_wait=None,
                )
                planned = send.plan(
                    queue,
                    one,
                    self._limits,
                    now=now,
                    ambient_trace=_ambient_trace(),
                    trace=producer.carrier if producer is not None else None,
                )
                record = self._record(planned, now)
                moved = yield from debounce.advance(
                    table,
                    planned.destination,
                    key,
                    before,
                    after,
                    record,
                    now_ms,
                    cancel_old=replace,
                    timeout=timeout,
                )
                if moved == "done":
                    log.info(
                        "delay.debounced",
                        key=key,
                        message_id=after.message_id,
                        replaced=before.message_id if replace and before else None,
                        due_at=registry.iso_utc(after.due_ms),
                    )
                    return (yield from self._send_recorded(planned, record, now, producer))
                if moved == "raced":
                    break  # another send moved the key: read it again
        raise RegistryError(
            "TransactWriteItems",
            table,
            "DebounceContended",
            f"{debounce.ATTEMPTS} sends of key {key!r} raced this one: send it again",
        )

    def _record(self, planned: PlannedSend, now: float) -> registry.Record:
        given = planned.request.get("MessageAttributes", {})
        return registry.Record(
            planned.destination,
            planned.message_id,
            int(now * 1000) + planned.delay_ms,
            "scheduled",
            send.written_route(planned.delay_seconds, self._after),
            size_bytes=planned.size_bytes,
            # the caller's names only (the console shows them; values and body stay out)
            attribute_names=tuple(sorted(set(given) - wire_format.SENDER_ATTRIBUTES)),
            tags=tuple(message_tags.as_strings(planned.tags)),
        )

    def _send_recorded(
        self,
        planned: PlannedSend,
        record: registry.Record,
        now: float,
        producer: otel.Producer | None,
    ) -> Flow[SendResult]:
        """The send of a message whose record is written: its tags, park or send, mark."""
        otel.placed(planned)
        if planned.tags and self._table is not None:
            expires = record.due_ms // 1000 + registry.KEEP_AFTER_DUE_SECONDS
            yield from message_tags.write(
                self._table,
                planned.destination,
                planned.message_id,
                planned.tags,
                expires,
                self.settings.call_timeout_seconds,
            )
        return (yield from self._deliver(planned, now, producer))

    def send_batch_flow(
        self, queue: str, messages: Sequence[Message], raise_on_failure: bool
    ) -> Flow[BatchResult]:
        if any(m.debounce is not None or m.max_wait is not None for m in messages):
            raise InvalidInput("debounce goes one message at a time: use send, not send_batch")
        now = self._clock()
        ambient = _ambient_trace()
        producers = [otel.Producer.start(self.settings, queue) for _ in messages]
        try:
            planned = [
                send.plan(
                    queue,
                    m,
                    self._limits,
                    now=now,
                    ambient_trace=ambient,
                    trace=p.carrier if p is not None else None,
                )
                for m, p in zip(messages, producers, strict=True)
            ]
            result = yield from self._send_planned(planned, now, raise_on_failure)
        except BaseException as exc:
            for p in producers:
                if p is not None:
                    p.failed(exc)
            raise
        for sent in result.sent:
            _traced(producers[sent.index], planned[sent.index], sent, now)
        for failed in result.failed:
            if (p := producers[failed.index]) is not None:
                p.failed(None)
        return result

    def _send_planned(
        self, planned: list[PlannedSend], now: float, raise_on_failure: bool
    ) -> Flow[BatchResult]:
        for p in planned:
            otel.placed(p)
        self._check_tagged(planned)
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
        skip = done | {r.index for r in result.sent}
        batches = send.batches(planned, self._limits, skip=skip)
        urls: dict[int, str] = {}
        for batch in batches:
            try:
                urls[batch[0]] = yield from self._url(planned[batch[0]])
            except SqsOperationError as exc:
                _fail_batch(result, planned, batch, exc)
        sendable = [b for b in batches if b[0] in urls]
        entries = [{"Entries": send.entries(planned, b)} for b in sendable]
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
        identity.check_message_id(message_id)
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
            name = identity.schedule_name(trio.delay, message_id)
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

    def cancel_tagged_flow(
        self, queue: str, tag: tuple[str, str], *, dry_run: bool = False, sample: int = 10
    ) -> Flow[message_tags.BulkCancel]:
        """Cancel every message of a destination sent with `tag` (or, `dry_run`, only count
        them and name a `sample`): each with `cancel_flow`'s conditional cancel, its outcome
        counted (`cancelled`, `too-late`, `unknown`), `park_concurrency` at a time."""
        message_tags.parse(f"{tag[0]}={tag[1]}")
        if self._table is None:
            raise ConfigError("cancel --tag needs the registry: set SQSDELAY_REGISTRY=dynamodb")
        trio = yield from self._destination(queue)
        timeout = self.settings.call_timeout_seconds
        ids = yield from message_tags.matching(self._table, trio.destination, tag, timeout)
        shown = f"{tag[0]}={tag[1]}"
        found = message_tags.BulkCancel(shown, len(ids), ids[:sample], dry_run)
        log.info("delay.cancel_tagged", queue=trio.delay, tag=shown, matched=len(ids))
        if dry_run:
            return found
        step = max(1, self.settings.park_concurrency)
        for start in range(0, len(ids), step):
            chunk = ids[start : start + step]
            for outcome in (yield from gather([self.cancel_flow(queue, i) for i in chunk])):
                found.count(outcome)
        log.info("delay.cancelled_tagged", queue=trio.delay, tag=shown, **found.outcomes)
        return found

    def tagged_flow(
        self, queue: str, tag: tuple[str, str], *, limit: int = 100
    ) -> Flow[tuple[int, list[registry.Record]]]:
        """How many messages of a destination carry `tag`, and the records of up to `limit`
        of them, soonest first (the console's tag filter)."""
        message_tags.parse(f"{tag[0]}={tag[1]}")
        if self._table is None:
            raise ConfigError("tags need the registry: set SQSDELAY_REGISTRY=dynamodb")
        trio = yield from self._destination(queue)
        timeout = self.settings.call_timeout_seconds
        ids = yield from message_tags.matching(self._table, trio.destination, tag, timeout)
        found = yield from registry.read(self._table, trio.destination, ids[:limit], timeout)
        if found.fault is not None:
            raise RegistryError("BatchGetItem", self._table, found.fault.code, found.fault.detail)
        return len(ids), sorted(found.records.values(), key=lambda r: (r.due_ms, r.message_id))

    def reschedule_flow(
        self,
        queue: str,
        message_id: str,
        *,
        delay: DelayLike | None = None,
        at: datetime | None = None,
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
            name = identity.schedule_name(trio.delay, message_id)
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

    def scheduled_page_flow(
        self, query: registry_pages.PageQuery, start: dict[str, Any] | None = None
    ) -> Flow[registry_pages.Page]:
        """One page of a destination's records (the console's Scheduled page), from `start`,
        the key the previous page returned."""
        if self._table is None:
            raise ConfigError("listing needs the registry: set SQSDELAY_REGISTRY=dynamodb")
        trio = yield from self._destination(query.destination)
        # the registry keys records by the destination's full (prefixed) name
        query = dataclasses.replace(query, destination=trio.destination)
        if start is not None and not registry_pages.is_start_key(start, trio.destination):
            raise InvalidInput("the continuation key is not one of this destination's")
        timeout = self.settings.call_timeout_seconds
        return (yield from registry_pages.page(self._table, query, start, timeout))

    def parked_flow(self, queue: str, *, scan: int = 200) -> Flow[parked.ParkedList]:
        """A destination's parked messages among the first `scan` schedules of the group
        (the console's Scheduled page without the registry)."""
        if self.settings.parking != "scheduler":
            raise ConfigError("listing parked messages needs SQSDELAY_PARKING=scheduler")
        trio = yield from self._destination(queue)
        return (
            yield from parked.listed(
                self.settings.schedule_group,
                trio.delay,
                scan=scan,
                timeout=self.settings.call_timeout_seconds,
            )
        )
