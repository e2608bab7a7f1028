"""OpenTelemetry in tests: the SDK's in-memory exporter on the process's one tracer provider,
finished spans by operation, real Celery, Dramatiq and taskiq workers run in this process
(each in threads of its own, consuming from the emulator as their CLI workers do), so that
their tasks' spans reach the exporter too, and the checks of a task's trace."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.logs import events


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


@contextlib.contextmanager
def dramatiq_worker(broker: Any, threads: int = 2) -> Iterator[Any]:
    """Dramatiq's worker (`dramatiq.Worker`: what each process of `dramatiq <module>` runs)
    consuming the broker's declared queues, its consumer and worker threads in this process.
    Stopped on exit: dramatiq-sqs's consumer puts back what it fetched and did not run."""
    import dramatiq

    worker = dramatiq.Worker(broker, worker_threads=threads)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop(timeout=30_000)


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


# --- a task's trace, from the publisher's span through the delay to the task's span --------

CONVENTIONS = {
    "messaging.system",
    "messaging.operation.name",
    "messaging.operation.type",
    "messaging.destination.name",
    "messaging.message.id",
}
BAD = "00-not-a-traceparent-01"  # a producer's malformed traceparent


def settings_for(moto_url: str, parent: str, cycle: int = 1) -> dict[str, Any]:
    """sqsdelay's settings, as fields, for a task queue's test: a short cycle and poll, no
    queue prefix (Celery's, Dramatiq's and taskiq's queue names are their own SQS names)."""
    return {
        "endpoint_url": moto_url,
        "region": "us-east-1",
        "max_native_delay_seconds": cycle,
        "visibility_timeout_seconds": 5,
        "wait_time_seconds": 1,
        "error_queue": f"e{uuid.uuid4().hex[:8]}-error",
        "otel_parent": parent,
    }


def as_variables(fields: dict[str, Any]) -> dict[str, str]:
    """The same settings as SQSDELAY_* variables (for an app that reads them on import)."""
    return {f"SQSDELAY_{k.upper()}": str(v) for k, v in fields.items()}


def current() -> tuple[int, int]:
    """The current span's trace and span ids (what a task sees while it runs)."""
    ctx = trace.get_current_span().get_span_context()
    return ctx.trace_id, ctx.span_id


def of_message(spans: InMemorySpanExporter, op: str, message_id: str) -> list[ReadableSpan]:
    """The finished spans of one operation on one message (by `sqsdelay.message_id`: a
    task's id, Dramatiq's message id, on every hop and on the task's span)."""
    return [
        s
        for s in by_operation(spans.get_finished_spans()).get(op, [])
        if (s.attributes or {}).get("sqsdelay.message_id") == message_id
    ]


def processed(spans: InMemorySpanExporter, *message_ids: str) -> bool:
    """Every one of these tasks' spans has ended (just after the task returns)."""
    return all(of_message(spans, "process", m) for m in message_ids)


def check_one_trace(
    spans: InMemorySpanExporter,
    app: Any,
    message_id: str,
    queue: str,
    parent: str,
    seen: Any,
    *,
    sqs_id: bool = False,
) -> None:
    """The send (the publisher span's child), three requeues or more and the hand-over (each
    linked to the send, or its child), and the task's span, linked to or a child of the
    publisher's span, current while the task ran. `sqs_id`: the task's
    `messaging.message.id` is the SQS message's (Dramatiq), not the task's id (Celery,
    taskiq: the SQS id does not reach a task)."""
    app_ctx = app.get_span_context()
    [sent] = of_message(spans, "send", message_id)
    assert sent.parent is not None and sent.parent.span_id == app_ctx.span_id
    assert sent.context is not None and sent.context.trace_id == app_ctx.trace_id
    # at least once: a hand-over or a task run again on a saturated machine is a copy
    requeues = of_message(spans, "requeue", message_id)
    handed = of_message(spans, "hand-over", message_id)
    tasks = of_message(spans, "process", message_id)
    # a worker that reads the message late skips hops (it counts from broker time): say how
    # long the message had left when it was sent, and when the worker first read it
    due_s = int((sent.attributes or {})["sqsdelay.due_at"]) / 1000
    moves = sorted((sent, *requeues), key=lambda s: s.start_time or 0)
    left = [f"{due_s - (s.start_time or 0) / 1e9:.2f} s left at {s.name}" for s in moves]
    assert len(requeues) >= 3 and handed and tasks, [s.name for s in handed + tasks] + left
    for hop in [*requeues, *handed]:
        if parent == "link":
            assert [x.context.span_id for x in hop.links] == [sent.context.span_id], hop.name
        else:
            assert hop.parent is not None and hop.parent.span_id == sent.context.span_id
    assert all((h.attributes or {})["messaging.destination.name"] == queue for h in handed)
    for task in tasks:
        attrs = task.attributes or {}
        assert set(attrs) >= CONVENTIONS
        assert attrs["messaging.system"] == "aws_sqs"
        assert attrs["messaging.operation.type"] == "process"
        assert attrs["messaging.destination.name"] == queue
        if sqs_id:
            assert attrs["messaging.message.id"] not in ("", message_id)
        else:
            assert attrs["messaging.message.id"] == message_id
        assert task.name == f"process {queue}" and task.kind == trace.SpanKind.CONSUMER
        assert task.context is not None
        if parent == "link":  # a trace of its own, linked to the publisher's span
            assert [(x.context.trace_id, x.context.span_id) for x in task.links] == [
                (app_ctx.trace_id, app_ctx.span_id)
            ]
            assert task.context.trace_id != app_ctx.trace_id
        else:
            assert task.parent is not None and task.parent.span_id == app_ctx.span_id
            assert task.context.trace_id == app_ctx.trace_id and not task.links
    # the span was the current one while the task ran
    assert seen in [(t.context.trace_id, t.context.span_id) for t in tasks if t.context]


def check_failed(spans: InMemorySpanExporter, message_id: str) -> None:
    """A task that raised RuntimeError: its span has the exception's event, status ERROR."""
    [task] = of_message(spans, "process", message_id)
    assert task.status.status_code == trace.StatusCode.ERROR
    assert [e.attributes["exception.type"] for e in task.events if e.attributes] == ["RuntimeError"]


def check_dropped(spans: InMemorySpanExporter, log: Any, message_id: str) -> None:
    """The malformed one: its task ran in a span of its own, without link or parent, and
    the warning names it."""
    tasks = of_message(spans, "process", message_id)
    assert tasks and all(not t.links and t.parent is None for t in tasks)
    warned = [
        w for w in events(log, "consumer.trace_context_dropped") if w["message_id"] == message_id
    ]
    assert warned and all(w["level"] == "warning" for w in warned)
    assert all("not a W3C traceparent" in w["reason"] for w in warned)
