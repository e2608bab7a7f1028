"""How long a received batch asks to stay out of sight, and when the worker stops taking
batches, from the event loop's own lag (pure).

A worker at the machine's limit is an event loop that runs late: a heartbeat due at half the
receive visibility fires after it, its extension fails, the batch comes back and another loop
receives a second copy (issue 45: 330 duplicates with 240 failed extensions in a saturated
burst). The heartbeat must not lose to the work it protects:
- the visibility a receive asks for covers what a batch really takes plus the lag, twice over
  (the first beat fires at half of it, late by the lag, and its call takes up to a batch's
  time); at ease that is the configured receive visibility (3 s), so a lost receive answer
  still costs seconds;
- while the loop lags by more than half the configured receive visibility, a queue
  gets no extra receive loop and its extra ones end (backpressure): fewer batches in hand.
  Its first loop goes on: a loop slowed by the machine, not by its own work, must still move
  every queue.
`Recent` keeps the largest of the recent samples: a loop that lagged a second ago may lag
again.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

WINDOW_S = 5.0


@dataclass
class Recent:
    """The largest sample of the last `window_s` seconds (monotonic time)."""

    window_s: float = WINDOW_S
    _samples: deque[tuple[float, float]] = field(default_factory=deque)

    def add(self, now: float, value: float) -> None:
        # a new sample makes older, smaller ones irrelevant: a deque of decreasing values
        while self._samples and self._samples[-1][1] <= value:
            self._samples.pop()
        self._samples.append((now, value))
        while self._samples[0][0] < now - self.window_s:
            self._samples.popleft()

    def largest(self, now: float) -> float:
        """Changes nothing (it may be read from another thread than the one adding): the
        first sample inside the window is the largest."""
        for at, value in list(self._samples):
            if at >= now - self.window_s:
                return value
        return 0.0


def receive_visibility(short: int, full: int, lag_s: float, batch_s: float) -> int:
    """The VisibilityTimeout of a receive: the configured short one, or more when the loop
    lags or batches take long, so that the first beat lands in time; never above the
    visibility timeout the extension asks for.

    The beat is due at half of it less the lag, counted from when the answer was read; the
    answer may have waited a lag to be read, the beat fires a lag late, and its call takes
    up to a batch's time: half of it must cover the lag and the batch (L + b). Asking for
    2L + b leaves one more lag for a loop that lags more than it did lately."""
    need = math.ceil(2 * (2 * lag_s + batch_s))
    return min(full, max(short, need))


def first_beat_in(short: int, lag_s: float, since_answer_s: float, floor_s: float) -> float:
    """Seconds until a batch's first beat, `since_answer_s` after its receive's answer was
    read: half the visibility `short` less the lag, counted from the answer (not from when
    the beat's task first runs, a lag later on a lagging loop); at least `floor_s`."""
    return max(floor_s, short / 2 - lag_s - since_answer_s)


def retry_in(short: int, lag_s: float, floor_s: float) -> float:
    """Seconds until a failed beat is tried again: within what is left of the short
    visibility, which the lag eats into as it did the first beat's wait."""
    return max(floor_s, short / 4 - lag_s)


def lagging(lag_s: float, short: int) -> bool:
    """Whether the loop lags too much for more batches in hand: by more than half the
    configured receive visibility `short`, where a beat at half of it would be late (the
    sized visibility grows with the lag, so it would never say so)."""
    return lag_s > short / 2
