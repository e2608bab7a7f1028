"""The step's registry phases (SQSDELAY_REGISTRY=dynamodb), flow functions that take the
batch in hand (`batch_in_hand.py`): follow each message's record (cancelled, rescheduled),
claim a hand-over before it is sent so that only one runtime sends it, and mark what was
delivered (docs/registry.md).
"""

from __future__ import annotations

from dataclasses import replace

from sqsdelay.core import identity, message_shape, registry, wire_format
from sqsdelay.core.backoff import visibility_seconds
from sqsdelay.core.batch_in_hand import BatchInHand
from sqsdelay.core.decision import HandOver, carried_due
from sqsdelay.core.delays import whole_seconds
from sqsdelay.core.flows import Fault, Flow
from sqsdelay.core.message_shape import number_attribute
from sqsdelay.core.received import Received
from sqsdelay.core.record_decisions import Outgoing
from sqsdelay.core.step_state import PARK_SHARE, SEND_SHARE
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.step")


def _due_from(received: Received, record: registry.Record) -> Received:
    """The message with the due time its record was rescheduled to."""
    due = {wire_format.DUE_AT_ATTRIBUTE: number_attribute(record.due_ms)}
    return replace(received, attributes={**received.attributes, **due})


def follow_registry(
    batch: BatchInHand, received: list[Received], table: str
) -> Flow[list[Received]]:
    """Read the records of the batch: drop what was cancelled (or was handed over by
    another copy), give a rescheduled message its new due time, hold what the registry
    could not answer for (backing off; never the error queue). Messages without a record
    (NServiceBus's, or sent without the registry) go on as they came, and so does a replay
    of a handed-over message (a new generation, `registry.Record.replayed_anew`)."""
    ids = {}
    for r in received:
        ident = identity.registry_id(r.attributes)
        if ident is not None:
            ids[r.message_id] = ident
    if not ids:
        return received
    timeout = _registry_timeout(batch, PARK_SHARE)
    if timeout is None:
        lookup = registry.Lookup({}, frozenset(ids.values()))
    else:
        lookup = yield from registry.read(
            table, batch.queues.destination, list(ids.values()), timeout
        )
        _registry_answered(batch, lookup.fault)
    kept: list[Received] = []
    for r in received:
        ident = ids.get(r.message_id)
        record = lookup.records.get(ident) if ident else None
        if ident in lookup.failed:
            _registry_hold(batch, r)
        elif record is None:
            kept.append(r)
        elif not record.of_generation(carried_due(r.attributes)):
            # A copy of an earlier send of the id, whose record this send wrote over: that
            # send was cancelled, handed over by another copy, or replaced before it went
            # out. A replay of its dead letter is owed: it goes on, out of this record's reach.
            if replay_token(r):
                kept.append(r)
            else:
                batch.drop(r, "superseded")
        elif record.state == "cancelled":
            batch.drop(r, "cancelled")
        elif record.dead_lettered_as(r.message_id):
            batch.drop(r, "duplicate")  # a worker sent it to the error queue; its delete failed
        elif record.replayed_anew(replay_token(r)):
            batch.records[r.message_id] = record  # a replay: a new delivery, claimed anew
            kept.append(r)
        elif record.state == "handed-over" and not record.held_by_another_receive(r.message_id):
            batch.drop(r, "duplicate")  # another copy was handed over, or this one was
        else:
            batch.records[r.message_id] = record
            # A replay's own due time may be missing (no room for it): it is due when its
            # record says, not at its delay counted again from the replay's send.
            kept.append(_due_from(r, record) if record.moved or replay_token(r) else r)
    return kept


def replay_token(received: Received) -> str | None:
    """The token of a replayed message (`sqsdelay.Replay`), None for any other."""
    return message_shape.string_value(received.attributes, wire_format.REPLAY_ATTRIBUTE) or None


def claim(batch: BatchInHand, outs: list[Outgoing], table: str) -> Flow[list[Outgoing]]:
    """Claim the record of each hand-over (one conditional write each, all at once)
    before anything is sent: the claim decides a race with a cancel or a reschedule.
    Returns what may be sent."""
    blocked: set[str] = set()  # held or dropped here: not sent
    claims: list[tuple[Outgoing, registry.Record]] = []
    keys: set[str] = set()
    for o in outs:
        rec = batch.records.get(o.source.message_id)
        if not isinstance(o.decision, HandOver) or rec is None:
            continue
        if rec.message_id in keys:  # two SQS messages of one id (a sender's retry)
            blocked.add(o.source.message_id)  # its next hop finds the other's claim
            batch.hold(o.source, 1, "another copy of this message is being handed over")
        else:
            keys.add(rec.message_id)
            claims.append((o, rec))
    results = (yield from _claim_round(batch, claims, table)) if claims else []
    for (out, _), (result, now_record) in zip(claims, results, strict=True):
        if result == "claimed":
            batch.claimed.append(out)
            continue
        blocked.add(out.source.message_id)
        if result == "failed":
            _registry_hold(batch, out.source)
        elif result == "moved":  # rescheduled meanwhile: the next receive reads it again
            batch.hold(out.source, 1, "rescheduled while being handed over")
        elif result == "in-hand":  # released until the other receive's lease runs out
            left_ms = (now_record.lease_ms if now_record else 0) - batch.broker_ms()
            wait = visibility_seconds(max(1, whole_seconds(left_ms)))
            batch.hold(out.source, wait, "another receive of this message holds its claim")
        else:
            batch.drop(out.source, result)
    return [o for o in outs if o.source.message_id not in blocked]


