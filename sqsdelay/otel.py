"""OpenTelemetry across the delay (`sqsdelay[otel]`, docs/opentelemetry.md): the one module
that imports it, and only when it is first needed. Without the package (or with
SQSDELAY_OTEL=off) every function here is a no-op and nothing is imported.

- the sender's `send` span and the W3C trace context it injects (`Producer`);
- the worker's spans, from the records the pure step keeps (`record_hops`);
- a consumer's handler span, a link to the producer's context or its child
  (`consumer_span`, SQSDELAY_OTEL_PARENT); a task queue's, from the context its task
  message carries in its body (`headers_span`: Dramatiq's options, Celery's headers,
  taskiq's labels), which the publisher puts there (`missing_context`).

The rules (the carrier's names, its room, a malformed one) are `core/trace_context.py`'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sqsdelay.core import consumer_message, message_shape, trace_context, wire_format
from sqsdelay.core.types import Attributes
from sqsdelay.errors import InvalidMessage
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.otel")

TRACER = "sqsdelay"
SYSTEM = "aws_sqs"  # messaging.system (OpenTelemetry's messaging semantic conventions)
_NOT_LOADED: Any = object()
_api: Any = _NOT_LOADED


class _Api:
    """The parts of opentelemetry-api sqsdelay uses, imported once."""

    def __init__(self) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.context = context
        self.trace = trace
        # W3C always, whatever the global propagator (X-Ray's rides in AWSTraceHeader).
        self.propagator = TraceContextTextMapPropagator()

    def tracer(self) -> Any:
        return self.trace.get_tracer(TRACER)


def _load(settings: Any) -> _Api | None:
    """The API, or None: SQSDELAY_OTEL=off, or opentelemetry-api not installed."""
    global _api
    if getattr(settings, "otel", "auto") == "off":
        return None
    if _api is _NOT_LOADED:
        try:
            _api = _Api()
        except ImportError:
            _api = None
    return _api  # type: ignore[no-any-return]


def enabled(settings: Any) -> bool:
    return _load(settings) is not None


def _child(settings: Any) -> bool:
    return getattr(settings, "otel_parent", "link") == "child"


def messaging(operation: str, destination: str, **more: Any) -> dict[str, Any]:
    """The messaging semantic conventions' attributes of a span that sends to SQS."""
    out = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": operation,
        "messaging.operation.type": "process" if operation == "process" else "send",
        "messaging.destination.name": destination,
    }
    return out | {k: v for k, v in more.items() if v is not None}


def _ns(epoch_ms: int) -> int:
    return epoch_ms * 1_000_000


def _placement(api: _Api, carried: Mapping[str, str], child: bool) -> dict[str, Any]:
    """A span's `context` (its parent) and `links`: the producer's span as the parent
    (child), or linked from a span whose parent is the ambient context (link)."""
    if not carried:
        return {}
    producer = api.propagator.extract(dict(carried))
    if child:
        return {"context": producer}
    span_context = api.trace.get_current_span(producer).get_span_context()
    if not span_context.is_valid:
        return {}
    link = api.trace.Link(span_context, {"messaging.operation.name": "send"})
    return {"links": [link]}


class Producer:
    """The sender's span of one message (`send <destination>`, kind PRODUCER), started
    without making it current (a flow's calls may be made in another context), and the
    trace context to inject: the span's own, else the active one."""

    def __init__(self, api: _Api, destination: str) -> None:
        self._api = api
        name = f"send {destination}"
        kind = api.trace.SpanKind.PRODUCER
        attrs = messaging("send", destination)
        self.span = api.tracer().start_span(name, kind=kind, attributes=attrs)
        carrier: dict[str, str] = {}
        ctx = api.trace.set_span_in_context(self.span) if self.span.is_recording() else None
        api.propagator.inject(carrier, context=ctx)
        self.carrier = carrier

    @classmethod
    def start(cls, settings: Any, destination: str) -> Producer | None:
        api = _load(settings)
        return None if api is None else cls(api, destination)

    def sent(self, queue: str, sqs_message_id: str | None, message_id: str, due_ms: int) -> None:
        self.span.update_name(f"send {queue}")  # the queue it went to, as the hops name theirs
        self.span.set_attributes(
            messaging(
                "send",
                queue,
                **{
                    "messaging.message.id": sqs_message_id,
                    "sqsdelay.message_id": message_id,
                    "sqsdelay.due_at": due_ms,
                },
            )
        )
        self.span.end()

    def failed(self, exc: BaseException | None) -> None:
        """End the span as failed (`exc` None: SQS refused the entry of a batch); a flow
        closed by its driver (GeneratorExit) only ends it."""
        if not isinstance(exc, GeneratorExit):
            if exc is not None:
                self.span.record_exception(exc)
            self.span.set_status(self._api.trace.Status(self._api.trace.StatusCode.ERROR))
        self.span.end()


def placed(planned: Any) -> None:
    """Say when the trace context found no room (the message went without it)."""
    spot = getattr(planned, "trace", None)
    if spot is not None and spot.skipped:
        log.warning(
            "delay.trace_context_skipped",
            message_id=planned.message_id,
            skipped=list(spot.skipped),
            reason="no room among the message's 10 attributes or its size limit",
        )


