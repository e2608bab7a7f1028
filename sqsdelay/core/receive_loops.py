"""How many receive loops a delay queue needs, from what SQS tells a client (pure).

SQS spreads a queue's messages over many servers and answers a receive with what the servers
it asked hold: below about 1,000 messages a receive most likely brings fewer than the 10 asked
for, even while more wait (docs/short-batches.md). So a short batch says nothing about the
backlog; the evidence is:
- a receive that brought messages, however few: more may wait, so the queue may have another
  loop. But once an extra loop's receive came back empty, the queue gets no new extra loop
  for one long poll's wait unless a batch comes back full: a trickle (each long poll brings
  the one message that arrived) would otherwise start a loop per message, each ending in an
  empty 20 s poll;
- a receive that came back empty: nothing was visible for a whole long poll, so the queue is
  drained and its extra loops end;
- the batches' size: the worker's concurrency is counted in full batches in hand, so a queue
  whose receives bring 2 messages may have five times the loops of one whose receives are
  full (as many requests per message, as many messages in hand).
The emulators fill every batch; a rule tuned on them (a short batch means drained) polled a
burst with one loop on SQS and handed it over seconds late (issue 45).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqsdelay.core import quotas

# Weight of the newest batch in the running mean: a burst's first few receives move it.
NEWEST = 0.3


@dataclass
class QueueDemand:
    """What one queue's receives have shown."""

    drained: bool = True  # its last receive came back empty (or it has not been polled)
    backlogged: bool = False  # its last receive showed that more may wait
    mean_batch: float = quotas.MAX_BATCH_ENTRIES  # messages a non-empty receive brings
    cool_until: float = float("-inf")  # no new extra loop before then, but for a full batch

    def received(self, count: int, now: float) -> None:
        """A receive brought `count` messages (`now`: a monotonic clock)."""
        self.drained = count == 0
        full = count >= quotas.MAX_BATCH_ENTRIES
        self.backlogged = full or (count > 0 and now >= self.cool_until)
        if count:
            self.mean_batch += NEWEST * (count - self.mean_batch)

    def extra_loop_found_it_empty(self, now: float, wait_s: float) -> None:
        """An extra loop polled in vain: the backlog it was started for is gone."""
        self.cool_until = now + wait_s

    def loops_allowed(self, concurrency: int) -> int:
        """`concurrency` loops of full batches' worth: more loops when batches are short,
        never more than one a message of a full batch (batches of 1)."""
        per_loop = max(1.0, self.mean_batch)
        return min(
            concurrency * quotas.MAX_BATCH_ENTRIES,
            math.ceil(concurrency * quotas.MAX_BATCH_ENTRIES / per_loop),
        )
