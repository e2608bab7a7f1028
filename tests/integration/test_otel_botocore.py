"""sqsdelay's trace context beside opentelemetry-instrumentation-botocore (issue 62: no
double injection). That instrumentation makes a client span for every AWS call a boto3
client makes, and writes its context into SNS messages, not into SQS ones (its SQS
extension only names the span: contrib#1599); so the message carries sqsdelay's one
`traceparent`, the producer's, through the delay, and botocore's spans join the same trace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.botocore import BotocoreInstrumentor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.core import trace_context
from sqsdelay.settings import Settings
from tests.support.consumerkit import receive_one
from tests.support.otelkit import in_memory_exporter
from tests.support.workerkit import RunningWorker

pytestmark = pytest.mark.slow

EXPORTER = in_memory_exporter()


@pytest.fixture
def instrumented() -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    BotocoreInstrumentor().instrument()
    try:
        yield EXPORTER
    finally:
        BotocoreInstrumentor().uninstrument()
        EXPORTER.clear()


def test_the_message_carries_the_producers_context_once_and_botocore_joins_its_trace(
    make_settings: Callable[..., Settings], sqs: Any, instrumented: InMemorySpanExporter
) -> None:
    settings = make_settings(max_native_delay_seconds=1, visibility_timeout_seconds=5,
                             wait_time_seconds=1)  # fmt: skip
    reports = Installer(settings, client=sqs).run(["orders"])
    url = next(str(r.url) for r in reports if r.spec.name == settings.queue_prefix + "orders")
    with RunningWorker(settings, ["orders"]):
        with trace.get_tracer("the-application").start_as_current_span("checkout") as app:
            Sender(settings, client=sqs).send("orders", "order 1", delay=3.5)
        message = receive_one(sqs, url, wait=20)
    attributes = message["MessageAttributes"]
    traceparent = attributes["traceparent"]["StringValue"]
    assert trace_context.is_traceparent(traceparent)
    assert traceparent.split("-")[1] == f"{app.get_span_context().trace_id:032x}"
    assert [name.lower() for name in attributes].count("traceparent") == 1
    # The instrumentation was on: its client span of the send is in the application's trace.
    sends = [s for s in instrumented.get_finished_spans()
             if s.name in ("SQS.SendMessage", "SQS.SendMessageBatch")]  # fmt: skip
    assert any(s.context.trace_id == app.get_span_context().trace_id for s in sends), sends
