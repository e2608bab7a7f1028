"""The delay worker: drains `<queue>-delay.fifo` queues with asyncio (aioboto3).

Each received batch goes through the pure decision (`decision.decide`) and the shared
dispatch step (`dispatch.Dispatch`); only the originals whose send succeeded are deleted.
Everything else stays in the delay queue, out of sight for a backoff, until it succeeds.

On SIGTERM/SIGINT no new poll starts; the polls in progress return (the broker has already
handed them their messages, which would otherwise stay invisible for the whole visibility
timeout) and what they bring is handled like any other batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aioboto3
from botocore.exceptions import BotoCoreError, ClientError

from sqsdelay import limits, schedules
from sqsdelay.backoff import BackoffTimer
from sqsdelay.clients import LONG_POLL_READ_TIMEOUT, client_kwargs, error_code, scheduler_kwargs
from sqsdelay.clock import ClockOffset
from sqsdelay.dispatch import Dispatch, ParkStep, Stats
from sqsdelay.errors import ReceiveUnavailable, SqsDelayError, SqsOperationError
from sqsdelay.failures import FailureLog
from sqsdelay.logs import get_logger
from sqsdelay.parking import ParkTarget
from sqsdelay.processing import SYSTEM_ATTRIBUTES, Outgoing, decide_batch, from_boto, limits_of
from sqsdelay.queues import QueueResolver, QueueTrio, park_target
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.worker")
_AWS_ERRORS = (ClientError, BotoCoreError, OSError, asyncio.TimeoutError)


@dataclass
class QueueLoops:
    """One destination's queues and the receive loops draining its delay queue."""

    trio: QueueTrio
    loops: int = 0
    peak_loops: int = 0


