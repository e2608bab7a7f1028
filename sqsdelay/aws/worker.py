"""The delay worker: drains `<queue>-delay.fifo` queues with asyncio (aioboto3).

Each received batch is handed to the shared step (`core.step.handle`), which decides, parks,
sends, deletes and holds; this driver only makes the calls it asks for (`AsyncCaller`).
Only the originals whose send succeeded are deleted. Everything else stays in the delay
queue, out of sight for a backoff, until it succeeds.

On SIGTERM/SIGINT no new poll starts; the polls in progress return (the broker has already
handed them their messages, which would otherwise stay invisible for the whole visibility
timeout) and what they bring is handled like any other batch.

Longer than most files (about 580 lines): one receive loop and its life (start, the
configuration check, discovery, polls, pausing, stop), whose parts share its state.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aioboto3

from sqsdelay.aws.batch_runner import BatchRunner
from sqsdelay.aws.callers import AsyncCaller
from sqsdelay.aws.capacity import Capacity
from sqsdelay.aws.clients import (
    LONG_POLL_READ_TIMEOUT,
    MISSING_QUEUE_CODES,
    async_clients,
    client_kwargs,
    observe,
)
from sqsdelay.aws.emf import EmfWriter
from sqsdelay.aws.queue_urls import QueueResolver, check_queue
from sqsdelay.core import discovery, heartbeat, idle, quotas
from sqsdelay.core.backlog import Backlog
from sqsdelay.core.backoff import BackoffTimer
from sqsdelay.core.flows import Call, Fault, Flow, adrive, adrive_until_pause
from sqsdelay.core.metrics import RECEIVE_FAILURES
from sqsdelay.core.outcomes import Outcome, Stats
from sqsdelay.core.queue_trios import QueueSpec, QueueTrio
from sqsdelay.core.receive_loops import QueueDemand
from sqsdelay.core.received import SYSTEM_ATTRIBUTES, Received, from_boto
from sqsdelay.core.step import extend
from sqsdelay.errors import ConfigError, InvalidQueueName, ReceiveUnavailable, SqsDelayError
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.aws.worker")
# Per receive loop, in full batches' worth of messages: a batch that waits out its
# hand-overs' fractions of a second mostly sleeps, so this bounds memory, not work. Counted in
# messages, not batches: SQS's short batches (1..3 of 10) would fill a room of batches with a
# fifth of the messages.
PAUSING_BATCHES = 8
# How often the event loop's lag is sampled (core.heartbeat): a sleeper's wake-up, 20 a second.
LAG_SAMPLE_S = 0.05
# How often the liveness file (SQSDELAY_LIVENESS_FILE) is touched; a health check allows 60 s.
LIVENESS_S = 5.0


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


# Long polls and the calls of batches (sends, deletes, counts) have a connection pool each,
# so that polls waiting on a thousand queues never hold up a hand-over. Connections are made
# as they are needed, so a pool's size is a cap, not memory: with discovery, room for this
# many long polls (the queues that hold something, and the extra loops of busy ones) and
# this many calls at once.
DISCOVERY_POLLS = 2048
DISCOVERY_CALLS = 100


class Worker:
    """`clock` is the wall clock (each batch's local time, breakers, metric timestamps);
    `monotonic` times the step's budget and its waits, which a stepped wall clock must not
    shorten."""

    def __init__(
        self,
        settings: Settings,
        queues: Sequence[str],
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        concurrency: int | None = None,
        write_metrics: Callable[[str], object] | None = None,
    ) -> None:
        self.settings = settings
        self.concurrency = concurrency or settings.concurrency
        self._clock = clock
        self.resolver = QueueResolver(settings)
        # `*`: every delay queue under the prefix, found (and dropped) while running
        self.discovering = discovery.is_all(queues)
        self.queues = (
            []
            if self.discovering
            else [QueueLoops(t) for q in queues for t in _drained(self.resolver.trio(q))]
        )
        self.batches = BatchRunner(settings, self.resolver, delete=True, clock=monotonic)
        self.state = self.batches.state
        self.stats = self.state.stats
        self.metrics = EmfWriter(settings, write=write_metrics, clock=clock)
        self.backlog = Backlog(settings.max_native_delay_seconds * 1000)
        # Receives back off on their own: a working receive says nothing about sends.
        self.receive_breaker = BackoffTimer()
        self._stop = asyncio.Event()
        # Messages in batches finishing on their own after a pause (`_finish`), at most this
        # many at once.
        self._pausing = Capacity(self._pausing_room(len(self.queues)))
        # An empty delay queue is checked at this period instead of long-polled (core.idle).
        self._idle_period = idle.check_period(
            settings.max_native_delay_seconds, settings.idle_counts_lag_seconds
        )
        self._group: asyncio.TaskGroup | None = None
        self._fatal: SqsDelayError | None = None
        self._last_receive_ok = clock()
        self._client: Any = None
        self._caller: AsyncCaller | None = None
        self._poller: AsyncCaller | None = None
        self._polls = 0  # long polls the pool has room for (extra loops stay below it)
        # How late the event loop runs, and how long batches take (core.heartbeat), on the
        # real monotonic clock: they size the receive visibility and hold back receives.
        self._lag = heartbeat.Recent()
        # The largest lag since the start (the demo's check allows for it): the hand-over
        # lateness metric reads the broker's clock through an offset sampled by reads that a
        # lagging loop makes late (one over a second late restarts the estimate, taken for
        # a clock jump), so under lag the metric reads low by about as much.
        self.max_lag_s = 0.0
        self._touch_warned = float("-inf")
        self._extra = 0  # receive loops beyond each queue's first, over all queues
        # When the worker logged `worker.started` (its clock): a message due before then is
        # handed over after it, so its lateness is reckoned from max(due, started_at).
        self.started_at: float | None = None

    def stop(self) -> None:
        """Stop receiving; polls in progress and work in hand are finished."""
        self._stop.set()

    @property
    def caller(self) -> AsyncCaller:
        assert self._caller is not None, "the worker is not running"
        return self._caller

    async def run(self, *, handle_signals: bool = True) -> Stats:
        """Run until stopped; returns the statistics. Raises ReceiveUnavailable when receives
        keep failing for longer than SQSDELAY_MAX_RECEIVE_FAILURE_SECONDS (so that ECS
        replaces the task). Raises ConfigError at once when it cannot write its liveness
        file."""
        if self.settings.liveness_file is not None:
            first_touch(self.settings.liveness_file)
        loop = asyncio.get_running_loop()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.add_signal_handler(sig, self.stop)
        session = aioboto3.Session()
        if self.discovering:
            self._polls, pool = DISCOVERY_POLLS, DISCOVERY_CALLS
        else:
            # up to ten loops a queue's concurrency when its batches are short (a cap on
            # connections, made as they are needed, not memory)
            self._polls = len(self.queues) * self.concurrency * quotas.MAX_BATCH_ENTRIES
            pool = max(10, self._polls)
        _allow_files(self._polls + pool + 64)
        polls = client_kwargs(
            self.settings,
            max_pool=self._polls,
            read_timeout=LONG_POLL_READ_TIMEOUT,
            validate=False,
        )
        async with contextlib.AsyncExitStack() as stack:
            poller = await stack.enter_async_context(session.client("sqs", **polls))
            observe(self.stats, poller)
            self._poller = AsyncCaller({"sqs": poller}, self.resolver)
            clients = await async_clients(
                self.settings, session, stack, max_pool=pool, validate=False, stats=self.stats
            )
            self._client = clients["sqs"]
            self._caller = AsyncCaller(clients, self.resolver)
            for q in self.queues:  # a missing delay queue stops the start with its fix
                await adrive(self.resolver.lookup(q.trio.delay), self.caller)
            log.info(
                "worker.started",
                queues=[q.trio.delay for q in self.queues],
                discovery=self.settings.queue_prefix + "*" if self.discovering else None,
                concurrency=self.concurrency,
                max_native_delay_seconds=self.settings.max_native_delay_seconds,
            )
            self.started_at = self._clock()
            if self.discovering and not self.settings.queue_prefix:
                log.warning(
                    "discovery.whole_account",
                    detail="no SQSDELAY_QUEUE_PREFIX: this worker drains every delay queue of "
                    "the account in the Region, NServiceBus endpoints' included; set a prefix "
                    "to drain only yours",
                    region=self.settings.region,
                )
            self._last_receive_ok = self._clock()
            stats_task = asyncio.create_task(self._report_stats())
            lag_task = asyncio.create_task(self._measure_lag())
            pause_task = asyncio.create_task(self._watch_pauses())
            async with asyncio.TaskGroup() as tg:
                self._group = tg
                for q in self.queues:
                    self._spawn(tg, q)
                if self.discovering:
                    tg.create_task(self._discovery_loop(tg))
            for task in (stats_task, lag_task, pause_task):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.flush_metrics()
        log.info("worker.stopped", **self.stats.as_dict())
        if self._fatal is not None:
            raise self._fatal
        return self.stats

    def _spawn(self, tg: asyncio.TaskGroup, q: QueueLoops) -> None:
        q.loops += 1
        q.peak_loops = max(q.peak_loops, q.loops)
        first = q.loops == 1
        self._extra += not first
        tg.create_task(self._receive_loop(tg, q, first=first))

    async def _report_stats(self) -> None:
        while True:
            await asyncio.sleep(self.settings.stats_interval_seconds)
            await self._count_backlog()
            log.info(
                "worker.stats",
                offset_ms=self.state.offset.estimate(),
                loops={q.trio.destination: q.loops for q in self.queues},
                **self.stats.as_dict(),
            )
            self.flush_metrics()

    async def _watch_pauses(self) -> None:
        """Read the pause tag of every destination this worker holds messages for, once a
        period: a paused queue may have nothing visible, so no batch would read it, and on
        resume its held messages are released at once (core/pause.py)."""
        pauses = self.state.pauses
        while True:
            await asyncio.sleep(pauses.check_seconds)
            if pauses.holding():
                await adrive(self.batches.refresh_pauses(pauses.holding()), self.caller)

    def flush_metrics(self) -> None:
        now_ms = int(self._clock() * 1000)
        backlog = (self.backlog.visible_total(), self.backlog.due(now_ms))
        self.metrics.flush(self.stats.tally, self.state.offset.estimate(), backlog)

    async def _count_backlog(self) -> None:
        """The visible messages of the queues whose receives show a backlog (core.receive_loops);
        the others are kept up with and count 0 (core.backlog)."""
        busy = [q for q in self.queues if q.demand.backlogged]
        for q in self.queues:
            self.backlog.counted(q.trio.delay, 0)
        attribute = idle.COUNTS[0]  # ApproximateNumberOfMessages: the visible ones
        calls = [
            Call("sqs", "GetQueueAttributes", {"AttributeNames": [attribute]}, q.trio.delay)
            for q in busy
        ]
        for q, reply in zip(busy, await self.caller(calls) if calls else [], strict=True):
            if reply.fault is None:
                found = reply.response.get("Attributes", {})
                self.backlog.counted(q.trio.delay, idle.count(found, attribute))

    async def _wait_or_stop(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    async def _measure_lag(self) -> None:
        """Sample how late the event loop wakes a sleeper, every LAG_SAMPLE_S, and touch the
        liveness file every LIVENESS_S: only a loop that runs touches it."""
        touched = float("-inf")
        while True:
            asked = time.monotonic() + LAG_SAMPLE_S
            await asyncio.sleep(LAG_SAMPLE_S)
            now = time.monotonic()
            lag = max(0.0, now - asked)
            self._lag.add(now, lag)
            self.max_lag_s = max(self.max_lag_s, lag)
            if self.settings.liveness_file is not None and now - touched >= LIVENESS_S:
                touched = now
                self._touch(self.settings.liveness_file)

    def _touch(self, path: Path) -> None:
        try:
            path.touch()
        except OSError as exc:  # written at start, failing since: once a minute at most
            if self._clock() - self._touch_warned >= 60:
                self._touch_warned = self._clock()
                log.warning("worker.liveness_file_failed", path=str(path), error=str(exc))

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
            self._fatal = ReceiveUnavailable(
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

    # -- discovery (SQSDELAY_QUEUES=*) ------------------------------------------------------

    async def _discovery_loop(self, tg: asyncio.TaskGroup) -> None:
        """List the prefix's delay queues now and every SQSDELAY_DISCOVERY_INTERVAL_SECONDS;
        drain the new ones, drop the deleted ones. A prefix that matches nothing is said
        once, and looked at again."""
        said_empty = False
        while not self._stop.is_set():
            found = await self._list_delay_queues()
            if found is not None:
                await self._refresh(tg, found)
                if not found and not said_empty:
                    log.warning("discovery.empty", prefix=self.settings.queue_prefix)
                said_empty = not found
            await self._wait_or_stop(self.settings.discovery_interval_seconds)

    async def _list_delay_queues(self) -> list[str] | None:
        prefix = self.settings.queue_prefix
        urls: list[str] = []
        params: dict[str, Any] = {"MaxResults": 1000}
        if prefix:
            params["QueueNamePrefix"] = prefix
        while True:
            [reply] = await self.caller([Call("sqs", "ListQueues", params)])
            if reply.fault is not None:
                log.error("discovery.failed", code=reply.fault.code, detail=reply.fault.detail)
                return None
            urls += reply.response.get("QueueUrls", [])
            token = reply.response.get("NextToken")
            if not token:
                return discovery.delay_queues(urls, prefix)
            params = {**params, "NextToken": token}

    async def _refresh(self, tg: asyncio.TaskGroup, found: list[str]) -> None:
        current = {q.trio.delay: q for q in self.queues if not q.trio.forwards}
        added, removed = discovery.changes(current, found)
        for name in removed:
            self._drop(current[name], "no longer listed")
        new = []
        for name in added:
            try:
                trios = _drained(self.resolver.trio_of_delay_queue(name))
            except InvalidQueueName as exc:  # e.g. the delay queue of a refused destination
                problems = [str(exc)]
            else:
                problems = [p for t in trios for p in await self._problems(t)]
            if problems:  # said again at every refresh until it is fixed
                log.warning("queue.skipped", queue=name, problems=problems)
                continue
            new += [QueueLoops(t) for t in trios]
        # all of them before any loop starts: a busy queue's extra loops leave them room
        self.queues += new
        self._pausing.resize(self._pausing_room(len(new)))  # room for their pausing batches
        for q in new:
            log.info("queue.added", queue=q.trio.delay)
            self._spawn(tg, q)

    def _pausing_room(self, queues: int) -> int:
        return PAUSING_BATCHES * quotas.MAX_BATCH_ENTRIES * self.concurrency * queues

    @property
    def pausing_room(self) -> int:
        """How many messages may sit in batches finishing on their own at once
        (PAUSING_BATCHES full batches per loop)."""
        return self._pausing.size

    async def _problems(self, t: QueueTrio) -> list[str]:
        """What `sqsdelay install --check` says of a found delay queue, or of its FIFO
        destination's staging queue (warnings aside)."""
        call = Call("sqs", "GetQueueAttributes", {"AttributeNames": ["All"]}, t.delay)
        [reply] = await self.caller([call])
        if reply.fault is not None:
            return [f"its attributes could not be read ({reply.fault.code})"]
        spec = QueueSpec("staging" if t.forwards else "delay", t.delay, t.requested)
        found = check_queue(spec, reply.response.get("Attributes", {}), self.settings)
        return [p.problem for p in found if not p.warning]

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
            await self._wait_or_stop(period)

    def _drop(self, q: QueueLoops, reason: str) -> None:
        """Stop draining a destination: its delay queue and a FIFO one's staging queue go
        together (a refresh adds them again together, once both pass the checks)."""
        for other in [o for o in self.queues if o.trio.destination == q.trio.destination]:
            other.gone = True
            self.queues.remove(other)
            self._pausing.resize(-self._pausing_room(1))  # its batches in hand finish as usual
            self.resolver.forget(other.trio.delay)
            self.backlog.forget(other.trio.delay)
            log.info("queue.removed", queue=other.trio.delay, reason=reason)

    async def _receive_loop(self, tg: asyncio.TaskGroup, q: QueueLoops, *, first: bool) -> None:
        """The first loop of a queue polls it for as long as it is drained, beginning with its
        counts (core.idle); the others are extra loops for a backlog. A receive that brought
        messages, however few (SQS returns short batches while more wait), starts another,
        within the concurrency, while the event loop keeps up and unless an extra loop of the
        queue polled in vain lately (core.receive_loops). An extra loop ends when a receive
        comes back empty, or before its next one once any loop of the queue has (each extra
        loop polling once more, into an empty queue, was most of the empty receives of a
        draining backlog), or while the event loop lags."""
        empty = first  # the first loop starts as if its last receive had brought nothing
        try:
            while not self._stop.is_set() and not q.gone:
                if not first and q.demand.drained:
                    return  # another loop's receive found the backlog drained: no empty poll
                # a staging queue takes DelaySeconds under 900 s: long-polled, even empty
                if empty and self._idle_period is not None and not q.trio.forwards:
                    await self._wait_while_empty(q, self._idle_period)
                    if self._stop.is_set() or q.gone:
                        break
                if not first and self._lagging():
                    self.stats.events["receive_held_back"] += 1
                    return  # backpressure: fewer batches in hand while the loop lags
                visibility = self.receive_visibility(q)
                assert self._poller is not None, "the worker is not running"
                [reply] = await self._poller([self._receive_call(q, visibility)])
                if reply.fault is not None:
                    if self.discovering and reply.fault.code in MISSING_QUEUE_CODES:
                        self._drop(q, "deleted")  # once: not a receive failure to retry
                        return
                    await self._wait_or_stop(self._receive_failed(q, reply.fault))
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
        """An extra loop for a busy queue, within its concurrency (counted in full batches:
        core.receive_loops), and only while the polls' pool has a connection to spare beyond
        one per queue (and an eighth kept for queues found later): a busy queue takes spare
        connections, never another queue's."""
        reserve = self._polls // 8 if self.discovering else 0
        spare = self._polls - len(self.queues) - self._extra - reserve
        allowed = q.demand.loops_allowed(self.concurrency)
        calm = not self._lagging()
        return q.loops < allowed and spare > 0 and calm and not self._stop.is_set()

    async def _process(self, q: QueueLoops, raw: list[dict[str, Any]], visibility: int) -> None:
        trio = q.trio
        received = [from_boto(m) for m in raw]
        outcome = Outcome()
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
        outcome: Outcome,
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


def _drained(t: QueueTrio) -> list[QueueTrio]:
    """The trios whose queues a worker drains for a destination: its delay queue, and a
    FIFO destination's staging queue."""
    return [t, t.forwarding()] if t.fifo else [t]


def first_touch(path: Path) -> None:
    """Touch the liveness file once, before anything else: a worker that cannot write it
    would run for minutes until the health check finds no file, and be replaced in a loop."""
    try:
        path.touch()
    except OSError as exc:
        uid = os.geteuid() if hasattr(os, "geteuid") else "?"
        log.error("worker.liveness_file_unwritable", path=str(path), uid=uid, error=str(exc))
        raise ConfigError(
            f"cannot write the liveness file SQSDELAY_LIVENESS_FILE={path} as UID {uid} "
            f"({exc.strerror or exc}): the health check that reads it would fail and the task "
            "be replaced in a loop. Make its directory exist and writable by this user: in "
            "ECS, mount the task volume at the directory the image declares as VOLUME and "
            "owns (/run/sqsdelay, infra/worker-ecs.yaml), as Fargate makes any other volume "
            "root-owned 0755; or unset SQSDELAY_LIVENESS_FILE where no health check reads it"
        ) from None


def _allow_files(needed: int) -> None:
    """Raise the soft limit of open files towards `needed` (each connection is one), within
    the hard limit. Fargate sets both to 65,535 today (the ECS API reference, Ulimit), but
    the soft limit was 1,024 on older platforms and is on many hosts."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


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


class WorkerThread:
    """Runs a Worker on its own event loop in a background thread (demo, tests, embedding).

    `with WorkerThread(settings, ["orders"]) as running: ...` stops it on exit and re-raises
    anything the worker raised.
    """

    def __init__(self, settings: Settings, queues: Sequence[str], **kwargs: Any) -> None:
        import threading

        self.worker = Worker(settings, queues, **kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="sqsdelay-worker", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self.worker.run(handle_signals=False))
        except BaseException as exc:  # re-raised by stop()
            self.error = exc

    def start(self) -> WorkerThread:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30) -> None:
        self._loop.call_soon_threadsafe(self.worker.stop)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"worker did not stop within {timeout} s")
        if self.error is not None:
            raise self.error

    def __enter__(self) -> WorkerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
