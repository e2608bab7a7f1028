"""The batch step's configuration (`StepConfig`), the state that lasts from batch to batch
in one runtime (`StepState`), and a batch's time budget (`Budget`, with each phase's
share). The batch in hand is `batch_in_hand.py`; the phases, `step.py` and
`registry_phases.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqsdelay.core.backoff import CircuitBreaker
from sqsdelay.core.clock import ClockOffset
from sqsdelay.core.decision import Limits
from sqsdelay.core.failures import FailureLog
from sqsdelay.core.outcomes import Stats
from sqsdelay.core.pause import Pauses
from sqsdelay.core.quotas import MAX_MESSAGE_BYTES
from sqsdelay.core.received import Received
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
    # Record a `trace_context.Hop` of every move in `BatchEnds.spans` (OpenTelemetry is on).
    spans: bool = False


class StepState:
    """What lasts from batch to batch in one runtime: the clock offset, the breakers (sends
    per target queue; Scheduler), the message failure counts, the statistics, the SQS
    messages in hand (by MessageId), and the paused destinations with what is held for them."""

    def __init__(self) -> None:
        self.offset = ClockOffset()
        self.sends = CircuitBreaker()
        self.scheduler = CircuitBreaker()
        self.registry = CircuitBreaker()
        self.failures = FailureLog()
        self.stats = Stats()
        self.in_hand: set[str] = set()
        # The receipt handle of the latest copy of a message in hand: SQS deletes (or hides)
        # a message received again only by its newest handle.
        self.newest: dict[str, str] = {}
        self.pauses = Pauses()

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


class Budget:
    """The time a batch's calls may use: phases end at shares of it, and every call's limit
    is the smaller of the call timeout and its phase's time left."""

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