class Worker:
    def __init__(
        self,
        settings: Settings,
        queues: Sequence[str],
        *,
        clock: Callable[[], float] = time.time,
        concurrency: int | None = None,
    ) -> None:
        self.settings = settings
        self.concurrency = concurrency or settings.concurrency
        self._clock = clock
        self._limits = limits_of(settings)
        self.resolver = QueueResolver(settings)
        self.queues = [QueueLoops(self.resolver.trio(q)) for q in queues]
        self.offset = ClockOffset()
        self.breaker = BackoffTimer()
        self.failures = FailureLog()
        self.stats = Stats()
        self._stop = asyncio.Event()
        self._fatal: SqsDelayError | None = None
        self._last_receive_ok = clock()
        self._client: Any = None
        self._scheduler: Any = None  # set when SQSDELAY_PARKING=scheduler
        self._park_targets: dict[str, ParkTarget] = {}

    def stop(self) -> None:
        """Stop receiving; polls in progress and work in hand are finished."""
        self._stop.set()

    async def _call(self, api: str, **kwargs: Any) -> Any:
        method = getattr(self._client, "_".join(_snake(api)))
        if api == "ReceiveMessage":  # bounded by WaitTimeSeconds and the read timeout
            return await method(**kwargs)
        return await asyncio.wait_for(method(**kwargs), self.settings.call_timeout_seconds)

    async def run(self, *, handle_signals: bool = True) -> Stats:
        """Run until stopped. Raises ReceiveUnavailable when receives keep failing for longer
        than SQSDELAY_MAX_RECEIVE_FAILURE_SECONDS (so that ECS replaces the task)."""
        loop = asyncio.get_running_loop()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.add_signal_handler(sig, self.stop)
        session = aioboto3.Session()
        pool = max(10, len(self.queues) * self.concurrency * 2)
        kwargs = client_kwargs(self.settings, max_pool=pool, read_timeout=LONG_POLL_READ_TIMEOUT)
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(session.client("sqs", **kwargs))
            self._client = client
            self.stats.attach(client)
            if self.settings.parking == "scheduler":
                self._scheduler = await stack.enter_async_context(
                    session.client("scheduler", **scheduler_kwargs(self.settings, max_pool=pool))
                )
                self.stats.attach(self._scheduler)
            for q in self.queues:  # a missing delay queue stops the start with its fix
                await self.resolver.aurl(client, q.trio.delay)
            log.info(
                "worker.started",
                queues=[q.trio.delay for q in self.queues],
                concurrency=self.concurrency,
                max_native_delay_seconds=self.settings.max_native_delay_seconds,
            )
            self._last_receive_ok = self._clock()
            stats_task = asyncio.create_task(self._report_stats())
            async with asyncio.TaskGroup() as tg:
                for q in self.queues:
                    self._spawn(tg, q)
            stats_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stats_task
        log.info("worker.stopped", **self.stats.as_dict())
        if self._fatal is not None:
            raise self._fatal
        return self.stats

    def _spawn(self, tg: asyncio.TaskGroup, q: QueueLoops) -> None:
        q.loops += 1
        q.peak_loops = max(q.peak_loops, q.loops)
        tg.create_task(self._receive_loop(tg, q, first=q.loops == 1))

    async def _report_stats(self) -> None:
        while True:
            await asyncio.sleep(self.settings.stats_interval_seconds)
            log.info(
                "worker.stats",
                offset_ms=self.offset.estimate(),
                loops={q.trio.destination: q.loops for q in self.queues},
                **self.stats.as_dict(),
            )

    async def _wait_or_stop(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    async def _receive(self, q: QueueLoops) -> list[dict[str, Any]]:
        resp = await self._call(
            "ReceiveMessage",
            QueueUrl=await self.resolver.aurl(self._client, q.trio.delay),
            MaxNumberOfMessages=limits.MAX_BATCH_ENTRIES,
            WaitTimeSeconds=self.settings.wait_time_seconds,
            VisibilityTimeout=self.settings.visibility_timeout_seconds,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=list(SYSTEM_ATTRIBUTES),
        )
        messages: list[dict[str, Any]] = resp.get("Messages", [])
        return messages

    def _receive_failed(self, q: QueueLoops, exc: Exception) -> float:
        """Back off after a failed receive; give up when receives fail for too long."""
        now = self._clock()
        failing_for = now - self._last_receive_ok
        code = exc.code if isinstance(exc, SqsOperationError) else error_code(exc)
        if failing_for > self.settings.max_receive_failure_seconds:
            self._fatal = ReceiveUnavailable(
                f"receives from {q.trio.delay!r} have failed for {failing_for:.0f} s "
                f"(last error {code}); exiting so that the service replaces this worker "
                "(SQSDELAY_MAX_RECEIVE_FAILURE_SECONDS)"
            )
            log.error("worker.unhealthy", queue=q.trio.delay, code=code, seconds=failing_for)
            self.stop()
            return 0.0
        wait = self.breaker.failure(q.trio.delay, now)
        log.error("queue.receive_failed", queue=q.trio.delay, code=code, retry_in_seconds=wait)
        return wait

    async def _receive_loop(self, tg: asyncio.TaskGroup, q: QueueLoops, *, first: bool) -> None:
        try:
            while not self._stop.is_set():
                try:
                    messages = await self._receive(q)
                except (*_AWS_ERRORS, SqsOperationError) as exc:
                    await self._wait_or_stop(self._receive_failed(q, exc))
                    continue
                self._last_receive_ok = self._clock()
                self.breaker.success(q.trio.delay)
                full = len(messages) == limits.MAX_BATCH_ENTRIES
                if full and q.loops < self.concurrency and not self._stop.is_set():
                    self._spawn(tg, q)  # there is a backlog: poll in parallel
                if messages:
                    started = self._clock()
                    await self._process(q.trio, messages, int(started * 1000))
                    took = self._clock() - started
                    if took > self.settings.visibility_timeout_seconds / 2:
                        # Near the visibility timeout a message can reappear while its batch
                        # is still in hand, and a hand-over would then be delivered twice.
                        log.warning(
                            "worker.slow_batch",
                            queue=q.trio.delay,
                            seconds=round(took, 2),
                            visibility_timeout_seconds=self.settings.visibility_timeout_seconds,
                        )
                elif not first:
                    return  # idle: back to a single long poll per queue
        finally:
            q.loops -= 1

    async def _process(self, trio: QueueTrio, raw: list[dict[str, Any]], local_ms: int) -> None:
        outs = decide_batch(
            [from_boto(m) for m in raw],
            local_ms=local_ms,
            offset=self.offset,
            lim=self._limits,
            source_queue=trio.delay,
            failures=self.failures,
        )
        park = ParkStep(
            outs,
            target=await self._park_target(trio),
            trio=trio,
            breaker=self.breaker,
            stats=self.stats,
            now=self._clock(),
        )
        for out, request in park.todo:
            try:
                error, existing = await asyncio.wait_for(
                    schedules.acreate(self._scheduler, request),
                    2 * self.settings.call_timeout_seconds,
                )
            except TimeoutError as exc:
                error, existing = exc, None
            park.settle(out, request, error, self._clock(), existing)
        d = Dispatch(
            park.rest,
            trio=trio,
            breaker=self.breaker,
            failures=self.failures,
            stats=self.stats,
            now=self._clock(),
            max_bytes=self.settings.max_message_bytes,
        )
        for batch in d.batches:
            try:
                url = await self.resolver.aurl(self._client, batch.queue)
                resp = await self._call("SendMessageBatch", QueueUrl=url, Entries=batch.entries())
            except SqsOperationError as exc:
                d.failed(batch, exc, self._clock())
                continue
            except _AWS_ERRORS as exc:
                d.failed(
                    batch, self.resolver.error(exc, "SendMessageBatch", batch.queue), self._clock()
                )
                continue
            d.settled(batch, resp)
        await self._delete(trio, d.sent + park.parked)
        for entries in d.hold_entries():
            await self._batch_call(
                "ChangeMessageVisibilityBatch", trio, entries, "delay.backoff_failed"
            )

    async def _park_target(self, trio: QueueTrio) -> ParkTarget | None:
        """None when parking is off or its queues cannot be looked up (then: the loop)."""
        if self._scheduler is None:
            return None
        if trio.delay not in self._park_targets:
            try:
                url = await self.resolver.aurl(self._client, trio.delay)
                error_url = await self.resolver.aurl(self._client, trio.error)
            except (*_AWS_ERRORS, SqsOperationError) as exc:
                log.warning("scheduler.no_target", queue=trio.delay, code=error_code(exc))
                return None
            target = park_target(self.settings, self._client, url, error_url)
            self._park_targets[trio.delay] = target
        return self._park_targets[trio.delay]

    async def _delete(self, trio: QueueTrio, sent: list[Outgoing]) -> None:
        step = limits.MAX_BATCH_ENTRIES
        for start in range(0, len(sent), step):
            chunk = sent[start : start + step]
            entries = [
                {"Id": str(i), "ReceiptHandle": o.source.receipt_handle}
                for i, o in enumerate(chunk)
            ]
            # A message whose delete fails comes back after the visibility timeout: a requeue
            # retry is dropped by FIFO deduplication, a hand-over may be delivered twice.
            resp = await self._batch_call(
                "DeleteMessageBatch", trio, entries, "delay.delete_failed"
            )
            failed = len(chunk) if resp is None else len(resp.get("Failed", []))
            self.stats.events["delete_failed"] += failed

    async def _batch_call(
        self, api: str, trio: QueueTrio, entries: list[dict[str, Any]], event: str
    ) -> dict[str, Any] | None:
        """A batch call on the delay queue whose failure is logged, not raised."""
        try:
            url = await self.resolver.aurl(self._client, trio.delay)
            resp: dict[str, Any] = await self._call(api, QueueUrl=url, Entries=entries)
        except (*_AWS_ERRORS, SqsOperationError) as exc:
            code = exc.code if isinstance(exc, SqsOperationError) else error_code(exc)
            log.warning(event, queue=trio.delay, code=code, count=len(entries))
            return None
        for failure in resp.get("Failed", []):
            log.warning(event, queue=trio.delay, code=failure.get("Code"), count=1)
        return resp


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


def _snake(api: str) -> list[str]:
    words: list[str] = []
    for ch in api:
        if ch.isupper():
            words.append(ch.lower())
        else:
            words[-1] += ch
    return words