def record_hops(settings: Any, hops: Sequence[trace_context.Hop]) -> None:
    """The worker's spans (`requeue <queue>`, `hand-over <queue>`, ...), from the step's
    records, each a child of or linked to the context the message carries."""
    api = _load(settings)
    if api is None or not hops:
        return
    tracer, kind, child = api.tracer(), api.trace.SpanKind.PRODUCER, _child(settings)
    for hop in hops:
        attrs = messaging(
            hop.operation,
            hop.destination,
            **{
                "messaging.message.id": hop.sqs_message_id,
                "sqsdelay.message_id": hop.message_id,
                "sqsdelay.due_at": hop.due_ms,
            },
        )
        where = _placement(api, hop.context, child)
        if "context" not in where:  # a root of its own, not the ambient context's child
            where["context"] = api.context.Context()
        span = tracer.start_span(
            f"{hop.operation} {hop.destination}",
            kind=kind,
            attributes=attrs,
            start_time=_ns(hop.start_ms),
            **where,
        )
        span.end(end_time=_ns(max(hop.end_ms, hop.start_ms)))


@contextlib.contextmanager
def consumer_span(
    settings: Any,
    attributes: Attributes,
    queue: str,
    sqs_message_id: str | None = None,
    *,
    message_id: str | None = None,
) -> Iterator[Any]:
    """A handler's span (`process <queue>`, kind CONSUMER, current while it runs), linked to
    the context the message carries (default) or its child (SQSDELAY_OTEL_PARENT=child). A
    malformed context is left out with a warning; yields None when OpenTelemetry is off.
    `message_id`: sqsdelay's id when the attributes do not say it (a task's id, also its
    `messaging.message.id` when the SQS id is not known)."""
    api = _load(settings)
    if api is None:
        yield None
        return
    reason = trace_context.malformed(attributes)
    if reason:
        log.warning(
            "consumer.trace_context_dropped",
            sqs_message_id=sqs_message_id,
            message_id=message_id,
            queue=queue,
            reason=reason,
        )
    carried = trace_context.carried(attributes)
    ident = message_shape.string_value(attributes, wire_format.MESSAGE_ID_ATTRIBUTE) or message_id
    attrs = messaging(
        "process",
        queue,
        **{"messaging.message.id": sqs_message_id or message_id, "sqsdelay.message_id": ident},
    )
    with api.tracer().start_as_current_span(
        f"process {queue}",
        kind=api.trace.SpanKind.CONSUMER,
        attributes=attrs,
        **_placement(api, carried, _child(settings)),
    ) as span:
        yield span


def headers_span(
    settings: Any, headers: Mapping[str, object], queue: str, message_id: str | None
) -> contextlib.AbstractContextManager[Any]:
    """`consumer_span` of a task whose message carries the trace context in its body as
    headers (`traceparent`, `tracestate`; any other key is ignored). `message_id` (the
    task's id, which is sqsdelay's message id on the delayed route) is its
    `messaging.message.id`: the SQS id does not reach a task."""
    carried: Attributes = {
        k: message_shape.string_attribute(str(v))
        for k, v in headers.items()
        if k in trace_context.FIELDS and v is not None
    }
    return consumer_span(settings, carried, queue, message_id=message_id)


def failed(span: Any, exc: BaseException) -> None:
    """Mark a handler's span (from `consumer_span`; None when off) as failed with `exc`."""
    api = _api if _api is not _NOT_LOADED else None
    if span is None or api is None:
        return
    span.record_exception(exc)
    span.set_status(api.trace.Status(api.trace.StatusCode.ERROR, type(exc).__name__))


def missing_context(settings: Any, headers: Mapping[str, object]) -> dict[str, str]:
    """The active W3C trace context to add to a task message's headers or labels, or {}:
    OpenTelemetry off, no active span, or a `traceparent` there already (a retry keeps its
    original's; the task queue's own instrumentation put its own: never a second)."""
    if trace_context.TRACEPARENT in headers:
        return {}
    return active_context(settings)


def active_context(settings: Any) -> dict[str, str]:
    """The active span's W3C trace context as headers ({} when off or none): for carriers
    other than message attributes (a Dramatiq message's options)."""
    api = _load(settings)
    if api is None:
        return {}
    carrier: dict[str, str] = {}
    api.propagator.inject(carrier)
    return carrier


@contextlib.contextmanager
def message_span(settings: Any, message: object, queue_url: str | None = None) -> Iterator[Any]:
    """`consumer_span` of a received message in any shape `core/consumer_message.py` reads (a boto3
    message, a Lambda record, a Powertools SQSRecord); one it cannot read gets a span
    without a producer's context rather than no handler."""
    if _load(settings) is None:
        yield None
        return
    try:
        incoming = consumer_message.read(message, queue_url, need_queue=False)
        attributes, queue = incoming.received.attributes, incoming.queue.name
        ident: str | None = incoming.received.message_id
    except InvalidMessage:
        attributes, queue, ident = {}, "unknown", None
    with consumer_span(settings, attributes, queue, ident) as span:
        yield span
