"""The delay worker's process: connections, discovery, liveness, lag, stats and metrics.

`Worker` drains `<queue>-delay.fifo` queues with asyncio (aioboto3): it opens the
connection pools (their sizes: `core/receive_loops.py`), finds the queues (or, with
SQSDELAY_QUEUES=*, every delay queue under the prefix, found and dropped while running),
and runs their receive loops (`aws/receive_driver.py`), which hand each batch to the step.
Around them it samples the event loop's lag, touches the liveness file, counts the backlog,
re-reads pause tags and flushes stats and metrics. `WorkerThread` runs one in a thread.

On SIGTERM/SIGINT no new poll starts; the polls in progress return and what they bring is
handled like any other batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aioboto3

from sqsdelay.aws.batch_runner import BatchRunner
from sqsdelay.aws.callers import AsyncCaller
from sqsdelay.aws.clients import LONG_POLL_READ_TIMEOUT, async_clients, client_kwargs, observe
from sqsdelay.aws.queue_urls import QueueResolver, check_queue
from sqsdelay.aws.receive_driver import LAG_SAMPLE_S, QueueLoops, ReceiveDriver
from sqsdelay.core import discovery, heartbeat, idle, receive_loops
from sqsdelay.core.backlog import Backlog
from sqsdelay.core.emf import EmfWriter
from sqsdelay.core.flows import Call, adrive
from sqsdelay.core.outcomes import Stats
from sqsdelay.core.queue_trios import QueueSpec, QueueTrio
from sqsdelay.errors import ConfigError, InvalidQueueName
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.aws.worker")
# How often the liveness file (SQSDELAY_LIVENESS_FILE) is touched; a health check allows 60 s.
LIVENESS_S = 5.0


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
        self.batches = BatchRunner(settings, self.resolver, delete=True, clock=monotonic)
        self.state = self.batches.state
        self.stats = self.state.stats
        self.metrics = EmfWriter(
            settings.metrics_namespace,
            enabled=settings.metrics == "emf",
            write=write_metrics,
            clock=clock,
        )
        self.backlog = Backlog(settings.max_native_delay_seconds * 1000)
        # How late the event loop runs (core.heartbeat), on the real monotonic clock: it
        # sizes the receive visibility and holds back receives.
        self._lag = heartbeat.Recent()
        named = [] if self.discovering else [_drained(self.resolver.trio(q)) for q in queues]
        self.driver = ReceiveDriver(
            settings,
            [QueueLoops(t) for trios in named for t in trios],
            concurrency=self.concurrency,
            discovering=self.discovering,
            resolver=self.resolver,
            batches=self.batches,
            backlog=self.backlog,
            lag=self._lag,
            clock=clock,
        )
        # The largest lag since the start (the demo's check allows for it): the hand-over
        # lateness metric reads the broker's clock through an offset sampled by reads that a
        # lagging loop makes late (one over a second late restarts the estimate, taken for
        # a clock jump), so under lag the metric reads low by about as much.
        self.max_lag_s = 0.0
        self._touch_warned = float("-inf")
        # When the worker logged `worker.started` (its clock): a message due before then is
        # handed over after it, so its lateness is reckoned from max(due, started_at).
        self.started_at: float | None = None

    @property
    def queues(self) -> list[QueueLoops]:
        """The queues being drained, with their loops."""
        return self.driver.queues

    def stop(self) -> None:
        """Stop receiving; polls in progress and work in hand are finished."""
        self.driver.stop()

    @property
    def caller(self) -> AsyncCaller:
        return self.driver.caller

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
        pools = receive_loops.pools(
            len(self.queues), self.concurrency, discovering=self.discovering
        )
        _allow_files(pools.open_files)
        polls = client_kwargs(
            self.settings,
            max_pool=pools.polls,
            read_timeout=LONG_POLL_READ_TIMEOUT,
            validate=False,
        )
        async with contextlib.AsyncExitStack() as stack:
            poller = await stack.enter_async_context(session.client("sqs", **polls))
            observe(self.stats, poller)
            clients = await async_clients(
                self.settings,
                session,
                stack,
                max_pool=pools.calls,
                validate=False,
                stats=self.stats,
            )
            self.driver.connect(
                AsyncCaller({"sqs": poller}, self.resolver),
                AsyncCaller(clients, self.resolver),
                clients["sqs"],
                polls=pools.polls,
            )
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
            stats_task = asyncio.create_task(self._report_stats())
            lag_task = asyncio.create_task(self._measure_lag())
            pause_task = asyncio.create_task(self._watch_pauses())
            async with asyncio.TaskGroup() as tg:
                self.driver.start(tg)
                if self.discovering:
                    tg.create_task(self._discovery_loop(tg))
            for task in (stats_task, lag_task, pause_task):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.flush_metrics()
        log.info("worker.stopped", **self.stats.as_dict())
        if self.driver.fatal is not None:
            raise self.driver.fatal
        return self.stats

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
        return self.driver.lag_seconds()

    # -- discovery (SQSDELAY_QUEUES=*) ------------------------------------------------------

    async def _discovery_loop(self, tg: asyncio.TaskGroup) -> None:
        """List the prefix's delay queues now and every SQSDELAY_DISCOVERY_INTERVAL_SECONDS;
        drain the new ones, drop the deleted ones. A prefix that matches nothing is said
        once, and looked at again."""
        said_empty = False
        while not self.driver.stopping:
            found = await self._list_delay_queues()
            if found is not None:
                await self._refresh(tg, found)
                if not found and not said_empty:
                    log.warning("discovery.empty", prefix=self.settings.queue_prefix)
                said_empty = not found
            await self.driver.wait_or_stop(self.settings.discovery_interval_seconds)

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
            self.driver.drop(current[name], "no longer listed")
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
        self.driver.add(tg, new)

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
    the hard limit (core.receive_loops.raised_file_limit). Fargate sets both to 65,535 today
    (the ECS API reference, Ulimit), but the soft limit was 1,024 on older platforms and is
    on many hosts."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    raised = receive_loops.raised_file_limit(needed, soft, hard, resource.RLIM_INFINITY)
    if raised is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))


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
