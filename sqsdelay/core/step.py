"""The batch step: decide, park, send, delete and hold one received batch, without I/O.

`handle` is a flow (`sqsdelay.core.flows`). It yields the calls it needs (CreateSchedule and
GetSchedule, SendMessageBatch, DeleteMessageBatch, ChangeMessageVisibilityBatch) and is sent
their answers; the ECS worker and the Lambda handler only make those calls. Every rule lives
here: the breakers are consulted before each round of calls, every call has a time limit
inside the batch's budget, and each record ends in exactly one of `END`: handed over,
requeued, parked, dead-lettered or held for a backoff. Nothing one record does, or raises,
changes what happens to another.

The phases are flow functions of the batch in hand (`batch_in_hand.BatchInHand`, where each
record's end is written down); the registry's are `registry_phases.py`, and the config,
the state kept between batches and the budget are `step_state.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqsdelay import logs
from sqsdelay.core import batch_entries, identity, parking, schedules, tracing
from sqsdelay.core.backoff import retry_backoff_seconds, visibility_seconds
from sqsdelay.core.batch_in_hand import BatchInHand, event_ids
from sqsdelay.core.decision import Forward, HandOver, Park
from sqsdelay.core.failures import is_message_fault
from sqsdelay.core.flows import Call, Fault, Flow, gather, pause
from sqsdelay.core.metrics import FALLBACKS
from sqsdelay.core.outcomes import BatchEnds
from sqsdelay.core.pause import hold_paused
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.core.quotas import MAX_BATCH_ENTRIES
from sqsdelay.core.received import Received
from sqsdelay.core.record_decisions import Outgoing, decide_batch, outgoing
from sqsdelay.core.registry_phases import claim, follow_registry, mark_delivered
from sqsdelay.core.step_state import PARK_SHARE, SEND_SHARE, StepConfig, StepState
from sqsdelay.errors import InvalidMessage
from sqsdelay.logs import get_logger

__all__ = [
    "PARK_SHARE",
    "SEND_SHARE",
    "StepConfig",
    "StepState",
    "batch_calls",
    "extend",
    "handle",
]

log = get_logger("sqsdelay.step")

# Hand-overs whose send instants fall this close together go out in one batch, at the last
# instant of the group: none early, none more than this late for it.
WAIT_GROUP_MS = 100
# A hand-over waits for its fraction of a second only if the send still has this long after.
MIN_SEND_SECONDS = 1.0


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
    outcome: BatchEnds,
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
class _SendBatch:
    """One SendMessageBatch call's worth: a target queue and the outgoing entries for it."""

    queue: str
    outs: list[Outgoing]

    def entries(self) -> list[dict[str, Any]]:
        return [{"Id": str(i), **o.entry} for i, o in enumerate(self.outs)]


def _wait_ms(out: Outgoing) -> int:
    """What a hand-over or a forward waits before it is sent."""
    d = out.decision
    return d.wait_ms if isinstance(d, HandOver | Forward) else 0


def _groups(waiting: list[tuple[int, Outgoing]]) -> list[tuple[int, list[Outgoing]]]:
    """Hand-overs (wait, out; by wait) in groups whose waits lie within WAIT_GROUP_MS of the
    first, each with its last wait."""
    groups: list[tuple[int, list[Outgoing]]] = []
    first = 0
    for wait, out in waiting:
        if groups and wait - first <= WAIT_GROUP_MS:
            groups[-1] = (wait, groups[-1][1])
            groups[-1][1].append(out)
        else:
            first = wait
            groups.append((wait, [out]))
    return groups


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
    outcome: BatchEnds | None = None,
) -> Flow[BatchEnds]:
    """The flow of one received batch; `local_ms` is when it arrived (local clock), and no
    call starts after `deadline` (a `clock()` time). A driver that passes `outcome` can see
    where records ended even if the flow fails half-way."""
    batch = BatchInHand(
        queues, park_target, config, state, clock, local_ms, deadline, outcome or BatchEnds()
    )
    fresh, copies = state.take(received)
    for r in copies:
        batch.release(r)
    try:
        yield from _run(batch, fresh)
    finally:  # also when the driver gives up on the flow (it is closed)
        state.let_go(fresh)
    return batch.outcome


