"""OpenTelemetry across the delay on the emulator (docs/opentelemetry.md): one trace from a
send through three requeues (a 1 s cycle) and the hand-over to a consumer's handler and a
`handle_batch` handler, linked by default and parented with SQSDELAY_OTEL_PARENT=child; a
real Dramatiq worker's actor span linked to its enqueuer (or its child) through the delay,
a failed actor's span and a malformed traceparent; and an NServiceBus endpoint that reads the
context in its envelope's headers after the worker's requeues and hand-over. The OTel SDK's
in-memory exporter sees it (tests/support/otelkit.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dramatiq
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from sqsdelay import consumer
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.core import nservicebus
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support import nservicebus_port as nsb
from tests.support.consumerkit import receive_one
from tests.support.dramatiqkit import app_variables, imported_app
from tests.support.lambda_events import lambda_record
from tests.support.logs import capture_logs
from tests.support.otelkit import (
    BAD,
    CONVENTIONS,
    as_variables,
    by_operation,
    check_dropped,
    check_failed,
    check_one_trace,
    current,
    dramatiq_worker,
    in_memory_exporter,
    of_message,
    processed,
    settings_for,
)
from tests.support.workerkit import Collector, RunningWorker

pytestmark = pytest.mark.slow
CYCLE = 1
# At least three requeues, then the hand-over, even on a saturated machine: a worker that
# reads the message a few seconds late skips as many hops (it counts from broker time).
DELAY = 6 * CYCLE + 0.5
EXPORTER = in_memory_exporter()


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


# --- a real Dramatiq worker ----------------------------------------------------------------


def actors(broker: Any, seen: dict[str, Any]) -> tuple[Any, Any]:
    """Two actors on the tests' app's broker: one notes the span current while it runs, one
    fails (no retry: one run, one span)."""

    def traced(tag: str) -> None:
        seen[tag] = current()

    def fails(tag: str) -> None:
        raise RuntimeError("fails on purpose")

    return (
        dramatiq.actor(traced, broker=broker, max_retries=0),
        dramatiq.actor(fails, broker=broker, max_retries=0),
    )


@pytest.mark.parametrize("parent", ["link", "child"])
def test_a_dramatiq_actor_links_to_its_enqueuer_through_the_delay(
    parent: str, moto_url: str, sqs: Any, spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    """The Dramatiq tests' app (tests/integration/dramatiq_app.py) with a Dramatiq worker in
    this process: an actor sent with a delay past the cycle runs in `process
    <namespace>_default` (the SQS queue's name), linked to the enqueuer's span or its child,
    after three requeues or more; a malformed traceparent in its options is dropped with a
    warning and the actor runs; a failed actor's span has the exception and status ERROR."""
    fields = settings_for(moto_url, parent, CYCLE)
    namespace = f"o{uuid.uuid4().hex[:8]}"
    queue = f"{namespace}_default"  # dramatiq-sqs's SQS name of Dramatiq's "default" queue
    Installer(Settings(**fields), client=sqs).run([queue])
    variables = app_variables(namespace, moto_url, tmp_path / "ran.txt") | as_variables(fields)
    seen: dict[str, Any] = {}
    log = capture_logs("WARNING")
    tracer = trace.get_tracer("the-application")
    delay_ms = int(DELAY * 1000)
    with imported_app(variables) as app:
        traced, fails = actors(app.broker, seen)
        with RunningWorker(Settings(**fields), [queue]), dramatiq_worker(app.broker):
            failing = fails.send("fails")  # the traced actor last, on a warm path
            bad = traced.send_with_options(args=("bad",), delay=delay_ms, traceparent=BAD)
            with tracer.start_as_current_span("checkout") as checkout:
                ok = traced.send_with_options(args=("ok",), delay=delay_ms)
            ids = (ok.message_id, bad.message_id, failing.message_id)
            wait_for(lambda: processed(spans, *ids), timeout=60, interval=0.1)
    check_one_trace(spans, checkout, ok.message_id, queue, parent, seen["ok"], sqs_id=True)
    check_dropped(spans, log, bad.message_id)
    assert "bad" in seen  # the actor ran
    check_failed(spans, failing.message_id)


# --- an NServiceBus endpoint ---------------------------------------------------------------

TYPE = "Sales.OrderPlaced, Sales"
STATE = "congo=t61rcWkgMzE"


@pytest.mark.parametrize("user", [0, 8])
def test_an_nservicebus_endpoint_reads_the_context_in_its_headers_after_the_delay(
    user: int, make_settings: Callable[..., Settings], sqs: Any, spans: InMemorySpanExporter
) -> None:
    """SQSDELAY_WIRE_FORMAT=nservicebus, a send inside an application span whose trace has a
    tracestate: the worker requeues it and hands it over, and the endpoint's input queue
    (tests/support/nservicebus_port.py) reads the send span's traceparent and the tracestate
    in the envelope's Headers. With 8 attributes of the user's the message attributes have
    no room for the context (the worker's spans are then without it): the Headers still
    carry it."""
    settings = make_settings(
        max_native_delay_seconds=CYCLE,
        visibility_timeout_seconds=5,
        wait_time_seconds=1,
        wire_format="nservicebus",
    )
    url = url_of(settings, sqs, "orders")
    attributes = {f"a{i}": {"DataType": "String", "StringValue": str(i)} for i in range(user)}
    remote = SpanContext(
        trace_id=uuid.uuid4().int,
        span_id=uuid.uuid4().int >> 64,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState.from_header([STATE]),
    )
    upstream = trace.set_span_in_context(NonRecordingSpan(remote))
    tracer = trace.get_tracer("the-application")
    collector = Collector(sqs, url)
    with RunningWorker(settings, ["orders"]):
        with tracer.start_as_current_span("checkout", context=upstream):
            sent = Sender(settings, client=sqs).send(
                "orders", '{"OrderId":7}', delay=7, attributes=attributes, message_type=TYPE
            )
        (got,) = collector.until(1, timeout=60)
    [send] = of_message(spans, "send", sent.message_id)
    requeues = of_message(spans, "requeue", sent.message_id)
    handed = of_message(spans, "hand-over", sent.message_id)
    assert requeues and handed, [s.name for s in spans.get_finished_spans()]
    assert send.context is not None
    traceparent = f"00-{send.context.trace_id:032x}-{send.context.span_id:016x}-01"
    accepted = nsb.input_queue(
        {"MessageId": got.message_id, "Body": got.body, "MessageAttributes": got.attributes}
    )
    assert accepted.body == b'{"OrderId":7}'
    assert accepted.headers[nservicebus.MESSAGE_ID] == sent.message_id
    assert accepted.headers["traceparent"] == traceparent
    assert accepted.headers["tracestate"] == STATE
    assert json.loads(got.body)["Headers"]["traceparent"] == traceparent
    in_attributes = got.attributes.get("traceparent", {}).get("StringValue")
    for hop in requeues + handed:
        links = [x.context.span_id for x in hop.links]
        assert links == ([send.context.span_id] if in_attributes else []), hop.name
    assert in_attributes == (traceparent if user == 0 else None)
