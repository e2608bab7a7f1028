"""OpenTelemetry in tests: the SDK's in-memory exporter on the process's one tracer provider,
finished spans by operation, and real Celery and taskiq workers run in this process (each in
a thread of its own, consuming from the emulator as their CLI workers do), so that their
tasks' spans reach the exporter too."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def in_memory_exporter() -> InMemorySpanExporter:
    """A new exporter that sees every span finished from now on in this process (one
    global tracer provider per process: another module's exporter sees them too)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def by_operation(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    """The spans that have `messaging.operation.name`, by it."""
    out: dict[str, list[ReadableSpan]] = {}
    for s in finished:
        op = (s.attributes or {}).get("messaging.operation.name")
        if op is not None:
            out.setdefault(str(op), []).append(s)
    return out


@contextlib.contextmanager
def celery_worker(app: Any) -> Iterator[Any]:
    """Celery's embedded worker (`celery.contrib.testing.worker.start_worker`: the worker
    `celery worker --pool solo` runs, in a thread) consuming the app's queues."""
    from celery.contrib.testing.worker import start_worker

    app.conf.worker_hijack_root_logger = False  # the test's log capture stays in place
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30) as w:
        yield w


class TaskiqWorker:
    """taskiq's receiver (`taskiq.api.run_receiver_task`, what `taskiq worker` runs) on a
    broker of its own, in a thread with its own event loop: aiobotocore's clients belong to
    the loop that opened them, so the publisher's broker is another instance."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="taskiq-worker", daemon=True)

    def __enter__(self) -> TaskiqWorker:
        self._thread.start()
        if not self._ready.wait(timeout=60):
            raise AssertionError("the taskiq worker did not start within 60 s")
        if self._failed is not None:
            raise AssertionError(f"the taskiq worker failed to start: {self._failed!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        from taskiq.api import run_receiver_task

        self._loop = asyncio.get_running_loop()
        self.broker.is_worker_process = True
        try:
            await self.broker.startup()
        except BaseException as exc:
            self._failed = exc
            self._ready.set()
            raise
        self._task = asyncio.create_task(run_receiver_task(self.broker, max_async_tasks=4))
        self._ready.set()
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        finally:
            await self.broker.shutdown()
