"""The step's bookkeeping of one batch in hand: its configuration and the state that lasts
from batch to batch, its budget, and where each record ends (`StepBase`: held, moved,
released, with the events and metrics each end counts). The phases build on it:
`step_registry.py` (the registry), `step.py` (parking, sending, deleting).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqsdelay.core import identity, parking, registry
from sqsdelay.core.backoff import BackoffTimer
from sqsdelay.core.clock import ClockOffset
from sqsdelay.core.decision import HandOver, Limits, Requeue
from sqsdelay.core.failures import FailureLog
from sqsdelay.core.metrics import HELD, lateness_ms
from sqsdelay.core.outcomes import END, Held, Outcome, Stats
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.core.quotas import MAX_MESSAGE_BYTES
from sqsdelay.core.received import Received
from sqsdelay.core.record_decisions import Outgoing
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.step")

# The share of a batch's budget each phase may use up to: parking first (the loop is always
# a fallback), then the sends, and the delete and hold with whatever is left.
PARK_SHARE = 0.5
SEND_SHARE = 0.85


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


def event_ids(received: Received) -> dict[str, str]:
    """How events name a message: `message_id`, its own id (the one `send` printed and
    `cancel` takes; a foreign message's group id), and this hop's `sqs_message_id`."""
    own = (
        identity.registry_id(received.attributes)
        or received.system.get("MessageGroupId")
        or received.message_id
    )
    return {"message_id": own, "sqs_message_id": received.message_id}


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


@dataclass
class StepBase:
    """One batch in hand: what it was given, and what it has done so far."""

    queues: QueueTrio
    target: parking.ParkTarget | None  # where a parked message goes back to
    config: StepConfig
    state: StepState
    clock: Callable[[], float]
    local_ms: int  # when the batch arrived: `clock()` need not be epoch time
    deadline: float  # no call starts after it (a `clock()` time)
    outcome: Outcome
    done: list[Outgoing] = field(default_factory=list)  # sent or parked: may be deleted
    dropped: list[Received] = field(default_factory=list)  # cancelled or a second copy
    records: dict[str, registry.Record] = field(default_factory=dict)  # by SQS MessageId
    claimed: list[Outgoing] = field(default_factory=list)  # claims this batch won
    offset_ms: int = 0  # the clock offset estimate the decisions used (set by `run`)

    def __post_init__(self) -> None:
        self.budget = _Budget(self.clock, self.deadline, self.config.call_timeout)

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
        getattr(log, d.level)(
            d.event,
            **event_ids(out.source),
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
