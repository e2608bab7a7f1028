"""The worker's receive loops: each delay queue's long polls and the batches they hand the step.

Each received batch is handed to the shared step (`core.step.handle`), which decides, parks,
sends, deletes and holds; this driver only makes the calls it asks for (`AsyncCaller`).
Only the originals whose send succeeded are deleted. Everything else stays in the delay
queue, out of sight for a backoff, until it succeeds. How many loops a queue gets is
`core/receive_loops.py`'s rule; the process around the loops (connections, discovery,
liveness, stats) is `aws/worker.py`'s.

One receive loop and its life (the idle checks, polls, a batch in hand and its heartbeat,
pausing, stop), whose parts share its state.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqsdelay.aws.batch_runner import BatchRunner
from sqsdelay.aws.callers import AsyncCaller
from sqsdelay.aws.clients import MISSING_QUEUE_CODES
from sqsdelay.aws.queue_urls import QueueResolver
from sqsdelay.core import heartbeat, idle, quotas, receive_loops
from sqsdelay.core.backlog import Backlog
from sqsdelay.core.backoff import CircuitBreaker
from sqsdelay.core.capacity import Capacity
from sqsdelay.core.flows import Call, Fault, Flow, adrive, adrive_until_pause
from sqsdelay.core.metrics import RECEIVE_FAILURES
from sqsdelay.core.outcomes import BatchEnds
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.core.receive_loops import QueueDemand
from sqsdelay.core.received import SYSTEM_ATTRIBUTES, Received, from_boto
from sqsdelay.core.step import extend
from sqsdelay.errors import ReceiveUnavailable, SqsDelayError
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.aws.worker")  # the worker's events, whichever file logs them
# How often the event loop's lag is sampled (core.heartbeat; aws/worker.py samples it): a
# sleeper's wake-up, 20 a second. A heartbeat's first beat is never sooner than one sample.
LAG_SAMPLE_S = 0.05


@dataclass
class QueueLoops:
    """One destination's queues and the receive loops draining its delay queue."""

    trio: QueueTrio
    loops: int = 0
    peak_loops: int = 0
    gone: bool = False  # discovery dropped it: its loops end after their current poll
    # What its receives showed: drained (an empty one), and how many loops it may have
    # (core.receive_loops: a short batch is no sign of a drained queue on SQS)
    demand: QueueDemand = field(default_factory=QueueDemand)
    # How long its batches took lately (core.heartbeat): its own, so that one destination
    # whose sends are slow does not lengthen every queue's receive visibility.
    batch_seconds: heartbeat.Recent = field(default_factory=heartbeat.Recent)
    counted_at: float = float("-inf")  # when its counts were last checked (core.idle)


