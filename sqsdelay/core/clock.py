"""Broker clock minus local clock (pure)."""

from __future__ import annotations

import statistics
from collections import deque


class ClockOffset:
    """Running estimate of broker clock minus local clock, in ms.

    Each first receive gives a sample (broker first-receive time minus local time when the
    response arrived). Samples are biased low by the network latency, which errs on the
    side of late rather than early. The median of recent samples ignores outliers.
    """

    def __init__(self, window: int = 101) -> None:
        self._samples: deque[int] = deque(maxlen=window)

    def observe(self, broker_ms: int, local_ms: int) -> None:
        self._samples.append(broker_ms - local_ms)

    def estimate(self) -> int | None:
        return int(statistics.median_low(self._samples)) if self._samples else None
