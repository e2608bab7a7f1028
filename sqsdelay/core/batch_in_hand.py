"""One batch in hand (`BatchInHand`): what it was given, and where each of its records ends
(held, moved, dropped, released), with the events and metrics each end counts, and how
events name a message. The step's phases are flow functions that take it: `step.py`
(deciding, parking, sending, deleting, hiding) and `registry_phases.py` (the registry).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from sqsdelay.core import identity, parking, registry, trace_context
from sqsdelay.core.decision import HandOver, Requeue
from sqsdelay.core.metrics import CANCELLED, HELD, lateness_ms
from sqsdelay.core.outcomes import END, BatchEnds, Held
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.core.received import Received
from sqsdelay.core.record_decisions import Outgoing
from sqsdelay.core.step_state import Budget, StepConfig, StepState
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.step")


def event_ids(received: Received) -> dict[str, str]:
    """How events name a message: `message_id`, its own id (the one `send` printed and
    `cancel` takes; a foreign message's group id), and this hop's `sqs_message_id`."""
    own = (
        identity.registry_id(received.attributes)
        or received.system.get("MessageGroupId")
        or received.message_id
    )
    return {"message_id": own, "sqs_message_id": received.message_id}


@dataclass
class BatchInHand:
    """One batch in hand: what it was given, and what it has done so far."""

    queues: QueueTrio
    target: parking.ParkTarget | None  # where a parked message goes back to
    config: StepConfig
    state: StepState
    clock: Callable[[], float]
    local_ms: int  # when the batch arrived: `clock()` need not be epoch time
    deadline: float  # no call starts after it (a `clock()` time)
    outcome: BatchEnds
    done: list[Outgoing] = field(default_factory=list)  # sent or parked: may be deleted
    dropped: list[Received] = field(default_factory=list)  # cancelled or a second copy
    records: dict[str, registry.Record] = field(default_factory=dict)  # by SQS MessageId
    claimed: list[Outgoing] = field(default_factory=list)  # claims this batch won
    offset_ms: int = 0  # the clock offset estimate the decisions used (set by `run`)

    def __post_init__(self) -> None:
        self.budget = Budget(self.clock, self.deadline, self.config.call_timeout)

    def release(self, copy: Received) -> None:
        self.outcome.released.append(copy)
        self.state.stats.events["delay.copy_in_hand"] += 1
        log.warning("delay.copy_in_hand", **event_ids(copy), queue=self.queues.delay)

    def broker_ms(self) -> int:
        """Now on the broker's clock: the local time since the batch arrived, corrected by
        the estimated offset (none yet: the local clock)."""
        elapsed = int((self.clock() - self.budget.start) * 1000)
        return self.local_ms + elapsed + self.offset_ms

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
        if self.config.spans:
            self.outcome.spans.append(self._hop(out))
        getattr(log, d.level)(
            d.event,
            **event_ids(out.source),
            destination=self.queues.destination,
            receive_count=out.source.receive_count,
            size_bytes=out.size,
            **fields,
            **d.log_fields(),
        )

    def _hop(self, out: Outgoing) -> trace_context.Hop:
        d = out.decision
        return trace_context.Hop(
            operation=trace_context.OPERATIONS[d.event],
            destination=self.queues.delay
            if d.event == "delay.parked"
            else self.queues.of(out.target),
            sqs_message_id=out.source.message_id,
            message_id=event_ids(out.source)["message_id"],
            due_ms=getattr(d, "due_ms", None),
            context=trace_context.carried(out.source.attributes),
            start_ms=self.local_ms,
            end_ms=self.local_ms + int((self.clock() - self.budget.start) * 1000),
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

    def drop(self, source: Received, why: Literal["cancelled", "duplicate", "superseded"]) -> None:
        """Delete without sending: cancelled, a copy of a message another copy handed over,
        or a copy of an earlier send of its id (`registry.Record.of_generation`)."""
        self.dropped.append(source)
        self.outcome.ends[source.message_id] = "cancelled" if why == "cancelled" else "dropped"
        event = {
            "cancelled": "delay.cancelled",
            "duplicate": "delay.duplicate_dropped",
            "superseded": "delay.superseded_dropped",
        }[why]
        self.state.stats.events[event] += 1
        self.state.stats.tally.count(self.queues.destination, CANCELLED)
        self.state.failures.forget(source.message_id)
        log.info(
            event,
            **event_ids(source),
            destination=self.queues.destination,
        )
