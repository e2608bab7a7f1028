"""What a runtime counts between two metric flushes (pure): messages moved per destination,
hand-over lateness, due windows, calls per API, throttled calls and fallbacks.

`sqsdelay.core.emf` writes a `Tally` as CloudWatch embedded metric format lines. The names
and units are a contract (README, docs/metrics.md, infra/dashboard.yaml).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Final

COUNT: Final = "Count"
MILLISECONDS: Final = "Milliseconds"

# Each end of a record in the step, by its log event.
EVENT_METRICS: Final = {
    "delay.handed_over": "HandedOver",
    "delay.requeued": "Requeued",
    "delay.parked": "Parked",
    "delay.dead_lettered": "DeadLettered",
    "delay.forwarded": "Forwarded",
}
HELD: Final = "Held"
CANCELLED: Final = "Cancelled"
FALLBACKS: Final = "SchedulerFallbacks"
RECEIVE_FAILURES: Final = "ReceiveFailures"
LATENESS: Final = "HandOverLateness"
CLOCK_OFFSET: Final = "ClockOffset"
# The worker's backlog, without dimensions: what its service scales on (core.backlog).
BACKLOG_VISIBLE: Final = "BacklogVisible"
BACKLOG_DUE: Final = "BacklogDue"
REQUESTS: Final = {
    "sqs": "SqsRequests",
    "scheduler": "SchedulerRequests",
    "dynamodb": "RegistryRequests",
}
THROTTLED: Final = {
    "sqs": "SqsThrottled",
    "scheduler": "SchedulerThrottled",
    "dynamodb": "RegistryThrottled",
}

_HOUR_MS: Final = 3_600_000
_DAY_MS: Final = 24 * _HOUR_MS
# A looping message is counted in the window of the time it has left when the worker moves
# it; every looping message passes the worker once per cycle, so a Sum over one cycle is the
# number waiting (docs/metrics.md).
WINDOWS: Final = (
    (_HOUR_MS, "DueWithin1h"),
    (_DAY_MS, "DueWithin1d"),
    (30 * _DAY_MS, "DueWithin30d"),
    (None, "DueLater"),
)

# Every name a runtime may write, with its unit: the README's metrics table lists them all.
DESTINATION_METRICS: Final = (
    *EVENT_METRICS.values(),
    HELD,
    CANCELLED,
    FALLBACKS,
    RECEIVE_FAILURES,
    *(name for _, name in WINDOWS),
)
API_METRICS: Final = (*REQUESTS.values(), *THROTTLED.values())
UNITS: Final = {
    **dict.fromkeys(DESTINATION_METRICS, COUNT),
    **dict.fromkeys(API_METRICS, COUNT),
    BACKLOG_VISIBLE: COUNT,
    BACKLOG_DUE: COUNT,
    LATENESS: MILLISECONDS,
    CLOCK_OFFSET: MILLISECONDS,
}


def window(left_ms: int) -> str:
    """The due window of a message with `left_ms` to go."""
    for bound, name in WINDOWS:
        if bound is None or left_ms <= bound:
            return name
    raise AssertionError("the last window has no bound")  # pragma: no cover


def lateness_ms(*, sent_ms: int, delay_seconds: int, due_ms: int) -> int:
    """When a handed-over message becomes visible (broker send time plus DelaySeconds) minus
    when it was due; 0 for the on-time ones (never negative)."""
    return max(0, sent_ms + delay_seconds * 1000 - due_ms)


@dataclass
class Tally:
    """Counts since the last flush. `counts` is per (destination, metric), `calls` and
    `throttled` per (service, API); `lateness` holds one value per hand-over."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    lateness: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    throttled: Counter[tuple[str, str]] = field(default_factory=Counter)

    def count(self, destination: str, metric: str, n: int = 1) -> None:
        self.counts[(destination, metric)] += n

    def moved(self, destination: str, event: str) -> None:
        metric = EVENT_METRICS.get(event)
        if metric is not None:
            self.counts[(destination, metric)] += 1

    def due(self, destination: str, left_ms: int) -> None:
        self.counts[(destination, window(left_ms))] += 1

    def handed_over(self, destination: str, late_ms: int) -> None:
        self.lateness[destination].append(late_ms)

    def take(self) -> Tally:
        """What was counted so far; the tally starts again from zero."""
        taken = Tally(self.counts, self.lateness, self.calls, self.throttled)
        self.counts, self.lateness = Counter(), defaultdict(list)
        self.calls, self.throttled = Counter(), Counter()
        return taken

    def destinations(self) -> list[str]:
        return sorted({d for d, _ in self.counts} | set(self.lateness))

    def __bool__(self) -> bool:
        return bool(self.counts or self.lateness or self.calls or self.throttled)
