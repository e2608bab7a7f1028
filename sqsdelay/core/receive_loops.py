"""How many receive loops a delay queue gets, and the connections and room they take (pure).

What a queue's receives show (`QueueDemand`) and the worker's limits on top of it: the
connection pools and the open files they need (`pools`, `raised_file_limit`), whether a busy
queue may start another loop (`room_for_a_loop`), when an extra loop ends
(`extra_loop_ends`), the room for batches finishing on their own (`pausing_room`).
`aws/receive_driver.py` runs the loops by these rules.

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


# -- how many loops the worker lets a queue have, and the connections they take ------------

# Long polls and the calls of batches (sends, deletes, counts) have a connection pool each,
# so that polls waiting on a thousand queues never hold up a hand-over. Connections are made
# as they are needed, so a pool's size is a cap, not memory: with discovery, room for this
# many long polls (the queues that hold something, and the extra loops of busy ones) and
# this many calls at once.
DISCOVERY_POLLS = 2048
DISCOVERY_CALLS = 100
# Open files besides the pools' connections (logs, the liveness file, the interpreter's).
OTHER_FILES = 64
# Per receive loop, in full batches' worth of messages: a batch that waits out its
# hand-overs' fractions of a second mostly sleeps, so this bounds memory, not work. Counted in
# messages, not batches: SQS's short batches (1..3 of 10) would fill a room of batches with a
# fifth of the messages.
PAUSING_BATCHES = 8


@dataclass(frozen=True)
class Pools:
    """The worker's two connection pools: long polls, and the calls of batches."""

    polls: int  # long polls at once; the extra loops stay below it
    calls: int

    @property
    def open_files(self) -> int:
        """The open files the worker may need: a connection is one."""
        return self.polls + self.calls + OTHER_FILES


def pools(queues: int, concurrency: int, *, discovering: bool) -> Pools:
    """With discovery, fixed caps (the queues come and go). Otherwise up to ten loops a
    queue's concurrency, for queues whose batches are short (loops_allowed)."""
    if discovering:
        return Pools(DISCOVERY_POLLS, DISCOVERY_CALLS)
    polls = queues * concurrency * quotas.MAX_BATCH_ENTRIES
    return Pools(polls, max(10, polls))


def raised_file_limit(needed: int, soft: int, hard: int, unlimited: int) -> int | None:
    """The soft limit of open files to set for `needed`, within the hard limit (`unlimited`:
    RLIM_INFINITY); None when the soft limit is already enough."""
    want = needed if hard == unlimited else min(needed, hard)
    return want if soft != unlimited and soft < want else None


def room_for_a_loop(
    demand: QueueDemand,
    *,
    loops: int,
    concurrency: int,
    polls: int,
    queues: int,
    extra: int,
    discovering: bool,
    lagging: bool,
) -> bool:
    """Whether a busy queue (`loops` running) may start another: within the loops its demand
    allows (loops_allowed), while the event loop keeps up, and only while the polls' pool
    has a connection to spare beyond one per queue (`extra`: the loops beyond each queue's
    first, over all queues) and, with discovery, an eighth kept for queues found later. A
    busy queue takes spare connections, never another queue's."""
    reserve = polls // 8 if discovering else 0
    spare = polls - queues - extra - reserve
    return loops < demand.loops_allowed(concurrency) and spare > 0 and not lagging


def extra_loop_ends(demand: QueueDemand, *, lagging: bool) -> str | None:
    """Why an extra loop ends before its next receive, or None (it polls): "drained" once
    any loop's receive of the queue came back empty (each extra loop polling once more into
    the empty queue was most of the empty receives of a draining backlog); "lagging" while
    the event loop lags (backpressure: fewer batches in hand). A queue's first loop never
    ends so, and an extra loop also ends when its own receive comes back empty
    (`QueueDemand.extra_loop_found_it_empty`)."""
    if demand.drained:
        return "drained"
    if lagging:
        return "lagging"
    return None


def pausing_room(concurrency: int, queues: int) -> int:
    """How many messages may sit in batches finishing on their own at once: PAUSING_BATCHES
    full batches per loop of each queue's concurrency."""
    return PAUSING_BATCHES * quotas.MAX_BATCH_ENTRIES * concurrency * queues
