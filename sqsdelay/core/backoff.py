"""Backing off after failures (pure: the caller passes the time).

`CircuitBreaker` is the per-target circuit breaker: after a whole call to a queue fails, that
queue is left alone for a capped, doubling wait. `retry_backoff_seconds` is how long a single
message that failed stays out of sight before its next try.
"""

from __future__ import annotations

from sqsdelay.core import quotas


class CircuitBreaker:
    """A circuit breaker per target: after a whole call fails, the target is left alone for
    a capped wait that doubles with each failure in a row, until a success closes it."""

    def __init__(self, base_seconds: float = 1.0, cap_seconds: float = 300.0) -> None:
        self.base = base_seconds
        self.cap = cap_seconds
        self._failures: dict[str, int] = {}
        self._open_until: dict[str, float] = {}

    def retry_in(self, target: str, now: float) -> float:
        return max(0.0, float(self._open_until.get(target, 0.0)) - now)

    def failure(self, target: str, now: float) -> float:
        n = self._failures.get(target, 0) + 1
        self._failures[target] = n
        wait = min(self.cap, self.base * 2.0 ** min(n - 1, 30))
        self._open_until[target] = now + wait
        return wait

    def success(self, target: str) -> None:
        self._failures.pop(target, None)
        self._open_until.pop(target, None)


def retry_backoff_seconds(attempt: int, cap: int = quotas.MAX_NATIVE_DELAY_SECONDS) -> int:
    """Visibility timeout for a message whose send failed: 2, 4, 8 ... s, capped."""
    return int(min(cap, 2 ** min(max(attempt, 1), 20)))


def visibility_seconds(wait: float) -> int:
    """A wait as a visibility change SQS accepts."""
    return int(max(1, min(wait, quotas.MAX_BACKOFF_VISIBILITY_SECONDS)))
