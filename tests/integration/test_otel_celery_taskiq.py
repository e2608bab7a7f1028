"""OpenTelemetry from a Celery or taskiq publish, through three requeues or more (a 1 s
cycle), to a real worker's task, on the emulator (docs/opentelemetry.md): the task's
`process <queue>` span links to the publisher's span (default) or is its child
(SQSDELAY_OTEL_PARENT=child), with the messaging semantic conventions, and is the current
span while the task runs. A producer's malformed traceparent is dropped with a warning and
the task still runs. Celery's embedded worker and taskiq's receiver run in this process
(tests/support/otelkit.py), so that the SDK's in-memory exporter sees every span."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sqsdelay.aws.installer import Installer
from sqsdelay.settings import Settings
from sqsdelay.taskiq import SQSBroker
from tests.conftest import wait_for
from tests.integration.celery_app import make_app
from tests.support.logs import capture_logs
from tests.support.otelkit import (
    BAD,
    TaskiqWorker,
    celery_worker,
    check_dropped,
    check_failed,
    check_one_trace,
    current,
    in_memory_exporter,
    processed,
    settings_for,
)
from tests.support.taskiqkit import Publisher
from tests.support.workerkit import RunningWorker

pytestmark = pytest.mark.slow
CYCLE = 1
# At least three requeues, then the hand-over, even when the worker reads the message a few
# seconds late on a saturated machine (it counts from broker time), as test_opentelemetry.
DELAY = 6 * CYCLE + 0.5
EXPORTER = in_memory_exporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


@pytest.mark.parametrize("parent", ["link", "child"])
def test_a_celery_task_links_to_its_publisher_through_the_delay(
    parent: str, moto_url: str, sqs: Any, spans: InMemorySpanExporter
) -> None:
    fields = settings_for(moto_url, parent, CYCLE)
    settings = Settings(**fields)
    prefix = f"o{uuid.uuid4().hex[:8]}-"
    queue = f"{prefix}celery"
    Installer(settings, client=sqs).run([queue])
    app = make_app(f"sqs://testing:testing@127.0.0.1:{urlparse(moto_url).port}", prefix, **fields)
    seen: dict[str, Any] = {}

    @app.task(name="traced", shared=False)  # not in the next test's app
    def traced(tag: str) -> None:
        seen[tag] = current()

    @app.task(name="fails", shared=False)
    def fails() -> None:
        raise RuntimeError("fails on purpose")

    log = capture_logs("WARNING")
    tracer = trace.get_tracer("the-application")
    with RunningWorker(settings, [queue]), celery_worker(app):
        # The traced task last, on a warm path: a countdown is an ETA fixed by apply_async,
        # and the first publishes (kombu's connection, sqsdelay's sender, the queues' URLs)
        # took up to 2.8 s of it at load 11 here, leaving two requeues, not three.
        failing = fails.delay()
        bad = traced.apply_async(args=["bad"], countdown=DELAY, headers={"traceparent": BAD})
        with tracer.start_as_current_span("checkout") as checkout:
            ok = traced.apply_async(args=["ok"], countdown=DELAY)
        wait_for(lambda: processed(spans, ok.id, bad.id, failing.id), timeout=60, interval=0.1)
    check_one_trace(spans, checkout, ok.id, queue, parent, seen["ok"])
    check_dropped(spans, log, bad.id)
    check_failed(spans, failing.id)


def taskiq_broker(queue: str, moto_url: str, fields: dict[str, Any], seen: dict[str, Any]) -> Any:
    """The application's broker, as a user writes it: one for the publisher, one for the
    worker (each process has its own)."""
    broker = SQSBroker(
        queue,
        endpoint_url=moto_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        wait_time_seconds=1,
        settings=Settings(**fields),
    )

    async def traced(tag: str) -> None:
        seen[tag] = current()

    async def fails() -> None:
        raise RuntimeError("fails on purpose")

    broker.register_task(traced, task_name="traced")
    broker.register_task(fails, task_name="fails")
    return broker


@pytest.mark.parametrize("parent", ["link", "child"])
def test_a_taskiq_task_links_to_its_kicker_through_the_delay(
    parent: str, moto_url: str, sqs: Any, spans: InMemorySpanExporter
) -> None:
    fields = settings_for(moto_url, parent, CYCLE)
    queue = f"o{uuid.uuid4().hex[:8]}-tasks"
    Installer(Settings(**fields), client=sqs).run([queue])
    seen: dict[str, Any] = {}
    publisher, loop = taskiq_broker(queue, moto_url, fields, seen), Publisher()
    task = publisher.find_task("traced")
    log = capture_logs("WARNING")
    tracer = trace.get_tracer("the-application")
    try:
        loop.run(publisher.startup())
        worker_broker = taskiq_broker(queue, moto_url, fields, seen)
        with RunningWorker(Settings(**fields), [queue]), TaskiqWorker(worker_broker):
            # the traced task last, as Celery's: its delay starts when it is sent
            failing = loop.run(publisher.find_task("fails").kiq())
            kicker = task.kicker().with_labels(delay=DELAY, traceparent=BAD)
            bad = loop.run(kicker.kiq("bad"))
            with tracer.start_as_current_span("checkout") as checkout:
                ok = loop.run(task.kicker().with_labels(delay=DELAY).kiq("ok"))
            ids = (ok.task_id, bad.task_id, failing.task_id)
            wait_for(lambda: processed(spans, *ids), timeout=60, interval=0.1)
    finally:
        loop.run(publisher.shutdown())
        loop.close()
    check_one_trace(spans, checkout, ok.task_id, queue, parent, seen["ok"])
    check_dropped(spans, log, bad.task_id)
    check_failed(spans, failing.task_id)


def test_without_the_package_nothing_is_imported_and_nothing_is_added() -> None:
    """opentelemetry blocked on the meta path: Celery's configure and transport and taskiq's
    broker load, connect no signal and add no middleware, and no opentelemetry module is
    loaded."""
    script = textwrap.dedent(
        """
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(name)
                return None

        sys.meta_path.insert(0, Block())
        from celery import Celery, signals
        import sqsdelay.celery
        from sqsdelay import otel
        from sqsdelay.aws import celery_transport
        from sqsdelay.settings import Settings
        from sqsdelay.taskiq import SQSBroker, TraceContext
        app = Celery("a", broker="sqs://")
        before = len(signals.task_prerun.receivers)
        sqsdelay.celery.configure(app)
        assert len(signals.task_prerun.receivers) == before
        assert otel.missing_context(Settings(), {}) == {}
        broker = SQSBroker("q", endpoint_url="http://127.0.0.1:1", region_name="us-east-1")
        assert not [m for m in broker.middlewares if isinstance(m, TraceContext)]
        loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
        assert not loaded, loaded
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