class ReceiveDriver:
    """The receive loops of `queues` (a list the driver keeps: `add`, `drop`). `lag` is the
    event loop's recent lag, which the worker samples; `clock` is the wall clock.

    On `stop()` no new poll starts; the polls in progress return (the broker has already
    handed them their messages, which would otherwise stay invisible for the whole
    visibility timeout) and what they bring is handled like any other batch."""

    def __init__(
        self,
        settings: Settings,
        queues: list[QueueLoops],
        *,
        concurrency: int,
        discovering: bool,
        resolver: QueueResolver,
        batches: BatchRunner,
        backlog: Backlog,
        lag: heartbeat.Recent,
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.queues = queues
        self.concurrency = concurrency
        self.discovering = discovering
        self.resolver = resolver
        self.batches = batches
        self.state = batches.state
        self.stats = self.state.stats
        self.backlog = backlog
        self._lag = lag
        self._clock = clock
        # Receives back off on their own: a working receive says nothing about sends.
        self.receive_breaker = CircuitBreaker()
        self._stop = asyncio.Event()
        # Set when receives failed for too long: the worker raises it once stopped.
        self.fatal: SqsDelayError | None = None
        # Messages in batches finishing on their own after a pause (`_finish`), at most this
        # many at once.
        self._pausing = Capacity(receive_loops.pausing_room(concurrency, len(queues)))
        # An empty delay queue is checked at this period instead of long-polled (core.idle).
        self._idle_period = idle.check_period(
            settings.max_native_delay_seconds, settings.idle_counts_lag_seconds
        )
        self._group: asyncio.TaskGroup | None = None
        self._last_receive_ok = clock()
        self._client: Any = None
        self._caller: AsyncCaller | None = None
        self._poller: AsyncCaller | None = None
        self._polls = 0  # long polls the pool has room for (extra loops stay below it)
        self._extra = 0  # receive loops beyond each queue's first, over all queues

    def connect(self, poller: AsyncCaller, caller: AsyncCaller, client: Any, polls: int) -> None:
        """The callers the loops use: `poller` for long polls (a pool of `polls`
        connections), `caller` for the batches' calls; `client` is the SQS client whose
        region names the park targets."""
        self._poller, self._caller, self._client, self._polls = poller, caller, client, polls

    @property
    def caller(self) -> AsyncCaller:
        assert self._caller is not None, "the worker is not running"
        return self._caller

    def stop(self) -> None:
        """Stop receiving; polls in progress and work in hand are finished."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    async def wait_or_stop(self, seconds: float) -> None:
        """Wait `seconds`, or until stopped."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    def start(self, tg: asyncio.TaskGroup) -> None:
        """Start the first loop of each queue in `tg`, which later loops join."""
        self._group = tg
        self._last_receive_ok = self._clock()
        for q in self.queues:
            self._spawn(tg, q)

    def add(self, tg: asyncio.TaskGroup, new: list[QueueLoops]) -> None:
        """Drain `new` queues too, with room for their pausing batches."""
        # all of them before any loop starts: a busy queue's extra loops leave them room
        self.queues += new
        self._pausing.resize(receive_loops.pausing_room(self.concurrency, len(new)))
        for q in new:
            log.info("queue.added", queue=q.trio.delay)
            self._spawn(tg, q)

    def drop(self, q: QueueLoops, reason: str) -> None:
        """Stop draining a destination: its delay queue and a FIFO one's staging queue go
        together (a refresh adds them again together, once both pass the checks)."""
        for other in [o for o in self.queues if o.trio.destination == q.trio.destination]:
            other.gone = True
            self.queues.remove(other)
            # its batches in hand finish as usual
            self._pausing.resize(-receive_loops.pausing_room(self.concurrency, 1))
            self.resolver.forget(other.trio.delay)
            self.backlog.forget(other.trio.delay)
            log.info("queue.removed", queue=other.trio.delay, reason=reason)

    @property
    def pausing_room(self) -> int:
        """How many messages may sit in batches finishing on their own at once
        (core.receive_loops.pausing_room)."""
        return self._pausing.size

    def _spawn(self, tg: asyncio.TaskGroup, q: QueueLoops) -> None:
        q.loops += 1
        q.peak_loops = max(q.peak_loops, q.loops)
        first = q.loops == 1
        self._extra += not first
        tg.create_task(self._receive_loop(tg, q, first=first))

    def lag_seconds(self) -> float:
        """The event loop's largest recent lag."""
        return self._lag.largest(time.monotonic())

    def receive_visibility(self, q: QueueLoops) -> int:
        """What a receive of `q` asks for now: the short visibility, or more while the loop
        lags or its batches take long (core.heartbeat)."""
        now = time.monotonic()
        return heartbeat.receive_visibility(
            self.settings.receive_visibility(),
            self.settings.visibility_timeout_seconds,
            self._lag.largest(now),
            q.batch_seconds.largest(now),
        )

    def _lagging(self) -> bool:
        """Whether the event loop lags too much for more batches in hand (backpressure: no
        extra loop starts, and the extra ones end; each queue's first loop goes on, so a loop
        slowed by the machine rather than by its own work still moves every queue)."""
        return heartbeat.lagging(self.lag_seconds(), self.settings.receive_visibility())

    def _receive_call(self, q: QueueLoops, visibility: int) -> Call:
        params = {
            "MaxNumberOfMessages": quotas.MAX_BATCH_ENTRIES,
            "WaitTimeSeconds": self.settings.wait_time_seconds,
            "VisibilityTimeout": visibility,
            "MessageAttributeNames": ["All"],
            "MessageSystemAttributeNames": list(SYSTEM_ATTRIBUTES),
        }
        # A deadline of its own: botocore's read timeout bounds one attempt only, and three
        # attempts of a stalled poll (30 s each) outlasted ECS's stop timeout (75 s).
        deadline = self.settings.receive_deadline_seconds()
        return Call("sqs", "ReceiveMessage", params, q.trio.delay, deadline)

    def _receive_failed(self, q: QueueLoops, fault: Fault) -> float:
        """Back off after a failed receive; give up when receives fail for too long."""
        now = self._clock()
        failing_for = now - self._last_receive_ok
        if failing_for > self.settings.max_receive_failure_seconds:
            self.fatal = ReceiveUnavailable(
                f"receives from {q.trio.delay!r} have failed for {failing_for:.0f} s "
                f"(last error {fault.code}); exiting so that the service replaces this worker "
                "(SQSDELAY_MAX_RECEIVE_FAILURE_SECONDS)"
            )
            log.error("worker.unhealthy", queue=q.trio.delay, code=fault.code, seconds=failing_for)
            self.stop()
            return 0.0
        wait = self.receive_breaker.failure(q.trio.delay, now)
        self.stats.tally.count(q.trio.destination, RECEIVE_FAILURES)
        log.error(
            "queue.receive_failed", queue=q.trio.delay, code=fault.code, retry_in_seconds=wait
        )
        return wait

    async def _wait_while_empty(self, q: QueueLoops, period: float) -> None:
        """An empty delay queue is checked every `period` seconds, not long-polled, until its
        counts show something (`core.idle`: nothing in it can be visible sooner). A queue
        that holds something is checked again after a period of long polls, not after each
        empty one: a queue of far-off delays costs its long polls and one check a period."""
        if self._clock() - q.counted_at < period:
            return  # checked lately and it held something: long-poll
        call = Call(
            "sqs", "GetQueueAttributes", {"AttributeNames": list(idle.COUNTS)}, q.trio.delay
        )
        while not self._stop.is_set() and not q.gone:
            q.counted_at = self._clock()
            [reply] = await self.caller([call])
            if reply.fault is not None or idle.holds_something(
                reply.response.get("Attributes", {})
            ):
                return  # something to poll for, or no answer: long-poll as without the rule
            await self.wait_or_stop(period)

    async def _receive_loop(self, tg: asyncio.TaskGroup, q: QueueLoops, *, first: bool) -> None:
        """The first loop of a queue polls it for as long as it is drained, beginning with its
        counts (core.idle); the others are extra loops for a backlog. A receive that brought
        messages, however few (SQS returns short batches while more wait), starts another
        while there is room for one (core.receive_loops.room_for_a_loop). An extra loop ends
        when a receive comes back empty, or before its next receive by
        core.receive_loops.extra_loop_ends."""
        empty = first  # the first loop starts as if its last receive had brought nothing
        try:
            while not self._stop.is_set() and not q.gone:
                if not first:
                    ends = receive_loops.extra_loop_ends(q.demand, lagging=self._lagging())
                    if ends == "lagging":
                        self.stats.events["receive_held_back"] += 1
                    if ends is not None:
                        return
                # a staging queue takes DelaySeconds under 900 s: long-polled, even empty
                # (only a first loop gets here empty: an extra one ends on an empty receive)
                if empty and self._idle_period is not None and not q.trio.forwards:
                    await self._wait_while_empty(q, self._idle_period)
                    if self._stop.is_set() or q.gone:
                        break
                visibility = self.receive_visibility(q)
                assert self._poller is not None, "the worker is not running"
                [reply] = await self._poller([self._receive_call(q, visibility)])
                if reply.fault is not None:
                    if self.discovering and reply.fault.code in MISSING_QUEUE_CODES:
                        self.drop(q, "deleted")  # once: not a receive failure to retry
                        return
                    await self.wait_or_stop(self._receive_failed(q, reply.fault))
                    continue
                self._last_receive_ok = self._clock()
                self.receive_breaker.success(q.trio.delay)
                messages: list[dict[str, Any]] = list(reply.response.get("Messages", []))
                q.demand.received(len(messages), time.monotonic())
                if q.demand.backlogged and self._room_for_a_loop(q):
                    self._spawn(tg, q)  # more may be waiting: poll in parallel
                empty = not messages
                if messages:
                    await self._process(q, messages, visibility)
                elif not first:  # idle: back to a single long poll per queue
                    q.demand.extra_loop_found_it_empty(
                        time.monotonic(), self.settings.wait_time_seconds
                    )
                    return
        finally:
            q.loops -= 1
            self._extra -= not first

    def _room_for_a_loop(self, q: QueueLoops) -> bool:
        """core.receive_loops.room_for_a_loop, and never once stopping."""
        room = receive_loops.room_for_a_loop(
            q.demand,
            loops=q.loops,
            concurrency=self.concurrency,
            polls=self._polls,
            queues=len(self.queues),
            extra=self._extra,
            discovering=self.discovering,
            lagging=self._lagging(),
        )
        return room and not self._stop.is_set()

    async def _process(self, q: QueueLoops, raw: list[dict[str, Any]], visibility: int) -> None:
        trio = q.trio
        received = [from_boto(m) for m in raw]
        outcome = BatchEnds()
        started = time.monotonic()
        beat = asyncio.create_task(
            self._keep_hidden(trio, received, outcome, visibility, in_hand=started)
        )
        try:
            flow = self.batches.flow(
                received,
                trio,
                self._client,
                local_ms=int(self._clock() * 1000),
                deadline=self.batches.clock() + self.settings.batch_budget_seconds(),
                outcome=outcome,
            )
            pending = await adrive_until_pause(flow, self.caller)
            # its requeues were sent: they come back one cycle from now (core.backlog)
            now_ms = int(self._clock() * 1000)
            self.backlog.requeued(now_ms, self.stats.events["delay.requeued"])
            if pending is not None:  # hand-overs waiting out their fraction of a second
                if self._pausing.try_acquire(len(raw)):
                    assert self._group is not None, "the worker is not running"
                    finish = self._finish(flow, pending, q, len(raw), beat, started)
                    try:
                        self._group.create_task(finish)
                    except RuntimeError:  # the group is shutting down: finish here
                        finish.close()
                        self._pausing.release(len(raw))
                        await adrive(flow, self.caller, pending=pending)
                    else:
                        return
                # No room: this loop finishes the batch itself and receives nothing more
                # until it is done (waiting for room instead held its hand-overs past due).
                await adrive(flow, self.caller, pending=pending)
        except Exception:  # a fault of ours: the batch comes back after its visibility timeout
            log.exception("batch.failed", queue=trio.delay, count=len(raw))
        await self._done(beat, started, q)

    async def _done(self, beat: asyncio.Task[None], started: float, q: QueueLoops) -> None:
        """A batch is out of hand: its heartbeat stops, and its time sizes the next
        receives' visibility (core.heartbeat)."""
        await _stopped(beat)
        now = time.monotonic()
        q.batch_seconds.add(now, now - started)

    async def _finish(
        self,
        flow: Flow[Any],
        pending: list[Call],
        q: QueueLoops,
        n: int,
        beat: asyncio.Task[None],
        started: float,
    ) -> None:
        """The rest of a batch after its first pause, while its loop polls again: the waiting
        hand-overs, then the deletes (and backoffs) of the whole batch. Its requeues were sent
        before the pause; SQS keeps each from being received until its original is deleted
        (one message group per message)."""
        try:
            await adrive(flow, self.caller, pending=pending)
        except Exception:
            log.exception("batch.failed", queue=q.trio.delay, count=n)
        finally:
            try:
                await self._done(beat, started, q)
            finally:  # even when cancelled: the room is given back on every path
                self._pausing.release(n)

    async def _keep_hidden(
        self,
        trio: QueueTrio,
        received: list[Received],
        outcome: BatchEnds,
        short: int,
        *,
        in_hand: float,
    ) -> None:
        """The batch's heartbeat: received with a short visibility, a batch still in hand at
        half of it, less the loop's recent lag, is extended to the visibility timeout (again
        at half of that, while it lasts). Most batches end before the first beat and cost
        nothing. A failed extension is retried sooner; if the message comes back meanwhile,
        the copy is released (the step's in-hand set) and the registry claim keeps other
        workers from handing it over.

        The first beat counts from `in_hand` (monotonic), when the receive's answer was
        read, not from when this task first runs: on a lagging loop that is one lag later,
        and the broker's clock has been running since before the answer (core.heartbeat)."""
        full = self.settings.visibility_timeout_seconds
        if short >= full:
            return
        since = time.monotonic() - in_hand
        wait = heartbeat.first_beat_in(short, self.lag_seconds(), since, LAG_SAMPLE_S)
        timeout = min(self.settings.call_timeout_seconds, short / 2)
        warned = False
        while True:  # until cancelled (the caller re-raises a cancellation wait_for lost)
            await asyncio.sleep(wait)
            flow = extend(trio.delay, received, outcome, full, self.state, timeout)
            asked, failed = await adrive(flow, self.caller)
            if not asked:
                return
            self.stats.events["visibility_extended"] += asked - failed
            if failed:
                self.stats.events["extend_failed"] += failed
                if not warned:  # once per batch: under overload every beat may fail
                    log.warning("delay.extend_failed", queue=trio.delay, count=failed)
                    warned = True
            lag = self.lag_seconds()
            wait = heartbeat.retry_in(short, lag, LAG_SAMPLE_S) if failed else full / 2


def _cancelling() -> bool:
    """Whether this task was asked to stop."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if _cancelling():  # this task is being cancelled too: do not swallow that
            raise
