"""The sender's flows: send one message, send a batch, park at send time, record in the
registry (and debounce by key), then mark what was sent. Written once as flows
(`core/flows.py`) over what `core/send.py` plans and a frozen `SendConfig`, so that
`Sender` and `AsyncSender` (`aws/sender.py`) only make the calls. Cancelling, moving and
listing what was sent are `core/scheduled_flows.py`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from datetime import timedelta

from sqsdelay.core import (
    debounce,
    message_tags,
    registry,
    schedules,
    send,
    send_results,
    wire_format,
)
from sqsdelay.core.backoff import CircuitBreaker
from sqsdelay.core.delays import delay_milliseconds
from sqsdelay.core.flows import Call, Flow, gather
from sqsdelay.core.park_targets import ParkTargets, Place
from sqsdelay.core.parking import BREAKER_KEY
from sqsdelay.core.queue_lookup import QueueLookup
from sqsdelay.core.send import BatchResult, Message, PlannedSend, SendFailure, SendResult
from sqsdelay.core.send_config import SendConfig
from sqsdelay.core.send_tracing import NoTracing, Producer, Tracing
from sqsdelay.errors import (
    ConfigError,
    InvalidInput,
    RegistryError,
    SqsOperationError,
)
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.aws.sender")  # the name operators' log filters know
# Writes of a record a millisecond later each, when the id's earlier sends had its due time.
DUE_TAKEN_ATTEMPTS = 3


class SendFlows:
    """The rules of sending as flows: plan, park at send time, register, send, send in
    batches, mark. `place` says where the SQS client's queues are (partition, Region: the
    error queue's ARN a parked message's schedule names), None when there is no client."""

    def __init__(
        self,
        config: SendConfig,
        resolver: QueueLookup,
        *,
        clock: Callable[[], float],
        place: Callable[[], Place | None] = lambda: None,
        tracing: Tracing | None = None,
    ) -> None:
        self.config = config
        self.resolver = resolver
        self.targets = ParkTargets(config.schedule_group, config.park_role, resolver)
        self.place = place
        self.tracing: Tracing = tracing or NoTracing()
        self._clock = clock
        # Scheduler's outages last longer than a send: wait 5 s first, then 10, 20 ...
        self._breaker = CircuitBreaker(base_seconds=5)
        self._table = config.registry_table

    def on_queues(self, resolver: QueueLookup) -> SendFlows:
        """These flows on the queues `resolver` looks up (another account's): a shallow copy,
        with the same configuration, clock, tracing and Scheduler breaker."""
        view = copy.copy(self)
        view.resolver = resolver
        view.targets = ParkTargets(self.config.schedule_group, self.config.park_role, resolver)
        return view

    def region(self) -> str | None:
        """The Region the calls go to: the SQS client's, else the configured one."""
        place = self.place()
        return place[1] if place is not None else self.config.region

    def _plan(
        self,
        queue: str,
        message: Message,
        now: float,
        producer: Producer | None,
        ambient: str | None,
        *,
        require_id: bool = False,
    ) -> PlannedSend:
        """A send planned with this sender's limits and trace context: the ambient X-Ray
        trace, and the W3C context of the producer's span when one records."""
        return send.plan(
            queue,
            message,
            self.config.limits,
            now=now,
            ambient_trace=ambient,
            require_id=require_id,
            trace=producer.carrier if producer is not None else None,
        )

    def _url(self, planned: PlannedSend) -> Flow[str]:
        self.resolver.trio(planned.requested)  # names the queues, so that a miss has its fix
        return (yield from self.resolver.lookup(planned.queue))

    def _paused(self, now: float) -> bool:
        """No parking: off, or the breaker is open after Scheduler failed."""
        return self.config.park_after is None or self._breaker.retry_in(BREAKER_KEY, now) > 0

    def _park(self, planned: PlannedSend, now: float, index: int) -> Flow[SendResult | None]:
        """Park at send time, skipping the first hop; None: send it as usual."""
        if planned.route != "delay-queue" or self._paused(now):
            return None
        place = self.place()
        if place is None:  # no client to say where its queues are (a test's caller)
            return None
        trio = self.resolver.trio(planned.requested)
        target = yield from self.targets.lookup(trio, place)
        if target is None:
            return None
        request = send.park_request(
            planned, self.config.limits, target, now=now, after=self.config.park_after
        )
        if request is None:
            return None
        answer = yield from schedules.create(request, self.config.call_timeout)
        ident = planned.request["MessageGroupId"]
        refused = schedules.settle(answer, request, self._breaker, self._clock())
        if refused is not None:
            log.warning("delay.park_skipped", message_id=ident, reason=refused)
            return None
        url = yield from self._url(planned)
        return send_results.result_of(planned, url, None, index, parked=True)

    def _check_tagged(self, planned: Sequence[PlannedSend]) -> None:
        if self._table is None and any(p.tags for p in planned):
            raise ConfigError(
                "tags need the registry, which indexes them for cancel --tag: set "
                "SQSDELAY_REGISTRY=dynamodb (and run sqsdelay install), or send without tags"
            )

    def _register(
        self, planned: PlannedSend, now: float, index: int
    ) -> Flow[SendResult | PlannedSend]:
        """Record a delay-queue send in the registry before it is sent: what to send (the
        planned send, or it a millisecond later), or a result (nothing to send) when the id
        is scheduled already. Raises RegistryError: nothing is sent."""
        if self._table is None or planned.route != "delay-queue":
            return planned
        ident = planned.request["MessageGroupId"]
        now_ms, timeout = int(now * 1000), self.config.call_timeout
        for _ in range(DUE_TAKEN_ATTEMPTS):
            record = self._record(planned, now)
            written = yield from registry.put(self._table, record, now_ms, timeout)
            if written != "due-taken":
                break
            # The id's earlier send, ended, had this due time, which its copies still in the
            # delay queue carry: this send goes a millisecond later, told apart by it.
            planned = send.a_millisecond_later(planned, now)
        else:
            why = f"{DUE_TAKEN_ATTEMPTS} earlier sends of {ident!r} had its due time: send again"
            raise RegistryError("PutItem", self._table, "DueTaken", why)
        if written == "written":
            if planned.tags:  # indexed before the send: a bulk cancel finds what went out
                expires = record.due_ms // 1000 + registry.KEEP_AFTER_DUE_SECONDS
                yield from message_tags.write(
                    self._table, planned.destination, ident, planned.tags, expires, timeout
                )
            return planned
        url = yield from self._url(planned)
        return send_results.result_of(planned, url, None, index, duplicate=True)

    def _confirm(self, results: Sequence[SendResult]) -> Flow[None]:
        """Mark the records of what was sent: later sends with these ids are duplicates."""
        if self._table is None:
            return
        table, timeout = self._table, self.config.call_timeout
        sent = [r for r in results if r.route != "direct" and not r.duplicate]
        marks = [
            registry.mark_sent(
                table,
                r.destination,
                r.message_id,
                send.changed_route(r, self.config.park_after),
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
        producer = self.tracing.start(queue)  # None: OpenTelemetry is off
        try:
            result = yield from self._send_one(queue, message, require_id, producer)
        except BaseException as exc:
            if producer is not None:
                producer.failed(exc)
            raise
        return result

    def _send_one(
        self, queue: str, message: Message, require_id: bool, producer: Producer | None
    ) -> Flow[SendResult]:
        if message.debounce is not None or message.max_wait is not None:
            return (yield from self._debounced(queue, message, producer))
        now = self._clock()
        planned = self._plan(
            queue, message, now, producer, self.tracing.ambient(), require_id=require_id
        )
        self.tracing.placed(planned)
        self._check_tagged([planned])
        registered = yield from self._register(planned, now, 0)
        if isinstance(registered, SendResult):  # a duplicate: nothing sent
            return send_results.traced(producer, planned, registered, now)
        return (yield from self._deliver(registered, now, producer))

    def _deliver(
        self, planned: PlannedSend, now: float, producer: Producer | None
    ) -> Flow[SendResult]:
        """A planned send, registered: parked, or sent; then confirmed."""
        result = yield from self._park(planned, now, 0)
        if result is None:
            url = yield from self._url(planned)
            [reply] = yield [Call("sqs", "SendMessage", planned.request, planned.queue)]
            if reply.fault is not None:
                raise self.resolver.failure(reply.fault, "SendMessage", planned.queue)
            result = send_results.result_of(planned, url, reply.response["MessageId"])
        yield from self._confirm([result])
        return send_results.traced(producer, planned, result, now)

    def _debounced(
        self, queue: str, message: Message, producer: Producer | None
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
        cycle = self.config.limits.max_native_delay_seconds
        wait_ms = delay_milliseconds(message.debounce, deliver_at=None, now=0)
        cap_ms = (
            delay_milliseconds(message.max_wait, deliver_at=None, now=0)
            if message.max_wait is not None
            else None
        )
        key = debounce.check(message.id, wait_ms, cap_ms, cycle)
        table, timeout = self._table, self.config.call_timeout
        trio = yield from self.resolver.destination(queue)
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
                planned = self._plan(queue, one, now, producer, self.tracing.ambient())
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
        due = int(now * 1000) + planned.delay_ms
        return registry.Record(
            planned.destination,
            planned.message_id,
            due,
            "scheduled",
            send.written_route(planned.delay_seconds, self.config.park_after),
            size_bytes=planned.size_bytes,
            # the caller's names only (the console shows them; values and body stay out)
            attribute_names=tuple(sorted(set(given) - wire_format.SENDER_ATTRIBUTES)),
            tags=tuple(message_tags.as_strings(planned.tags)),
            # Copies are told apart by their send's due time only when they carry it.
            send_due_ms=due if wire_format.DUE_AT_ATTRIBUTE in given else 0,
        )

    def _send_recorded(
        self,
        planned: PlannedSend,
        record: registry.Record,
        now: float,
        producer: Producer | None,
    ) -> Flow[SendResult]:
        """The send of a message whose record is written: its tags, park or send, mark."""
        self.tracing.placed(planned)
        if planned.tags and self._table is not None:
            expires = record.due_ms // 1000 + registry.KEEP_AFTER_DUE_SECONDS
            yield from message_tags.write(
                self._table,
                planned.destination,
                planned.message_id,
                planned.tags,
                expires,
                self.config.call_timeout,
            )
        return (yield from self._deliver(planned, now, producer))

    def send_batch_flow(
        self, queue: str, messages: Sequence[Message], raise_on_failure: bool
    ) -> Flow[BatchResult]:
        if any(m.debounce is not None or m.max_wait is not None for m in messages):
            raise InvalidInput("debounce goes one message at a time: use send, not send_batch")
        now = self._clock()
        ambient = self.tracing.ambient()
        producers = [self.tracing.start(queue) for _ in messages]
        try:
            planned = [
                self._plan(queue, m, now, p, ambient)
                for m, p in zip(messages, producers, strict=True)
            ]
            result = yield from self._send_planned(planned, now, raise_on_failure)
        except BaseException as exc:
            for p in producers:
                if p is not None:
                    p.failed(exc)
            raise
        for sent in result.sent:
            send_results.traced(producers[sent.index], planned[sent.index], sent, now)
        for failed in result.failed:
            if (p := producers[failed.index]) is not None:
                p.failed(None)
        return result

    def _send_planned(
        self, planned: list[PlannedSend], now: float, raise_on_failure: bool
    ) -> Flow[BatchResult]:
        for p in planned:
            self.tracing.placed(p)
        self._check_tagged(planned)
        result = BatchResult()
        done = yield from self._register_batch(planned, now, result)
        # Parks go out `park_concurrency` at a time, and stop as soon as the breaker opens.
        step = self.config.park_concurrency
        waiting = [i for i, p in enumerate(planned) if p.route == "delay-queue" and i not in done]
        for start in range(0, len(waiting), step):
            if self._paused(self._clock()):
                break
            chunk = waiting[start : start + step]
            parked = yield from gather([self._park(planned[i], now, i) for i in chunk])
            result.sent += [r for r in parked if r is not None]
        skip = done | {r.index for r in result.sent}
        batches = send.batches(planned, self.config.limits, skip=skip)
        urls: dict[int, str] = {}
        for batch in batches:
            try:
                urls[batch[0]] = yield from self._url(planned[batch[0]])
            except SqsOperationError as exc:
                send_results.fail_batch(result, planned, batch, exc)
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
                send_results.fail_batch(result, planned, batch, err)
            else:
                send_results.collect(result, planned, batch, urls[batch[0]], dict(reply.response))
        yield from self._confirm(result.sent)
        return send_results.finish(result, len(planned), raise_on_failure)

    def _register_batch(
        self, planned: list[PlannedSend], now: float, result: BatchResult
    ) -> Flow[set[int]]:
        """Register a batch's delay-queue sends, `park_concurrency` writes at a time: the
        indexes not to send (duplicates, in `result.sent`; unrecorded, in `result.failed`).
        A send moved a millisecond later replaces its plan in `planned`."""
        done: set[int] = set()
        if self._table is None:
            return done
        todo = [i for i, p in enumerate(planned) if p.route == "delay-queue"]
        step = self.config.park_concurrency
        for start in range(0, len(todo), step):
            chunk = todo[start : start + step]
            answers = yield from gather([self._try_register(planned[i], now, i) for i in chunk])
            for i, answer in zip(chunk, answers, strict=True):
                if isinstance(answer, SendResult):
                    result.sent.append(answer)
                elif isinstance(answer, SendFailure):
                    result.failed.append(answer)
                else:
                    planned[i] = answer
                    continue
                done.add(i)
        return done

    def _try_register(
        self, planned: PlannedSend, now: float, index: int
    ) -> Flow[SendResult | SendFailure | PlannedSend]:
        try:
            return (yield from self._register(planned, now, index))
        except RegistryError as exc:
            return SendFailure(index, planned.queue, exc.code, str(exc))
