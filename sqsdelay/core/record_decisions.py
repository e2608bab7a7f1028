"""The decisions of a received batch: each message (`received.py`) decided under guards,
and turned into its outgoing SendMessageBatch entry. Pure, shared by the ECS worker and
the Lambda handler; one message's rules are `decision.py`'s."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from sqsdelay.core import message_shape, trace_context, tracing
from sqsdelay.core.clock import ClockOffset
from sqsdelay.core.decision import (
    Decision,
    Limits,
    Poison,
    decide,
    forward,
)
from sqsdelay.core.failures import FailureLog
from sqsdelay.core.received import Received, parse_natural
from sqsdelay.core.types import Target
from sqsdelay.logs import get_logger

_log = get_logger("sqsdelay.step")


@dataclass(frozen=True)
class Outgoing:
    source: Received
    decision: Decision
    target: Target
    entry: dict[str, Any]  # a SendMessageBatch entry without its Id
    size: int


def outgoing(received: Received, decision: Decision) -> Outgoing:
    entry: dict[str, Any] = {"MessageBody": received.body, **decision.request()}
    entry |= tracing.system_attributes(tracing.carried(received.system))
    if decision.attributes:
        entry["MessageAttributes"] = decision.attributes
    size = decision.size  # counted by the decision as it checked the limits
    if size is None:
        size = message_shape.message_size(received.body, decision.attributes)
    return Outgoing(received, decision, decision.target, entry, size)


def decide_one(
    r: Received,
    *,
    local_ms: int,
    offset_ms: int | None,
    lim: Limits,
    source_queue: str,
    failures: FailureLog,
    forwarding: bool = False,
    staging: bool = False,
    claims: bool = False,
) -> Outgoing | None:
    """The outgoing entry of one record. Whatever a producer wrote, a record that cannot be
    decided goes to the error queue with the reason; None when even that cannot be built
    (the step then holds it, and it is never lost)."""
    record = failures.get(r.message_id)
    r, dropped = trace_context.sanitized(r)
    if dropped:  # a producer's, never ours: it must not stop the hop, nor travel on
        _log.warning("delay.trace_context_dropped", sqs_message_id=r.message_id, reason=dropped)
    try:
        # a message from a FIFO destination's staging queue is forwarded
        decision_of: Callable[..., Decision] = (
            forward if forwarding else functools.partial(decide, staging=staging, claims=claims)
        )
        decision = decision_of(
            r,
            local_now_ms=local_ms,
            offset_ms=offset_ms,
            lim=lim,
            source_queue=source_queue,
            own_failures=record.own_failures,
            last_error=record.last_error,
        )
        return outgoing(r, decision)
    except Exception as exc:  # a fault of ours must not stop the batch or the worker
        reason = f"cannot be handled ({type(exc).__name__}: {str(exc)[:200]})"
    try:
        return outgoing(r, Poison(reason, dict(r.attributes)))
    except Exception:
        return None


def decide_batch(
    received: list[Received],
    *,
    local_ms: int,
    offset: ClockOffset,
    lim: Limits,
    source_queue: str,
    failures: FailureLog | None = None,
    forwarding: bool = False,
    staging: bool = False,
    claiming: Collection[str] = (),
) -> tuple[list[Outgoing], list[Received]]:
    """Decide a received batch: the outgoing entries, and the records that could not even be
    dead-lettered. First receives also feed the clock-offset estimate, which the redeliveries
    in the same batch already use. `local_ms` is when the batch arrived; `claiming`, the SQS
    MessageIds that claim a registry record before their hand-over."""
    for r in received:
        first = parse_natural(r.system.get("ApproximateFirstReceiveTimestamp"))
        if r.receive_count == 1 and first is not None:
            offset.observe(first, local_ms)
    estimate = offset.estimate()
    log = failures or FailureLog()
    outs: list[Outgoing] = []
    stuck: list[Received] = []
    for r in received:
        out = decide_one(
            r,
            local_ms=local_ms,
            offset_ms=estimate,
            lim=lim,
            source_queue=source_queue,
            failures=log,
            forwarding=forwarding,
            staging=staging,
            claims=r.message_id in claiming,
        )
        if out is None:
            stuck.append(r)
        else:
            outs.append(out)
    return outs, stuck