def _run(batch: BatchInHand, received: list[Received]) -> Flow[None]:
    """The phases, in order: the registry's records, the decisions, parking, holding the
    hand-overs of a paused destination (core/pause.py), the registry's claims, sending,
    then the delivered marks and deletes, then hiding what is held."""
    # A forward's registry record was marked delivered by the hand-over into staging.
    table = None if batch.queues.forwards else batch.config.registry_table
    if table:
        received = yield from follow_registry(batch, received, table)
    outs, stuck = decide_batch(
        received,
        local_ms=batch.local_ms,
        offset=batch.state.offset,
        lim=batch.config.limits,
        source_queue=batch.queues.delay,
        failures=batch.state.failures,
        forwarding=batch.queues.forwards,
        staging=batch.queues.stages,
        claiming=batch.records.keys(),
    )
    batch.offset_ms = batch.state.offset.estimate() or 0  # a median: computed once per batch
    for r in stuck:
        log.error("delay.unhandled", **event_ids(r), queue=batch.queues.delay)
        batch.hold(r, retry_backoff_seconds(r.receive_count), "cannot be handled")
    rest = hold_paused(batch, (yield from park(batch, outs)))
    if table:
        rest = yield from claim(batch, rest, table)
    yield from send(batch, rest)
    # The delivered marks and the deletes do not wait for each other: one round, so that
    # a batch short of time is not left with a hand-over neither marked nor deleted (the
    # case that delivers twice, docs/registry.md).
    after_send = [mark_delivered(batch, table)] if table else []
    if batch.config.delete:
        after_send.append(delete(batch))
    yield from gather(after_send)
    yield from hide(batch)


def park(batch: BatchInHand, outs: list[Outgoing]) -> Flow[list[Outgoing]]:
    """CreateSchedule for every Park decision, `park_concurrency` at a time while the
    breaker is closed and the budget lasts; every park that does not happen becomes the
    requeue the loop would have made. Returns what is left to send."""
    rest: list[Outgoing] = []
    todo: list[tuple[Outgoing, dict[str, Any]]] = []
    for out in outs:
        request = _park_request(batch, out) if isinstance(out.decision, Park) else None
        if isinstance(request, dict):
            todo.append((out, request))
        else:
            rest.append(_loop(batch, out, request) if request else out)
    while todo:
        timeout = batch.budget.timeout(PARK_SHARE)
        if batch.state.scheduler.retry_in(parking.BREAKER_KEY, batch.clock()) > 0:
            rest += [_loop(batch, o, "scheduler backing off") for o, _ in todo]
            break
        if timeout <= 0:
            rest += [_loop(batch, o, "no time left in the batch to park") for o, _ in todo]
            break
        now, todo = todo[: batch.config.park_concurrency], todo[batch.config.park_concurrency :]
        answers = yield from gather([schedules.create(r, timeout) for _, r in now])
        for (out, request), answer in zip(now, answers, strict=True):
            refused = schedules.settle(answer, request, batch.state.scheduler, batch.clock())
            if refused is None:
                fires = request["ScheduleExpression"]
                batch.moved(out, schedule=request["Name"], fires=fires)
            else:
                rest.append(_loop(batch, out, refused))
    return rest


def _park_request(batch: BatchInHand, out: Outgoing) -> dict[str, Any] | str:
    """The CreateSchedule request, or why the message stays in the loop."""
    d = out.decision
    assert isinstance(d, Park)
    if batch.target is None:
        return "no park target"
    try:
        return parking.create_schedule_request(
            name=identity.schedule_name(batch.queues.delay, d.message_id),
            fire_ms=d.fire_ms,
            target=batch.target,
            body=out.source.body,
            attributes=d.attributes,
            group_id=d.fallback.group_id,
            dedup=identity.park_dedup_id(d.message_id, d.due_ms),
            trace_header=tracing.carried(out.source.system),
        )
    except InvalidMessage as exc:
        return str(exc)


