"""A worker task's backlog, the metric its service scales on (pure).

Two parts, published as `BacklogVisible` and `BacklogDue` (docs/metrics.md):
- visible: the delay queues' ApproximateNumberOfMessages as last counted. The worker counts a
  queue only while its receives bring messages (core.receive_loops); a drained queue counts
  0. Every task of a service sees the same visible messages.
- due: the task's own requeues that become visible within the next minute. A requeue is
  invisible for the delay queue's DelaySeconds (the cycle), so the task knows when each of
  its requeues comes back. Each task knows only its own.
So the scaling policy divides the Maximum of the visible part across tasks by the number of
tasks, and adds the Average of the due part: the backlog per task whatever the number of
queues (infra/worker-ecs.yaml).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

HORIZON_MS = 60_000


@dataclass
class Backlog:
    cycle_ms: int
    visible: dict[str, int] = field(default_factory=dict)
    # (visible at, count) in the order the requeues were sent, hence of their visible times
    _coming: deque[tuple[int, int]] = field(default_factory=deque)
    _requeued: int = 0

    def requeued(self, now_ms: int, total: int) -> None:
        """The task's requeue counter read at `now_ms`: what it sent since the last reading
        becomes visible one cycle later."""
        if total > self._requeued:
            self._coming.append((now_ms + self.cycle_ms, total - self._requeued))
        self._requeued = total

    def counted(self, queue: str, visible: int) -> None:
        self.visible[queue] = visible

    def forget(self, queue: str) -> None:
        self.visible.pop(queue, None)

    def due(self, now_ms: int) -> int:
        """Requeues that become visible from now to HORIZON_MS on (already visible ones are
        in the visible part, or received)."""
        while self._coming and self._coming[0][0] < now_ms:
            self._coming.popleft()
        return sum(n for at, n in self._coming if at <= now_ms + HORIZON_MS)

    def visible_total(self) -> int:
        return sum(self.visible.values())
