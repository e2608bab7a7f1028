"""How many requests a delayed message makes, under each way of running it: one set of
formulas for `cost-estimate` (Python numbers) and the Spark job (SQL text, `cost/sql.py`).
What the requests cost is `cost/money.py`'s; the prices are `cost/pricing.py`'s.

Per-message quantities are written once against a tiny `Ops` interface (ceil, max,
if-then-else), so the same code evaluates a number or writes a SQL expression; the models are
linear in those quantities (`Requests.of`), so they count one message or a summed group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from sqsdelay.core import quotas
from sqsdelay.errors import ConfigError

SECONDS_PER_MONTH = 30 * 24 * 3600  # the month used for idle polling: 30 days


class Ops(Protocol):
    def ceil(self, x: Any) -> Any: ...
    def maximum(self, a: Any, b: Any) -> Any: ...
    def where(self, cond: Any, a: Any, b: Any) -> Any: ...


class PythonOps:
    def ceil(self, x: Any) -> Any:
        return math.ceil(x)

    def maximum(self, a: Any, b: Any) -> Any:
        return max(a, b)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return a if cond else b


NEVER = 2**62  # a park threshold no delay reaches: parking off
# The registry's request units per delayed message (items well under 1 KB; docs/registry.md):
# the sender's PutItem (1, and 1 for the index), its mark after the send (1; the index is
# not touched), the worker's claim at the hand-over (1, and 1 for the index) and its
# delivered mark after the hand-over's send (1; the index is not touched).
REGISTRY_WRITE_UNITS = 6
# Each hop reads the record (BatchGetItem, eventually consistent: half a unit per item).
REGISTRY_READ_UNITS_PER_HOP = 0.5


@dataclass(frozen=True)
class Quantities:
    """Per-message quantities that every model is linear in. Summed over many messages they
    price the whole group at once (`Requests.of`), so the Spark job computes only these on
    each row and leaves the pricing to the small aggregate."""

    messages: Any
    routed: Any  # 1 when the delay goes through the delay queue (delay > cycle)
    routed_delay: Any  # the delay of a routed message, else 0
    cycles: Any  # worker passes k = ceil(N / cycle) - 1 (0 when direct)
    chunks: Any  # started 64 KiB of payload (at least 1)
    routed_chunks: Any
    cycle_chunks: Any  # k * chunks
    batch_chunks: Any  # routed: started 64 KiB of a batch of `batch_fill` such messages
    cycle_batch_chunks: Any  # k * batch_chunks
    # The same for messages parked in EventBridge Scheduler (delay above the threshold).
    parked: Any
    parked_chunks: Any
    parked_batch_chunks: Any
    parked_cycles: Any
    parked_cycle_batch_chunks: Any
    # A FIFO destination (docs/fifo-destinations.md): a delayed message is handed over to its
    # standard staging queue and forwarded from there (a receive, a FIFO send and a delete,
    # batched); one without a delay is sent to the FIFO destination itself.
    fifo_destination: Any = 0  # 1 for a message to a FIFO destination
    staged: Any = 0  # ... with a delay: through the staging queue
    staged_chunks: Any = 0
    staged_batch_chunks: Any = 0  # started 64 KiB of a forwarded batch of `batch_fill`
    fifo_now_chunks: Any = 0  # ... without a delay: its send is a FIFO request
    # fifo_destination * chunks (= staged_chunks + fifo_now_chunks), counted at send as
    # `chunks` is: what the Scheduler what-if sends into a FIFO destination instead of a
    # standard one. Taken from `chunks` on another basis, a month could go negative.
    fifo_chunks: Any = 0
    # What lands in a FIFO destination's staging queue, apart from a standard destination's
    # hand-overs (its bill is the delays', `tags.queue_component`): the hand-overs of routed
    # messages (fifo_destination * batch_chunks), and the sender's own sends of delays
    # within the cycle (at send, as `chunks`).
    staged_handover_batch_chunks: Any = 0
    staged_direct_chunks: Any = 0


# Quantities that happen when the message is sent (the count and the first send); the rest
# (the worker's passes and the hand-over) are spread over the message's life. A model's
# requests per usage month are these weighted so (`cost.job.aggregate`).
AT_SEND = ("routed", "chunks", "routed_chunks", "fifo_chunks", "staged_direct_chunks")


def quantities(
    delay: Any,
    size_bytes: Any,
    *,
    ops: Ops,
    cycle_seconds: int = 900,
    batch_fill: int = 10,
    chunk_bytes: int = 65_536,
    park_after: int = NEVER,
    fifo_destination: Any = 0,
) -> Quantities:
    """The quantities of one message delayed `delay` seconds with `size_bytes` of payload;
    it counts as parked when `delay` is above `park_after`. `fifo_destination`: 1 when the
    destination is a FIFO queue (a column of 0 and 1 in Spark)."""
    if not 1 <= batch_fill <= 10:
        raise ConfigError(f"batch fill must be 1..10, not {batch_fill}")
    # ceil(N/c) - 1 is 0 for 0 < N <= c and at least 1 above: the delay-queue route.
    cycles = ops.maximum(ops.ceil(delay / cycle_seconds) - 1, 0)
    routed = ops.where(delay > cycle_seconds, 1, 0)
    chunks = ops.maximum(ops.ceil(size_bytes / chunk_bytes), 1)
    batch = ops.where(
        delay > cycle_seconds, ops.maximum(ops.ceil(size_bytes * batch_fill / chunk_bytes), 1), 0
    )
    parked = ops.where(delay > max(park_after, cycle_seconds), 1, 0)
    staged = fifo_destination * ops.where(delay > 0, 1, 0)
    forward_batch = ops.maximum(ops.ceil(size_bytes * batch_fill / chunk_bytes), 1)
    return Quantities(
        messages=1,
        routed=routed,
        routed_delay=routed * delay,
        cycles=cycles,
        chunks=chunks,
        routed_chunks=routed * chunks,
        cycle_chunks=cycles * chunks,
        batch_chunks=batch,
        cycle_batch_chunks=cycles * batch,
        parked=parked,
        parked_chunks=parked * chunks,
        parked_batch_chunks=parked * batch,
        parked_cycles=parked * cycles,
        parked_cycle_batch_chunks=parked * cycles * batch,
        fifo_destination=fifo_destination,
        staged=staged,
        staged_chunks=staged * chunks,
        staged_batch_chunks=staged * forward_batch,
        fifo_now_chunks=(fifo_destination - staged) * chunks,
        fifo_chunks=fifo_destination * chunks,
        staged_handover_batch_chunks=fifo_destination * batch,
        staged_direct_chunks=staged * (1 - routed) * chunks,
    )


@dataclass(frozen=True)
class Requests:
    """Billed requests under each model (FIFO and standard kept apart), for one message or,
    from summed quantities, for a whole group."""

    reference_ops: Any  # C = N/cycle, O = 2C (reference document, cycle 900)
    cycles: Any
    exact_fifo: Any  # unbatched, with 64 KiB chunks
    exact_standard: Any
    batched_fifo: Any  # batched with the given fill
    batched_standard: Any
    scheduler_invocations: Any  # EventBridge Scheduler alternative: one schedule per message
    scheduler_standard: Any  # ... which sends the message to the destination at due time
    parked_fifo: Any  # the batched worker with parking (SQSDELAY_PARKING=scheduler)
    parked_standard: Any
    parked_invocations: Any
    # The registry (SQSDELAY_REGISTRY=dynamodb), on top of the batched or parked worker.
    registry_writes: Any
    registry_reads: Any
    parked_registry_reads: Any
    # FIFO destinations: the FIFO requests on the destination itself (the forwards and the
    # sends without a delay), apart from the delay queue's; the staging queue's are standard.
    exact_destination_fifo: Any = 0
    batched_destination_fifo: Any = 0  # the parked worker's too
    # The standard requests of the batched and parked workers that are a FIFO destination's
    # staging queue's (all of its standard requests; a standard destination has none).
    batched_staging: Any = 0
    scheduler_fifo: Any = 0  # the Scheduler alternative's sends into a FIFO destination

    @classmethod
    def of(cls, q: Quantities, *, cycle_seconds: int = 900, batch_fill: int = 10) -> Requests:
        """Direct route: one standard send. Delay-queue route: the first send to the FIFO
        queue, then k passes of receive + send + delete; the last pass's send (the hand-over)
        goes to the standard destination. Sends and receives are billed per started 64 KiB;
        batching divides each call by the batch fill, billed per started 64 KiB of the batch.

        Per routed message: exact FIFO = chunks + k*(chunks + 1) + (k - 1)*chunks
        = 2k*chunks + k; batched FIFO = chunks + k*(b + 1)/f + (k - 1)*b/f, b = batch chunks.
        Both are linear in the quantities, so they hold for sums too.

        A FIFO destination's delayed message is handed over to its standard staging queue
        (the hand-over above) and forwarded: a receive (b'/f) and a delete (1/f) there,
        standard, and a send (b'/f) into the destination, FIFO, b' = its batch chunks. Its
        message without a delay is one FIFO send instead of a standard one."""
        f = batch_fill
        forward_standard = (q.staged_batch_chunks + q.staged) / f - q.fifo_now_chunks
        destination_fifo = q.staged_batch_chunks / f + q.fifo_now_chunks
        batched_fifo = q.routed_chunks + (2 * q.cycle_batch_chunks - q.batch_chunks + q.cycles) / f
        # Parked at send: instead of its batched loop (first send, k passes), Scheduler's send
        # of `chunks` to the FIFO queue, then one batched hop: receive b/f, delete 1/f, and
        # the hand-over b/f to the standard destination (the same as without parking).
        loop_of_parked = (
            q.parked_chunks
            + (2 * q.parked_cycle_batch_chunks - q.parked_batch_chunks + q.parked_cycles) / f
        )
        parked_hop = q.parked_chunks + (q.parked_batch_chunks + q.parked) / f
        return cls(
            reference_ops=2 * q.routed_delay / cycle_seconds,
            cycles=q.cycles,
            exact_fifo=2 * q.cycle_chunks + q.cycles,
            exact_standard=q.chunks + q.staged_chunks + q.staged - q.fifo_now_chunks,
            batched_fifo=batched_fifo,
            batched_standard=q.batch_chunks / f + q.chunks - q.routed_chunks + forward_standard,
            scheduler_invocations=q.routed,
            # all at send, as its invocations: a FIFO destination's sends are FIFO requests
            scheduler_standard=q.chunks - q.fifo_chunks,
            parked_fifo=batched_fifo - loop_of_parked + parked_hop,
            parked_standard=q.batch_chunks / f + q.chunks - q.routed_chunks + forward_standard,
            parked_invocations=q.parked,
            registry_writes=REGISTRY_WRITE_UNITS * q.routed,
            registry_reads=REGISTRY_READ_UNITS_PER_HOP * q.cycles,
            # A parked message skips its loop and makes the last hop only.
            parked_registry_reads=REGISTRY_READ_UNITS_PER_HOP
            * (q.cycles - q.parked_cycles + q.parked),
            exact_destination_fifo=q.staged_chunks + q.fifo_now_chunks,
            batched_destination_fifo=destination_fifo,
            batched_staging=(q.staged_handover_batch_chunks + q.staged_batch_chunks + q.staged) / f
            + q.staged_direct_chunks,
            scheduler_fifo=q.fifo_chunks,
        )


def requests(
    delay: Any,
    size_bytes: Any,
    *,
    ops: Ops,
    cycle_seconds: int = 900,
    batch_fill: int = 10,
    chunk_bytes: int = 65_536,
    park_after: int | None = None,
) -> Requests:
    """Billed requests for one message under each model."""
    q = quantities(
        delay,
        size_bytes,
        ops=ops,
        cycle_seconds=cycle_seconds,
        batch_fill=batch_fill,
        chunk_bytes=chunk_bytes,
        park_after=NEVER if park_after is None else park_after,
    )
    return Requests.of(q, cycle_seconds=cycle_seconds, batch_fill=batch_fill)


def idle_polls_per_month(pollers: int = 1) -> int:
    """One 20 s long poll at a time per delay queue: ~130,000 requests a month each."""
    return pollers * SECONDS_PER_MONTH // quotas.LONG_POLL_SECONDS