def _loop(batch: BatchInHand, out: Outgoing, reason: str) -> Outgoing:
    """Keep it in the loop: the requeue the decision would have made without parking."""
    assert isinstance(out.decision, Park)
    batch.state.stats.events["delay.park_skipped"] += 1
    batch.state.stats.tally.count(batch.queues.destination, FALLBACKS)
    log.warning("delay.park_skipped", **event_ids(out.source), reason=reason[:200])
    return outgoing(out.source, out.decision.fallback)


def send(batch: BatchInHand, outs: list[Outgoing]) -> Flow[None]:
    """Send everything that need not wait; then the hand-overs that wait out the fraction
    of a second DelaySeconds cannot say, in groups of close send instants, each group
    after a pause measured from the batch's arrival (where the decisions' broker time
    stands). A wait that would leave the send too little of the budget is not made: that
    hand-over goes at once with the fraction rounded up, as late as before, never early;
    such a forward (a FIFO queue takes no DelaySeconds) is held for a second instead."""
    last_wait_ms = (batch.budget.end(SEND_SHARE) - MIN_SEND_SECONDS - batch.budget.start) * 1000
    now: list[Outgoing] = []
    rounded_up: list[Outgoing] = []
    waiting: list[tuple[int, Outgoing]] = []
    for o in outs:
        wait = _wait_ms(o)
        if not wait:
            now.append(o)
        elif wait <= last_wait_ms:
            waiting.append((wait, o))
        elif isinstance(o.decision, HandOver):
            rounded_up.append(outgoing(o.source, o.decision.at_once()))
        else:  # a forward has no DelaySeconds to round up into: back in a second
            batch.hold(o.source, 1, "no time left to wait")
    yield from _send(batch, now + rounded_up)
    waiting.sort(key=lambda w: w[0])
    for last, group in _groups(waiting):
        seconds = batch.budget.start + last / 1000 - batch.clock()
        if seconds > 0:
            yield [pause(seconds)]
        yield from _send(batch, group)


def _send(batch: BatchInHand, outs: list[Outgoing]) -> Flow[None]:
    """SendMessageBatch, grouped by target queue within the entry and size limits, the
    batches of a round at once. A batch refused whole for its content is retried entry by
    entry to find the culprit; a target that fails backs off and its messages are held."""
    batches = [
        _SendBatch(batch.queues.of(outs[b[0]].target), [outs[i] for i in b])
        for b in batch_entries.chunk(
            outs, key=lambda o: o.target, size=lambda o: o.size, max_bytes=batch.config.max_bytes
        )
    ]
    while batches:
        timeout = batch.budget.timeout(SEND_SHARE)
        ready: list[_SendBatch] = []
        for sends in batches:
            wait = batch.state.sends.retry_in(sends.queue, batch.clock())
            if timeout <= 0:
                _hold_all(batch, sends, retry_backoff_seconds(1), "no time left in the batch")
            elif wait > 0:  # the target is backing off: do not even try
                _hold_all(batch, sends, visibility_seconds(wait), "target backing off")
            else:
                ready.append(sends)
        calls = [
            Call("sqs", "SendMessageBatch", {"Entries": b.entries()}, b.queue, timeout)
            for b in ready
        ]
        replies = yield calls
        batches = []
        for sends, reply in zip(ready, replies, strict=True):
            if reply.fault is None:
                _settled(batch, sends, reply.response)
            else:
                batches += _failed(batch, sends, reply.fault)


def _hold_all(batch: BatchInHand, sends: _SendBatch, seconds: int, reason: str) -> None:
    for out in sends.outs:
        batch.hold(out.source, seconds, reason)


