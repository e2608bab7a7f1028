"""The delay worker: drains `<queue>-delay.fifo` queues with asyncio (aioboto3).

Each received batch goes through the pure decision (`decision.decide`), is sent out in
SendMessageBatch calls grouped by target queue, and only the originals whose send succeeded
are deleted. Everything else stays in the delay queue (with a visibility backoff) until it
succeeds or is dead-lettered after SQSDELAY_MAX_ATTEMPTS receives.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aioboto3
from botocore.exceptions import BotoCoreError, ClientError

from sqsdelay import batching, names
from sqsdelay.clients import client_kwargs, error_code, translate
from sqsdelay.decision import CircuitBreaker, ClockOffset, Limits, retry_backoff_seconds
from sqsdelay.logs import get_logger
from sqsdelay.processing import (
    SYSTEM_ATTRIBUTES,
    Outgoing,
    Target,
    decide_batch,
    event_fields,
    from_boto,
)
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.worker")
_AWS_ERRORS = (ClientError, BotoCoreError, OSError, asyncio.TimeoutError)


@dataclass
class QueueSet:
    """One destination and the queues the worker uses for it."""

    destination: str
    delay_queue: str
    urls: dict[Target, str] = field(default_factory=dict)
    loops: int = 0
    peak_loops: int = 0


@dataclass
class Stats:
    requests: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": dict(self.requests),
            "messages": dict(self.events),
            "requests_total": sum(self.requests.values()),
        }


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
        self._limits = Limits(
            settings.max_native_delay_seconds, settings.max_attempts, settings.max_message_bytes
        )
        self._error_queue = names.error_queue_name(settings.error_queue, settings.queue_prefix)
        self.queues = []
        for q in queues:
            dest = names.destination_name(q, settings.queue_prefix)
            self.queues.append(QueueSet(dest, names.delay_queue_name(dest)))
        self.offset = ClockOffset()
        self.breaker = CircuitBreaker()
        self.stats = Stats()
        self._last_error: OrderedDict[str, str] = OrderedDict()
        self._stop = asyncio.Event()
        self._client: Any = None

    def stop(self) -> None:
        """Stop receiving; work in hand is finished."""
        self._stop.set()

    async def _call(self, api: str, queue: str, **kwargs: Any) -> Any:
        self.stats.requests[api] += 1
        method = getattr(self._client, "_".join(_snake(api)))
        return await method(**kwargs)

    async def _resolve(self, qs: QueueSet) -> None:
        try:
            resp = await self._call("GetQueueUrl", qs.delay_queue, QueueName=qs.delay_queue)
        except _AWS_ERRORS as exc:
            raise translate(exc, "GetQueueUrl", qs.delay_queue) from None
        url: str = resp["QueueUrl"]
        base = url.rsplit("/", 1)[0]
        # Same account and endpoint: derive the others, so a missing destination is a send
        # failure (circuit breaker), not a start-up failure.
        qs.urls = {
            "delay": url,
            "destination": f"{base}/{qs.destination}",
            "error": f"{base}/{self._error_queue}",
        }

    async def run(self, *, handle_signals: bool = True) -> Stats:
        loop = asyncio.get_running_loop()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.add_signal_handler(sig, self.stop)
        session = aioboto3.Session()
        pool = max(10, len(self.queues) * self.concurrency * 2)
        async with session.client("sqs", **client_kwargs(self.settings, max_pool=pool)) as client:
            self._client = client
            for qs in self.queues:
                await self._resolve(qs)
            log.info(
                "worker.started",
                queues=[q.delay_queue for q in self.queues],
                concurrency=self.concurrency,
                max_native_delay_seconds=self.settings.max_native_delay_seconds,
            )
            stats_task = asyncio.create_task(self._report_stats())
            async with asyncio.TaskGroup() as tg:
                for qs in self.queues:
                    self._spawn(tg, qs)
            stats_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stats_task
        log.info("worker.stopped", **self.stats.as_dict())
        return self.stats

    def _spawn(self, tg: asyncio.TaskGroup, qs: QueueSet) -> None:
        qs.loops += 1
        qs.peak_loops = max(qs.peak_loops, qs.loops)
        tg.create_task(self._receive_loop(tg, qs, first=qs.loops == 1))

    async def _report_stats(self) -> None:
        while True:
            await asyncio.sleep(self.settings.stats_interval_seconds)
            log.info(
                "worker.stats",
                offset_ms=self.offset.estimate(),
                loops={q.destination: q.loops for q in self.queues},
                **self.stats.as_dict(),
            )

    async def _wait_or_stop(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    async def _receive(self, qs: QueueSet) -> list[dict[str, Any]] | None:
        """One long poll; None when stopped. Cancelling a poll loses nothing: anything the
        broker handed out reappears after the visibility timeout."""
        receive = asyncio.ensure_future(
            self._call(
                "ReceiveMessage",
                qs.delay_queue,
                QueueUrl=qs.urls["delay"],
                MaxNumberOfMessages=10,
                WaitTimeSeconds=self.settings.wait_time_seconds,
                VisibilityTimeout=self.settings.visibility_timeout_seconds,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=list(SYSTEM_ATTRIBUTES),
            )
        )
        stopped = asyncio.ensure_future(self._stop.wait())
        done, _ = await asyncio.wait({receive, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if receive not in done:
            receive.cancel()
            with contextlib.suppress(asyncio.CancelledError, *_AWS_ERRORS):
                await receive
            return None
        messages: list[dict[str, Any]] = receive.result().get("Messages", [])
        return messages

    async def _receive_loop(self, tg: asyncio.TaskGroup, qs: QueueSet, *, first: bool) -> None:
        try:
            while not self._stop.is_set():
                try:
                    messages = await self._receive(qs)
                except _AWS_ERRORS as exc:
                    wait = self.breaker.failure(qs.urls["delay"], self._clock())
                    log.error(
                        "queue.receive_failed",
                        queue=qs.delay_queue,
                        code=error_code(exc),
                        retry_in_seconds=wait,
                    )
                    await self._wait_or_stop(wait)
                    continue
                if messages is None:
                    return
                self.breaker.success(qs.urls["delay"])
                if len(messages) == 10 and qs.loops < self.concurrency:
                    self._spawn(tg, qs)  # there is a backlog: poll in parallel
                if messages:
                    started = self._clock()
                    await self._process(qs, messages, int(started * 1000))
                    took = self._clock() - started
                    if took > self.settings.visibility_timeout_seconds / 2:
                        # Near the visibility timeout a message can reappear while its batch
                        # is still in hand, and a hand-over would then be delivered twice.
                        log.warning(
                            "worker.slow_batch",
                            queue=qs.delay_queue,
                            seconds=round(took, 2),
                            visibility_timeout_seconds=self.settings.visibility_timeout_seconds,
                        )
                elif not first:
                    return  # idle: back to a single long poll per queue
        finally:
            qs.loops -= 1

    async def _process(self, qs: QueueSet, raw: list[dict[str, Any]], local_ms: int) -> None:
        outs = decide_batch(
            [from_boto(m) for m in raw],
            local_ms=local_ms,
            offset=self.offset,
            lim=self._limits,
            source_queue=qs.delay_queue,
            last_errors=self._last_error,
        )
        now = self._clock()
        retry: list[tuple[Outgoing, int]] = []
        sendable: list[Outgoing] = []
        for out in outs:
            wait = self.breaker.retry_in(qs.urls[out.target], now)
            if wait > 0:
                retry.append((out, math.ceil(wait)))
            else:
                sendable.append(out)
        sent = await self._send(qs, sendable, retry)
        await self._delete(qs, sent)
        await self._hold(qs, retry)

    async def _send(
        self, qs: QueueSet, outs: list[Outgoing], retry: list[tuple[Outgoing, int]]
    ) -> list[Outgoing]:
        sent: list[Outgoing] = []
        batches = batching.chunk(
            outs,
            key=lambda o: o.target,
            size=lambda o: o.size,
            max_bytes=self.settings.max_message_bytes,
        )
        for batch in batches:
            target = outs[batch[0]].target
            url = qs.urls[target]
            entries = [{"Id": str(i), **outs[i].entry} for i in batch]
            try:
                resp = await self._call("SendMessageBatch", url, QueueUrl=url, Entries=entries)
            except _AWS_ERRORS as exc:
                wait = self.breaker.failure(url, self._clock())
                err = translate(exc, "SendMessageBatch", url.rsplit("/", 1)[-1])
                log.error(
                    "destination.unavailable",
                    queue=err.queue,
                    target=target,
                    code=err.code,
                    detail=err.detail,
                    retry_in_seconds=wait,
                )
                for i in batch:
                    self._remember(outs[i], f"{err.code}: {err.detail}")
                    retry.append((outs[i], math.ceil(wait)))
                continue
            self.breaker.success(url)
            ok, failed = batching.read_batch_response(resp, (str(i) for i in batch))
            for i in batch:
                out = outs[i]
                if str(i) in ok:
                    sent.append(out)
                    event, fields = event_fields(out, qs.destination)
                    self.stats.events[event] += 1
                    (log.error if event == "delay.dead_lettered" else log.info)(event, **fields)
                else:
                    f = failed[str(i)]
                    self._remember(out, f"{f.code}: {f.message}")
                    log.warning(
                        "delay.send_failed",
                        message_id=out.source.message_id,
                        queue=url.rsplit("/", 1)[-1],
                        code=f.code,
                        detail=f.message,
                    )
                    retry.append((out, retry_backoff_seconds(out.source.receive_count)))
        return sent

    def _remember(self, out: Outgoing, error: str) -> None:
        self._last_error[out.source.message_id] = error
        while len(self._last_error) > 10_000:
            self._last_error.popitem(last=False)

    async def _delete(self, qs: QueueSet, sent: list[Outgoing]) -> None:
        for start in range(0, len(sent), 10):
            chunk = sent[start : start + 10]
            entries = [
                {"Id": str(i), "ReceiptHandle": o.source.receipt_handle}
                for i, o in enumerate(chunk)
            ]
            try:
                resp = await self._call(
                    "DeleteMessageBatch", qs.delay_queue, QueueUrl=qs.urls["delay"], Entries=entries
                )
            except _AWS_ERRORS as exc:
                # The message comes back after the visibility timeout; a requeue retry is
                # dropped by FIFO deduplication, a hand-over may be delivered twice.
                log.warning(
                    "delay.delete_failed",
                    queue=qs.delay_queue,
                    code=error_code(exc),
                    count=len(chunk),
                )
                self.stats.events["delete_failed"] += len(chunk)
                continue
            for failure in resp.get("Failed", []):
                log.warning("delay.delete_failed", queue=qs.delay_queue, code=failure.get("Code"))
                self.stats.events["delete_failed"] += 1
            for o in chunk:
                self._last_error.pop(o.source.message_id, None)

    async def _hold(self, qs: QueueSet, retry: list[tuple[Outgoing, int]]) -> None:
        """Keep failed messages out of sight for their backoff instead of retrying hot."""
        for start in range(0, len(retry), 10):
            chunk = retry[start : start + 10]
            entries = [
                {
                    "Id": str(i),
                    "ReceiptHandle": o.source.receipt_handle,
                    "VisibilityTimeout": max(1, min(wait, 43_000)),
                }
                for i, (o, wait) in enumerate(chunk)
            ]
            try:
                await self._call(
                    "ChangeMessageVisibilityBatch",
                    qs.delay_queue,
                    QueueUrl=qs.urls["delay"],
                    Entries=entries,
                )
            except _AWS_ERRORS as exc:
                log.warning("delay.backoff_failed", queue=qs.delay_queue, code=error_code(exc))


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
