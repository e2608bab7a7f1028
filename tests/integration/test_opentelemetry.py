"""OpenTelemetry across the delay on the emulator (docs/opentelemetry.md): one trace from a
send through three requeues (a 1 s cycle) and the hand-over to a consumer's handler and a
`handle_batch` handler, linked by default and parented with SQSDELAY_OTEL_PARENT=child; and
a Dramatiq actor's span linked to its enqueuer. The OTel SDK's in-memory exporter sees it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sqsdelay import consumer
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.settings import Settings
from tests.support.consumerkit import receive_one
from tests.support.lambda_events import lambda_record
from tests.support.workerkit import RunningWorker

pytestmark = pytest.mark.slow
CYCLE = 1
# At least three requeues, then the hand-over, even on a saturated machine: a worker that
# reads the message a few seconds late skips as many hops (it counts from broker time).
DELAY = 6 * CYCLE + 0.5
CONVENTIONS = {
    "messaging.system",
    "messaging.operation.name",
    "messaging.operation.type",
    "messaging.destination.name",
    "messaging.message.id",
}
EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # one global provider per process
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def short(make_settings: Callable[..., Settings], parent: str) -> Settings:
    return make_settings(
        max_native_delay_seconds=CYCLE,
        visibility_timeout_seconds=5,
        wait_time_seconds=1,
        otel_parent=parent,
    )


def through_the_delay(settings: Settings, sqs: Any, queue: str) -> tuple[Any, dict[str, Any]]:
    """A send inside an application span, through the worker, received at the destination."""
    url = url_of(settings, sqs, queue)
    tracer = trace.get_tracer("the-application")
    with RunningWorker(settings, [queue]):  # started first: its start is not in the delay
        with tracer.start_as_current_span("checkout") as app:
            Sender(settings, client=sqs).send(queue, "order 1", delay=DELAY)
        message = receive_one(sqs, url, wait=20)  # SQS long-polls 20 s at most
    return app, message


def url_of(settings: Settings, sqs: Any, queue: str) -> str:
    reports = Installer(settings, client=sqs).run([queue])
    return next(str(r.url) for r in reports if r.spec.name == settings.queue_prefix + queue)


def by_operation(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for s in finished:
        op = (s.attributes or {}).get("messaging.operation.name")
        if op is not None:
            out.setdefault(str(op), []).append(s)
    return out


def handlers(settings: Settings, sqs: Any, message: dict[str, Any], url: str) -> None:
    """The same delivery handled twice: by a consumer (`traced`) and by `handle_batch`."""
    with consumer.traced(message, url, settings=settings) as span:
        assert span is not None and span.is_recording()
    arn = "arn:aws:sqs:us-east-1:123456789012:" + url.rsplit("/", 1)[-1]
    event = {"Records": [lambda_record(message, arn)]}
    seen: list[Any] = []
    answer = consumer.handle_batch(
        event,
        lambda r: seen.append(trace.get_current_span().is_recording()),
        sender=Sender(settings, client=sqs),
    )
    assert answer == {"batchItemFailures": []} and seen == [True]


def test_one_trace_linked_from_the_send_to_both_handlers(
    make_settings: Callable[..., Settings], sqs: Any, spans: InMemorySpanExporter
) -> None:
    settings = short(make_settings, "link")
    app, message = through_the_delay(settings, sqs, "orders")
    assert message["MessageAttributes"]["traceparent"]["DataType"] == "String"
    url = sqs.get_queue_url(QueueName=settings.queue_prefix + "orders")["QueueUrl"]
    handlers(settings, sqs, message, url)
    ops = by_operation(spans.get_finished_spans())
    [sent] = ops["send"]
    assert sent.parent is not None and sent.parent.span_id == app.get_span_context().span_id
    assert sent.kind == trace.SpanKind.PRODUCER
    assert len(ops["requeue"]) >= 3 and len(ops["hand-over"]) == 1
    assert len(ops["process"]) == 2
    send_ctx = sent.context
    assert send_ctx is not None
    for s in ops["requeue"] + ops["hand-over"] + ops["process"]:
        # linked to the send's span, in a trace of its own (a delay of days is no parent)
        assert [link.context.span_id for link in s.links] == [send_ctx.span_id], s.name
        assert s.context is not None and s.context.trace_id != send_ctx.trace_id
    for s in ops["send"] + ops["requeue"] + ops["hand-over"]:
        attrs = s.attributes or {}
        assert set(attrs) >= CONVENTIONS and attrs["messaging.system"] == "aws_sqs"
        assert attrs["sqsdelay.message_id"] and attrs["sqsdelay.due_at"] > 0
        assert (
            s.name == f"{attrs['messaging.operation.name']} {attrs['messaging.destination.name']}"
        )
    assert all(s.kind == trace.SpanKind.CONSUMER for s in ops["process"])
    assert ops["hand-over"][0].attributes["messaging.destination.name"].endswith("orders")


def test_one_trace_parented_when_set(
    make_settings: Callable[..., Settings], sqs: Any, spans: InMemorySpanExporter
) -> None:
    settings = short(make_settings, "child")
    app, message = through_the_delay(settings, sqs, "billing")
    url = sqs.get_queue_url(QueueName=settings.queue_prefix + "billing")["QueueUrl"]
    handlers(settings, sqs, message, url)
    ops = by_operation(spans.get_finished_spans())
    [sent] = ops["send"]
    assert sent.context is not None
    hops = ops["requeue"] + ops["hand-over"] + ops["process"]
    assert len(ops["requeue"]) >= 3 and len(ops["hand-over"]) == 1 and len(ops["process"]) == 2
    for s in hops:
        assert s.context is not None and s.context.trace_id == app.get_span_context().trace_id
        assert s.parent is not None and s.parent.span_id == sent.context.span_id, s.name
        assert not s.links


def test_without_the_package_nothing_is_imported_and_a_send_works(moto_url: str) -> None:
    """opentelemetry blocked on the meta path: `import sqsdelay`, the sender, the worker's
    runner and a send to the emulator run, and no opentelemetry module is loaded."""
    script = textwrap.dedent(
        f"""
        import sys, uuid

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(name)
                return None

        sys.meta_path.insert(0, Block())
        import boto3
        import sqsdelay, sqsdelay.consumer, sqsdelay.aws.batch_runner
        from sqsdelay.aws.installer import Installer
        from sqsdelay.aws.sender import Sender
        from sqsdelay.settings import Settings
        s = Settings(endpoint_url="{moto_url}", region="us-east-1",
                     queue_prefix="b" + uuid.uuid4().hex[:8] + "-")
        sqs = boto3.client("sqs", endpoint_url="{moto_url}", region_name="us-east-1")
        Installer(s, client=sqs).run(["orders"])
        r = Sender(s, client=sqs).send("orders", "x", delay=5000)
        assert r.route == "delay-queue", r
        with sqsdelay.consumer.traced({{"MessageId": "m", "ReceiptHandle": "h", "Body": "b"}},
                                      settings=s) as span:
            assert span is None
        loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
        assert not loaded, loaded
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_off_sends_no_context(make_settings: Callable[..., Settings], sqs: Any) -> None:
    settings = make_settings(otel="off")
    url = url_of(settings, sqs, "plain")
    with trace.get_tracer("t").start_as_current_span("app"):
        Sender(settings, client=sqs).send("plain", "x", delay=0)
    got = receive_one(sqs, url)
    assert "traceparent" not in got.get("MessageAttributes", {})