def _settled(batch: BatchInHand, sends: _SendBatch, response: Mapping[str, Any]) -> None:
    batch.state.sends.success(sends.queue)
    ok, failed = batch_entries.read_batch_response(
        dict(response), (str(i) for i in range(len(sends.outs)))
    )
    with logs.together():  # an event per message, written at once
        for i, out in enumerate(sends.outs):
            if str(i) in ok:
                batch.moved(out)
            else:
                f = failed[str(i)]
                _entry_failed(batch, sends.queue, out, f.code, f.message)


def _failed(batch: BatchInHand, sends: _SendBatch, fault: Fault) -> list[_SendBatch]:
    """A whole call failed: the batches to try next (one per entry when SQS blamed the
    content); otherwise the target backs off and the messages are held."""
    if is_message_fault(fault.code):
        if len(sends.outs) > 1:
            return [_SendBatch(sends.queue, [o]) for o in sends.outs]
        _entry_failed(batch, sends.queue, sends.outs[0], fault.code, fault.detail)
        return []
    wait = batch.state.sends.failure(sends.queue, batch.clock())
    log.error(
        "destination.unavailable",
        queue=sends.queue,
        code=fault.code,
        detail=fault.detail[:300],
        retry_in_seconds=wait,
    )
    for out in sends.outs:
        error = f"{fault.code}: {fault.detail[:200]}"
        batch.state.failures.record(out.source.message_id, error, message_fault=False)
        batch.hold(out.source, visibility_seconds(wait), fault.code)
    return []


def _entry_failed(batch: BatchInHand, queue: str, out: Outgoing, code: str, detail: str) -> None:
    fault = is_message_fault(code)
    record = batch.state.failures.record(
        out.source.message_id, f"{code}: {detail[:200]}", message_fault=fault
    )
    log.warning(
        "delay.send_failed",
        **event_ids(out.source),
        queue=queue,
        code=code,
        detail=detail[:300],
        message_fault=fault,
    )
    attempt = record.own_failures if fault else out.source.receive_count
    batch.hold(out.source, retry_backoff_seconds(attempt), code)


def delete(batch: BatchInHand) -> Flow[None]:
    """Delete the originals of what was sent or parked. A failed delete brings the message
    back after the visibility timeout: a requeue is then dropped by FIFO deduplication, a
    hand-over may be delivered twice."""
    done = [o.source for o in batch.done] + batch.dropped
    entries = [{"ReceiptHandle": batch.state.handle_of(r)} for r in done]
    failed = yield from _delay_queue_calls(batch, "DeleteMessageBatch", entries)
    batch.outcome.delete_failed = failed
    batch.state.stats.events["delete_failed"] += failed
    if failed:
        log.warning("delay.delete_failed", queue=batch.queues.delay, count=failed)


def hide(batch: BatchInHand) -> Flow[None]:
    """Keep held messages out of sight for their backoff (the worker and Lambda alike:
    otherwise they come back after the queue's visibility timeout, whatever the cause)."""
    entries = [
        {"ReceiptHandle": batch.state.handle_of(h.source), "VisibilityTimeout": h.wait_seconds}
        for h in batch.outcome.held
    ]
    failed = yield from _delay_queue_calls(batch, "ChangeMessageVisibilityBatch", entries)
    batch.outcome.unhidden = failed
    if failed:
        log.warning("delay.backoff_failed", queue=batch.queues.delay, count=failed)


def _delay_queue_calls(batch: BatchInHand, api: str, entries: list[dict[str, Any]]) -> Flow[int]:
    """One round of batch calls on the delay queue, within the budget; how many entries
    failed."""
    if not entries:
        return 0
    timeout = batch.budget.timeout()
    if timeout <= 0:
        log.warning("batch.out_of_time", queue=batch.queues.delay, api=api)
        return len(entries)
    return (yield from batch_calls(batch.queues.delay, api, entries, timeout))
