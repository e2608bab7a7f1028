"""Broker clock minus local clock (pure)."""

from __future__ import annotations

import statistics
from collections import deque


class ClockOffset:
    """Running estimate of broker clock minus local clock, in ms.

    Each first receive gives a sample (broker first-receive time minus local time when the
    response arrived). Samples are biased low by the network latency, which errs on the
    side of late rather than early. The median of recent samples ignores outliers.

    A sample more than `jump_ms` away from the estimate means the local clock jumped (NTP
    stepping it, a VM resumed): the old samples are dropped, as after a forward jump they
    would put the broker's time ahead of itself and a redelivered message out early.
    """

    def __init__(self, window: int = 101, jump_ms: int = 1000) -> None:
        self._samples: deque[int] = deque(maxlen=window)
        self._jump_ms = jump_ms

    def observe(self, broker_ms: int, local_ms: int) -> None:
        sample = broker_ms - local_ms
        estimate = self.estimate()
        if estimate is not None and abs(sample - estimate) > self._jump_ms:
            self._samples.clear()
        self._samples.append(sample)

    def estimate(self) -> int | None:
        return int(statistics.median_low(self._samples)) if self._samples else None
