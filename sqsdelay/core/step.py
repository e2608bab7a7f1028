"""The batch step: decide, park, send, delete and hold one received batch, without I/O.

`handle` is a flow (`sqsdelay.core.flows`). It yields the calls it needs (CreateSchedule and
GetSchedule, SendMessageBatch, DeleteMessageBatch, ChangeMessageVisibilityBatch) and is sent
their answers; the ECS worker and the Lambda handler only make those calls. Every rule lives
here: the breakers are consulted before each round of calls, every call has a time limit
inside the batch's budget, and each record ends in exactly one of `END`: handed over,
requeued, parked, dead-lettered or held for a backoff. Nothing one record does, or raises,
changes what happens to another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from sqsdelay.core import batching, parking, registry, schedules, tracing, wirenames
from sqsdelay.core.backoff import BackoffTimer, retry_backoff_seconds, visibility_seconds
from sqsdelay.core.batch_decisions import Outgoing, decide_batch, outgoing
from sqsdelay.core.clock import ClockOffset
from sqsdelay.core.decision import Forward, HandOver, Limits, Park, Received, Requeue
from sqsdelay.core.delays import whole_seconds
from sqsdelay.core.failures import FailureLog, is_message_fault
from sqsdelay.core.flows import Call, Fault, Flow, gather, pause
from sqsdelay.core.metrics import CANCELLED, FALLBACKS, HELD, lateness_ms
from sqsdelay.core.outcomes import END, Held, Outcome, Stats
from sqsdelay.core.queues import QueueTrio
from sqsdelay.core.quotas import MAX_BATCH_ENTRIES, MAX_MESSAGE_BYTES
from sqsdelay.core.wire import number_attribute
from sqsdelay.errors import InvalidMessage
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.step")

# The share of a batch's budget each phase may use up to: parking first (the loop is always
# a fallback), then the sends, and the delete and hold with whatever is left.
PARK_SHARE = 0.5
SEND_SHARE = 0.85
# Hand-overs whose send instants fall this close together go out in one batch, at the last
# instant of the group: none early, none more than this late for it.
WAIT_GROUP_MS = 100
# A hand-over waits for its fraction of a second only if the send still has this long after.
MIN_SEND_SECONDS = 1.0


@dataclass(frozen=True)
class StepConfig:
    limits: Limits
    call_timeout: float
    max_bytes: int = MAX_MESSAGE_BYTES
    park_concurrency: int = 10
    # The ECS worker deletes what it moved; Lambda deletes every record it is not told failed.
    delete: bool = True
    registry_table: str | None = None  # SQSDELAY_REGISTRY=dynamodb: the table


class StepState:
    """What lasts from batch to batch in one runtime: the clock offset, the breakers (sends
    per target queue; Scheduler), the message failure counts, the statistics, and the SQS
    messages in hand (by MessageId)."""

    def __init__(self) -> None:
        self.offset = ClockOffset()
        self.sends = BackoffTimer()
        self.scheduler = BackoffTimer()
        self.registry = BackoffTimer()
        self.failures = FailureLog()
        self.stats = Stats()
        self.in_hand: set[str] = set()
        # The receipt handle of the latest copy of a message in hand: SQS deletes (or hides)
        # a message received again only by its newest handle.
        self.newest: dict[str, str] = {}

    def take(self, received: list[Received]) -> tuple[list[Received], list[Received]]:
        """Split a batch into the messages now in hand and the copies of messages already in
        hand (SQS redelivers a message whose visibility ran out while a batch still holds it,
        and an emulator may hand one message to two concurrent receives)."""
        fresh: list[Received] = []
        copies: list[Received] = []
        for r in received:
            if r.message_id in self.in_hand:
                copies.append(r)
                self.newest[r.message_id] = r.receipt_handle
            else:
                self.in_hand.add(r.message_id)
                fresh.append(r)
        return fresh, copies

    def handle_of(self, r: Received) -> str:
        return self.newest.get(r.message_id, r.receipt_handle)

    def let_go(self, received: list[Received]) -> None:
        for r in received:
            self.in_hand.discard(r.message_id)
            self.newest.pop(r.message_id, None)


def batch_calls(queue: str, api: str, entries: list[dict[str, Any]], timeout: float) -> Flow[int]:
    """One round of batch calls (DeleteMessageBatch, ChangeMessageVisibilityBatch) on a
    queue, MAX_BATCH_ENTRIES entries each; how many entries failed."""
    step = MAX_BATCH_ENTRIES
    chunks = [entries[i : i + step] for i in range(0, len(entries), step)]
    calls = [
        Call(
            "sqs", api, {"Entries": [{"Id": str(i), **e} for i, e in enumerate(c)]}, queue, timeout
        )
        for c in chunks
    ]
    replies = yield calls
    failed = 0
    for chunk, reply in zip(chunks, replies, strict=True):
        if reply.fault is not None:
            failed += len(chunk)
        else:
            failed += len(reply.response.get("Failed", []))
    return failed


def extend(
    queue: str,
    received: list[Received],
    outcome: Outcome,
    seconds: int,
    state: StepState,
    timeout: float,
) -> Flow[tuple[int, int]]:
    """Keep a batch in hand out of sight for `seconds` more: every message of it but the
    held ones (their backoff is their own visibility) and the copies released to another
    batch, by their newest receipt handles. Returns how many it asked to extend (0: nothing
    left to keep) and how many of those failed."""
    out = {h.source.receipt_handle for h in outcome.held}
    out.update(r.receipt_handle for r in outcome.released)
    entries = [
        {"ReceiptHandle": state.handle_of(r), "VisibilityTimeout": seconds}
        for r in received
        if r.receipt_handle not in out
    ]
    if not entries:
        return 0, 0
    failed = yield from batch_calls(queue, "ChangeMessageVisibilityBatch", entries, timeout)
    return len(entries), failed


@dataclass(frozen=True)
class _Batch:
    queue: str
    outs: list[Outgoing]

    def entries(self) -> list[dict[str, Any]]:
        return [{"Id": str(i), **o.entry} for i, o in enumerate(self.outs)]


def _wait_ms(out: Outgoing) -> int:
    """What a hand-over or a forward waits before it is sent."""
    d = out.decision
    return d.wait_ms if isinstance(d, HandOver | Forward) else 0


def _waits(out: Outgoing) -> bool:
    return _wait_ms(out) > 0


def _registry_id(received: Received) -> str | None:
    """The key of a message's record: the id `send` printed (NServiceBus.MessageId)."""
    value = received.attributes.get(wirenames.MESSAGE_ID_ATTRIBUTE)
    text = value.get("StringValue") if value else None
    try:
        return registry.check_message_id(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _ids(received: Received) -> dict[str, str]:
    """How events name a message: `message_id`, its own id (the one `send` printed and
    `cancel` takes; a foreign message's group id), and this hop's `sqs_message_id`."""
    own = _registry_id(received) or received.system.get("MessageGroupId") or received.message_id
    return {"message_id": own, "sqs_message_id": received.message_id}


def _due_from(received: Received, record: registry.Record) -> Received:
    """The message with the due time its record was rescheduled to."""
    due = {wirenames.DUE_AT_ATTRIBUTE: number_attribute(record.due_ms)}
    return replace(received, attributes={**received.attributes, **due})


def _groups(waiting: list[Outgoing]) -> list[list[Outgoing]]:
    """Hand-overs (by wait) in groups whose waits lie within WAIT_GROUP_MS of the first."""
    groups: list[list[Outgoing]] = []
    for out in waiting:
        if groups and _wait_ms(out) - _wait_ms(groups[-1][0]) <= WAIT_GROUP_MS:
            groups[-1].append(out)
        else:
            groups.append([out])
    return groups


class _Budget:
    def __init__(self, clock: Callable[[], float], deadline: float, call_timeout: float) -> None:
        self.clock = clock
        self.start = clock()
        self.deadline = deadline
        self.call_timeout = call_timeout

    def end(self, share: float = 1.0) -> float:
        """When a phase that may use `share` of the budget must be done."""
        return self.start + share * (self.deadline - self.start)

    def timeout(self, share: float = 1.0) -> float:
        """The time limit of a call made now in a phase that may use `share` of the budget;
        at most 0 when that phase has no time left."""
        return min(self.call_timeout, self.end(share) - self.clock())


def handle(
    received: list[Received],
    *,
    queues: QueueTrio,
    park_target: parking.ParkTarget | None,
    config: StepConfig,
    state: StepState,
    clock: Callable[[], float],
    local_ms: int,
    deadline: float,
    outcome: Outcome | None = None,
) -> Flow[Outcome]:
    """The flow of one received batch; `local_ms` is when it arrived (local clock), and no
    call starts after `deadline` (a `clock()` time). A driver that passes `outcome` can see
    where records ended even if the flow fails half-way."""
    step = _Step(
        queues, park_target, config, state, clock, local_ms, deadline, outcome or Outcome()
    )
    fresh, copies = state.take(received)
    for r in copies:
        step.release(r)
    try:
        yield from step.run(fresh)
    finally:  # also when the driver gives up on the flow (it is closed)
        state.let_go(fresh)
    return step.outcome


class _Step:
    def __init__(
        self,
        queues: QueueTrio,
        park_target: parking.ParkTarget | None,
        config: StepConfig,
        state: StepState,
        clock: Callable[[], float],
        local_ms: int,
        deadline: float,
        outcome: Outcome,
    ) -> None:
        self.queues = queues
        self.target = park_target
        self.config = config
        self.state = state
        self.clock = clock
        self.budget = _Budget(clock, deadline, config.call_timeout)
        self.outcome = outcome
        self.done: list[Outgoing] = []  # sent or parked: the originals may be deleted
        self.dropped: list[Received] = []  # cancelled or a second copy: deleted, never sent
        self.records: dict[str, registry.Record] = {}  # by SQS MessageId
        self.claimed: list[Outgoing] = []  # hand-overs whose registry claim this batch won
        self.local_ms = local_ms  # when the batch arrived: `clock()` need not be epoch time
        self.offset_ms = 0  # the clock offset estimate the decisions used (set by `handle`)

    def run(self, received: list[Received]) -> Flow[None]:
        # A forward's registry record was marked delivered by the hand-over into staging.
        table = None if self.queues.forwards else self.config.registry_table
        if table:
            received = yield from self.follow_registry(received, table)
        outs, stuck = decide_batch(
            received,
            local_ms=self.local_ms,
            offset=self.state.offset,
            lim=self.config.limits,
            source_queue=self.queues.delay,
            failures=self.state.failures,
            forwarding=self.queues.forwards,
            staging=self.queues.stages,
        )
        self.offset_ms = self.state.offset.estimate() or 0  # a median: computed once per batch
        for r in stuck:
            log.error("delay.unhandled", **_ids(r), queue=self.queues.delay)
            self.hold(r, retry_backoff_seconds(r.receive_count), "cannot be handled")
        rest = yield from self.park(outs)
        if table:
            rest = yield from self.claim(rest, table)
        yield from self.send(rest)
        # The delivered marks and the deletes do not wait for each other: one round, so that
        # a batch short of time is not left with a hand-over neither marked nor deleted (the
        # case that delivers twice, docs/registry.md).
        after_send = [self.mark_delivered(table)] if table else []
        if self.config.delete:
            after_send.append(self.delete())
        yield from gather(after_send)
        yield from self.hide()

    def release(self, copy: Received) -> None:
        self.outcome.released.append(copy)
        self.state.stats.events["delay.copy_in_hand"] += 1
        log.warning("delay.copy_in_hand", **_ids(copy), queue=self.queues.delay)

    def broker_ms(self) -> int:
        """Now on the broker's clock: the local time since the batch arrived, corrected by
        the estimated offset (none yet: the local clock)."""
        elapsed = int((self.clock() - self.budget.start) * 1000)
        return self.local_ms + elapsed + self.offset_ms

    # -- ends ------------------------------------------------------------------------------

    def hold(self, source: Received, wait_seconds: int, reason: str) -> None:
        self.outcome.ends[source.message_id] = "held"
        self.state.stats.tally.count(self.queues.destination, HELD)
        self.outcome.held.append(Held(source, wait_seconds, reason))

    def moved(self, out: Outgoing, **fields: Any) -> None:
        d = out.decision
        self.done.append(out)
        self.outcome.ends[out.source.message_id] = END[d.event]
        self.state.stats.events[d.event] += 1
        self._tally(out)
        self.state.failures.forget(out.source.message_id)
        getattr(log, d.level)(
            d.event,
            **_ids(out.source),
            destination=self.queues.destination,
            receive_count=out.source.receive_count,
            size_bytes=out.size,
            **fields,
            **d.log_fields(),
        )

    def _tally(self, out: Outgoing) -> None:
        """Called as soon as the move succeeded: a hand-over's send time is now (its reply
        arrived, so this errs late by at most the round trip)."""
        d, tally, destination = out.decision, self.state.stats.tally, self.queues.destination
        tally.moved(destination, d.event)
        if isinstance(d, HandOver):
            late = lateness_ms(
                sent_ms=self.broker_ms(), delay_seconds=d.remaining_seconds, due_ms=d.due_ms
            )
            tally.handed_over(destination, late)
        elif isinstance(d, Requeue):  # a parked message is not in the loop: not counted
            tally.due(destination, d.due_ms - self.broker_ms())

    # -- the registry ----------------------------------------------------------------------

    def follow_registry(self, received: list[Received], table: str) -> Flow[list[Received]]:
        """Read the records of the batch: drop what was cancelled (or was handed over by
        another copy), give a rescheduled message its new due time, hold what the registry
        could not answer for (backing off; never the error queue). Messages without a record
        (NServiceBus's, or sent without the registry) go on as they came."""
        ids = {r.message_id: i for r in received if (i := _registry_id(r)) is not None}
        if not ids:
            return received
        timeout = self._registry_timeout(PARK_SHARE)
        if timeout is None:
            lookup = registry.Lookup({}, frozenset(ids.values()))
        else:
            lookup = yield from registry.read(
                table, self.queues.destination, list(ids.values()), timeout
            )
            self._registry_answered(lookup.fault)
        kept: list[Received] = []
        for r in received:
            ident = ids.get(r.message_id)
            record = lookup.records.get(ident) if ident else None
            if ident in lookup.failed:
                self._registry_hold(r)
            elif record is None:
                kept.append(r)
            elif record.state == "cancelled":
                self.drop(r, "cancelled")
            elif record.state == "handed-over" and not record.held_by_another_receive(r.message_id):
                self.drop(r, "duplicate")  # another copy was handed over, or this one was
            else:
                self.records[r.message_id] = record
                kept.append(_due_from(r, record) if record.moved else r)
        return kept

    def claim(self, outs: list[Outgoing], table: str) -> Flow[list[Outgoing]]:
        """Claim the record of each hand-over (one conditional write each, all at once)
        before anything is sent: the claim decides a race with a cancel or a reschedule.
        Returns what may be sent."""
        blocked: set[str] = set()  # held or dropped here: not sent
        claims: list[tuple[Outgoing, registry.Record]] = []
        keys: set[str] = set()
        for o in outs:
            rec = self.records.get(o.source.message_id)
            if not isinstance(o.decision, HandOver) or rec is None:
                continue
            if rec.message_id in keys:  # two SQS messages of one id (a sender's retry)
                blocked.add(o.source.message_id)  # its next hop finds the other's claim
                self.hold(o.source, 1, "another copy of this message is being handed over")
            else:
                keys.add(rec.message_id)
                claims.append((o, rec))
        results = (yield from self._claim_round(claims, table)) if claims else []
        for (out, _), (result, now_record) in zip(claims, results, strict=True):
            if result == "claimed":
                self.claimed.append(out)
                continue
            blocked.add(out.source.message_id)
            if result == "failed":
                self._registry_hold(out.source)
            elif result == "moved":  # rescheduled meanwhile: the next receive reads it again
                self.hold(out.source, 1, "rescheduled while being handed over")
            elif result == "in-hand":  # released until the other receive's lease runs out
                left_ms = (now_record.lease_ms if now_record else 0) - self.broker_ms()
                wait = visibility_seconds(max(1, whole_seconds(left_ms)))
                self.hold(out.source, wait, "another receive of this message holds its claim")
            else:
                self.drop(out.source, result)
        return [o for o in outs if o.source.message_id not in blocked]

    def _claim_round(
        self, claims: list[tuple[Outgoing, registry.Record]], table: str
    ) -> Flow[list[tuple[registry.Claim, registry.Record | None]]]:
        """The claims' conditional writes, at once; each answer read (`failed` for all while
        the registry's breaker is open or the send phase has no time left)."""
        timeout = self._registry_timeout(SEND_SHARE)  # a claim is the start of its send
        if timeout is None:
            return [("failed", None)] * len(claims)
        now = self.broker_ms()
        lease = self.lease_ms()
        calls = [
            registry.claim_call(
                table,
                rec,
                o.source.message_id,
                registry.attempt_of(o.source.receipt_handle),
                now,
                lease,
                timeout,
            )
            for o, rec in claims
        ]
        answers = yield calls
        results = [
            registry.claimed(a.fault, o.source.message_id)
            for a, (o, _) in zip(answers, claims, strict=True)
        ]
        faults = [a.fault for a, r in zip(answers, results, strict=True) if r[0] == "failed"]
        self._registry_answered(faults[0] if faults else None)
        return results

    def lease_ms(self) -> int:
        """Until when (broker time) a claim made now may still lead to a send: the batch's
        deadline, plus a call time limit for the workers' different clock offset estimates."""
        left = max(0.0, self.budget.deadline - self.clock()) + self.config.call_timeout
        return self.broker_ms() + int(left * 1000)

    def mark_delivered(self, table: str) -> Flow[None]:
        """Mark the claims whose hand-over was sent: no later receive may take them over. A
        mark that fails leaves the claim to its lease (docs/registry.md)."""
        sent = [
            o for o in self.claimed if self.outcome.ends.get(o.source.message_id) == "handed-over"
        ]
        timeout = self.budget.timeout()
        if not sent or timeout <= 0:
            return
        calls = [
            registry.delivered_call(
                table,
                self.records[o.source.message_id],
                o.source.message_id,
                registry.attempt_of(o.source.receipt_handle),
                timeout,
            )
            for o in sent
        ]
        answers = yield calls
        failed = sum(1 for a in answers if a.fault is not None)
        if failed:
            self.state.stats.events["registry.delivered_mark_failed"] += failed
            log.warning("registry.delivered_mark_failed", queue=self.queues.delay, count=failed)

    def _registry_timeout(self, share: float) -> float | None:
        """The time limit for a round of registry calls; None while its breaker is open or
        the phase has no time left (the round then counts as failed)."""
        timeout = self.budget.timeout(share)
        if timeout <= 0 or self.state.registry.retry_in(registry.BREAKER_KEY, self.clock()) > 0:
            return None
        return timeout

    def _registry_answered(self, fault: Fault | None) -> None:
        if fault is None:
            self.state.registry.success(registry.BREAKER_KEY)
            return
        wait = self.state.registry.failure(registry.BREAKER_KEY, self.clock())
        log.error(
            "registry.unavailable",
            code=fault.code,
            detail=fault.detail[:300],
            retry_in_seconds=wait,
        )

    def _registry_hold(self, source: Received) -> None:
        wait = self.state.registry.retry_in(registry.BREAKER_KEY, self.clock())
        self.hold(source, visibility_seconds(max(wait, 1)), "registry unavailable")

    def drop(self, source: Received, why: Literal["cancelled", "duplicate"]) -> None:
        """Delete without sending: cancelled, or a copy of a message another copy handed over."""
        self.dropped.append(source)
        self.outcome.ends[source.message_id] = "cancelled" if why == "cancelled" else "dropped"
        event = "delay.cancelled" if why == "cancelled" else "delay.duplicate_dropped"
        self.state.stats.events[event] += 1
        self.state.stats.tally.count(self.queues.destination, CANCELLED)
        self.state.failures.forget(source.message_id)
        log.info(
            event,
            **_ids(source),
            destination=self.queues.destination,
        )

    # -- parking ---------------------------------------------------------------------------

    def park(self, outs: list[Outgoing]) -> Flow[list[Outgoing]]:
        """CreateSchedule for every Park decision, `park_concurrency` at a time while the
        breaker is closed and the budget lasts; every park that does not happen becomes the
        requeue the loop would have made. Returns what is left to send."""
        rest: list[Outgoing] = []
        todo: list[tuple[Outgoing, dict[str, Any]]] = []
        for out in outs:
            request = self._park_request(out) if isinstance(out.decision, Park) else None
            if isinstance(request, dict):
                todo.append((out, request))
            else:
                rest.append(self._loop(out, request) if request else out)
        while todo:
            timeout = self.budget.timeout(PARK_SHARE)
            if self.state.scheduler.retry_in(parking.BREAKER_KEY, self.clock()) > 0:
                rest += [self._loop(o, "scheduler backing off") for o, _ in todo]
                break
            if timeout <= 0:
                rest += [self._loop(o, "no time left in the batch to park") for o, _ in todo]
                break
            now, todo = todo[: self.config.park_concurrency], todo[self.config.park_concurrency :]
            answers = yield from gather([schedules.create(r, timeout) for _, r in now])
            for (out, request), answer in zip(now, answers, strict=True):
                refused = schedules.settle(answer, request, self.state.scheduler, self.clock())
                if refused is None:
                    fires = request["ScheduleExpression"]
                    self.moved(out, schedule=request["Name"], fires=fires)
                else:
                    rest.append(self._loop(out, refused))
        return rest

    def _park_request(self, out: Outgoing) -> dict[str, Any] | str:
        """The CreateSchedule request, or why the message stays in the loop."""
        d = out.decision
        assert isinstance(d, Park)
        if self.target is None:
            return "no park target"
        try:
            return parking.create_schedule_request(
                name=parking.schedule_name(self.queues.delay, d.message_id),
                fire_ms=d.fire_ms,
                target=self.target,
                body=out.source.body,
                attributes=d.attributes,
                group_id=d.fallback.group_id,
                dedup=parking.dedup_id(d.message_id, d.due_ms),
                trace_header=tracing.carried(out.source.system),
            )
        except InvalidMessage as exc:
            return str(exc)

    def _loop(self, out: Outgoing, reason: str) -> Outgoing:
        """Keep it in the loop: the requeue the decision would have made without parking."""
        assert isinstance(out.decision, Park)
        self.state.stats.events["delay.park_skipped"] += 1
        self.state.stats.tally.count(self.queues.destination, FALLBACKS)
        log.warning("delay.park_skipped", **_ids(out.source), reason=reason[:200])
        return outgoing(out.source, out.decision.fallback)

    # -- sending ---------------------------------------------------------------------------

    def send(self, outs: list[Outgoing]) -> Flow[None]:
        """Send everything that need not wait; then the hand-overs that wait out the fraction
        of a second DelaySeconds cannot say, in groups of close send instants, each group
        after a pause measured from the batch's arrival (where the decisions' broker time
        stands). A wait that would leave the send too little of the budget is not made: that
        hand-over goes at once with the fraction rounded up, as late as before, never early;
        such a forward (a FIFO queue takes no DelaySeconds) is held for a second instead."""
        last_wait_ms = (self.budget.end(SEND_SHARE) - MIN_SEND_SECONDS - self.budget.start) * 1000
        now = [o for o in outs if not _waits(o)]
        for o in outs:
            if _waits(o) and _wait_ms(o) > last_wait_ms:
                if isinstance(o.decision, HandOver):
                    now.append(outgoing(o.source, o.decision.at_once()))
                else:  # a forward has no DelaySeconds to round up into: back in a second
                    self.hold(o.source, 1, "no time left to wait")
        yield from self._send(now)
        waiting = sorted(
            (o for o in outs if _waits(o) and _wait_ms(o) <= last_wait_ms), key=_wait_ms
        )
        for group in _groups(waiting):
            seconds = self.budget.start + _wait_ms(group[-1]) / 1000 - self.clock()
            if seconds > 0:
                yield [pause(seconds)]
            yield from self._send(group)

    def _send(self, outs: list[Outgoing]) -> Flow[None]:
        """SendMessageBatch, grouped by target queue within the entry and size limits, the
        batches of a round at once. A batch refused whole for its content is retried entry by
        entry to find the culprit; a target that fails backs off and its messages are held."""
        batches = [
            _Batch(self.queues.of(outs[b[0]].target), [outs[i] for i in b])
            for b in batching.chunk(
                outs, key=lambda o: o.target, size=lambda o: o.size, max_bytes=self.config.max_bytes
            )
        ]
        while batches:
            timeout = self.budget.timeout(SEND_SHARE)
            ready: list[_Batch] = []
            for batch in batches:
                wait = self.state.sends.retry_in(batch.queue, self.clock())
                if timeout <= 0:
                    self._hold_all(batch, retry_backoff_seconds(1), "no time left in the batch")
                elif wait > 0:  # the target is backing off: do not even try
                    self._hold_all(batch, visibility_seconds(wait), "target backing off")
                else:
                    ready.append(batch)
            calls = [
                Call("sqs", "SendMessageBatch", {"Entries": b.entries()}, b.queue, timeout)
                for b in ready
            ]
            replies = yield calls
            batches = []
            for batch, reply in zip(ready, replies, strict=True):
                if reply.fault is None:
                    self._settled(batch, reply.response)
                else:
                    batches += self._failed(batch, reply.fault)

    def _hold_all(self, batch: _Batch, seconds: int, reason: str) -> None:
        for out in batch.outs:
            self.hold(out.source, seconds, reason)

    def _settled(self, batch: _Batch, response: Mapping[str, Any]) -> None:
        self.state.sends.success(batch.queue)
        ok, failed = batching.read_batch_response(
            dict(response), (str(i) for i in range(len(batch.outs)))
        )
        for i, out in enumerate(batch.outs):
            if str(i) in ok:
                self.moved(out)
            else:
                f = failed[str(i)]
                self._entry_failed(batch.queue, out, f.code, f.message)

    def _failed(self, batch: _Batch, fault: Fault) -> list[_Batch]:
        """A whole call failed: the batches to try next (one per entry when SQS blamed the
        content); otherwise the target backs off and the messages are held."""
        if is_message_fault(fault.code):
            if len(batch.outs) > 1:
                return [_Batch(batch.queue, [o]) for o in batch.outs]
            self._entry_failed(batch.queue, batch.outs[0], fault.code, fault.detail)
            return []
        wait = self.state.sends.failure(batch.queue, self.clock())
        log.error(
            "destination.unavailable",
            queue=batch.queue,
            code=fault.code,
            detail=fault.detail[:300],
            retry_in_seconds=wait,
        )
        for out in batch.outs:
            error = f"{fault.code}: {fault.detail[:200]}"
            self.state.failures.record(out.source.message_id, error, message_fault=False)
            self.hold(out.source, visibility_seconds(wait), fault.code)
        return []

    def _entry_failed(self, queue: str, out: Outgoing, code: str, detail: str) -> None:
        fault = is_message_fault(code)
        record = self.state.failures.record(
            out.source.message_id, f"{code}: {detail[:200]}", message_fault=fault
        )
        log.warning(
            "delay.send_failed",
            **_ids(out.source),
            queue=queue,
            code=code,
            detail=detail[:300],
            message_fault=fault,
        )
        attempt = record.own_failures if fault else out.source.receive_count
        self.hold(out.source, retry_backoff_seconds(attempt), code)

    # -- delete and hold -------------------------------------------------------------------

    def delete(self) -> Flow[None]:
        """Delete the originals of what was sent or parked. A failed delete brings the message
        back after the visibility timeout: a requeue is then dropped by FIFO deduplication, a
        hand-over may be delivered twice."""
        done = [o.source for o in self.done] + self.dropped
        entries = [{"ReceiptHandle": self.state.handle_of(r)} for r in done]
        failed = yield from self._delay_queue_calls("DeleteMessageBatch", entries)
        self.outcome.delete_failed = failed
        self.state.stats.events["delete_failed"] += failed
        if failed:
            log.warning("delay.delete_failed", queue=self.queues.delay, count=failed)

    def hide(self) -> Flow[None]:
        """Keep held messages out of sight for their backoff (the worker and Lambda alike:
        otherwise they come back after the queue's visibility timeout, whatever the cause)."""
        entries = [
            {"ReceiptHandle": self.state.handle_of(h.source), "VisibilityTimeout": h.wait_seconds}
            for h in self.outcome.held
        ]
        failed = yield from self._delay_queue_calls("ChangeMessageVisibilityBatch", entries)
        self.outcome.unhidden = failed
        if failed:
            log.warning("delay.backoff_failed", queue=self.queues.delay, count=failed)

    def _delay_queue_calls(self, api: str, entries: list[dict[str, Any]]) -> Flow[int]:
        """One round of batch calls on the delay queue, within the budget; how many entries
        failed."""
        if not entries:
            return 0
        timeout = self.budget.timeout()
        if timeout <= 0:
            log.warning("batch.out_of_time", queue=self.queues.delay, api=api)
            return len(entries)
        return (yield from batch_calls(self.queues.delay, api, entries, timeout))