def _claim_round(
    batch: BatchInHand, claims: list[tuple[Outgoing, registry.Record]], table: str
) -> Flow[list[tuple[registry.Claim, registry.Record | None]]]:
    """The claims' conditional writes, at once; each answer read (`failed` for all while
    the registry's breaker is open or the send phase has no time left)."""
    timeout = _registry_timeout(batch, SEND_SHARE)  # a claim is the start of its send
    if timeout is None:
        return [("failed", None)] * len(claims)
    now = batch.broker_ms()
    lease = lease_ms(batch)
    calls = [
        registry.claim_call(
            table,
            rec,
            o.source.message_id,
            registry.receive_key_of(o.source.receipt_handle),
            now,
            lease,
            timeout,
            replay_token(o.source),
        )
        for o, rec in claims
    ]
    answers = yield calls
    results = [
        registry.claimed(a.fault, o.source.message_id)
        for a, (o, _) in zip(answers, claims, strict=True)
    ]
    faults = [a.fault for a, r in zip(answers, results, strict=True) if r[0] == "failed"]
    _registry_answered(batch, faults[0] if faults else None)
    return results


def lease_ms(batch: BatchInHand) -> int:
    """Until when (broker time) a claim made now may still lead to a send: the batch's
    deadline, plus a call time limit for the workers' different clock offset estimates."""
    left = max(0.0, batch.budget.deadline - batch.clock()) + batch.config.call_timeout
    return batch.broker_ms() + int(left * 1000)


def mark_delivered(batch: BatchInHand, table: str) -> Flow[None]:
    """Mark the claims whose hand-over was sent: no later receive may take them over; and
    the records of what was dead-lettered: no later receive of that SQS message may be handed
    over (its dead letter's replay is). A mark that fails leaves a claim to its lease
    (docs/registry.md), and a dead letter's copy to the window the mark closes."""
    ends = batch.outcome.ends
    sent = [o for o in batch.claimed if ends.get(o.source.message_id) == "handed-over"]
    dead = [m for m, end in ends.items() if end == "dead-lettered" and m in batch.records]
    timeout = batch.budget.timeout()
    if not (sent or dead) or timeout <= 0:
        return
    calls = [
        registry.delivered_call(
            table,
            batch.records[o.source.message_id],
            o.source.message_id,
            registry.receive_key_of(o.source.receipt_handle),
            timeout,
        )
        for o in sent
    ] + [registry.dead_lettered_call(table, batch.records[m], m, timeout) for m in dead]
    answers = yield calls
    for event, part in (
        ("registry.delivered_mark_failed", answers[: len(sent)]),
        ("registry.dead_letter_mark_failed", answers[len(sent) :]),
    ):
        failed = sum(1 for a in part if a.fault is not None)
        if failed:
            batch.state.stats.events[event] += failed
            log.warning(event, queue=batch.queues.delay, count=failed)


def _registry_timeout(batch: BatchInHand, share: float) -> float | None:
    """The time limit for a round of registry calls; None while its breaker is open or
    the phase has no time left (the round then counts as failed)."""
    timeout = batch.budget.timeout(share)
    if timeout <= 0 or batch.state.registry.retry_in(registry.BREAKER_KEY, batch.clock()) > 0:
        return None
    return timeout


def _registry_answered(batch: BatchInHand, fault: Fault | None) -> None:
    if fault is None:
        batch.state.registry.success(registry.BREAKER_KEY)
        return
    wait = batch.state.registry.failure(registry.BREAKER_KEY, batch.clock())
    log.error(
        "registry.unavailable",
        code=fault.code,
        detail=fault.detail[:300],
        retry_in_seconds=wait,
    )


def _registry_hold(batch: BatchInHand, source: Received) -> None:
    wait = batch.state.registry.retry_in(registry.BREAKER_KEY, batch.clock())
    batch.hold(source, visibility_seconds(max(wait, 1)), "registry unavailable")
