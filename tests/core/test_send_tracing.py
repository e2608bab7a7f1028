"""How sends are traced (core/send_tracing.py): the protocols the send flows take. Without
tracing (`NoTracing`) a send has no span, no ambient trace and no warning; the senders'
tracing (`aws/sender.py`, OpenTelemetry's and X-Ray's) answers the same three questions, and a
span given ends with what was sent (`send_results.traced`)."""

from __future__ import annotations

import inspect

from sqsdelay.aws import sender as sender_module
from sqsdelay.core import send, send_results
from sqsdelay.core.send import Message
from sqsdelay.core.send_tracing import NoTracing, Tracing
from sqsdelay.settings import Settings

LIMITS = Settings(region="us-east-1").send_limits()


def _methods(cls: type) -> set[str]:
    return {n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}


def test_no_tracing_starts_no_span_and_finds_no_ambient_trace() -> None:
    planned = send.plan("orders", Message("m", delay=60), LIMITS, now=0)
    tracing = NoTracing()
    assert (tracing.start("orders"), tracing.placed(planned), tracing.ambient()) == (
        None,
        None,
        None,
    )


def test_the_senders_tracing_and_no_tracing_answer_what_the_protocol_asks() -> None:
    asked = _methods(Tracing)
    assert asked == {"start", "placed", "ambient"}
    assert _methods(NoTracing) == asked == _methods(sender_module._Tracing)


class Span:
    """A `Producer` that records how it ended."""

    def __init__(self) -> None:
        self.carrier: dict[str, str] = {}
        self.ended: list[tuple[str, str | None, str, int]] = []

    def sent(self, queue: str, sqs_message_id: str | None, message_id: str, due_ms: int) -> None:
        self.ended.append((queue, sqs_message_id, message_id, due_ms))

    def failed(self, exc: BaseException | None) -> None:
        raise AssertionError("not failed")


def test_a_span_ends_with_what_was_sent_and_its_due_time() -> None:
    planned = send.plan("orders", Message("m", delay=60), LIMITS, now=0)
    result = send_results.result_of(planned, "https://q", "sqs-1")
    span = Span()
    assert send_results.traced(span, planned, result, now=10.0) is result
    assert span.ended == [("orders", "sqs-1", result.message_id, 70_000)]
    assert send_results.traced(None, planned, result, now=10.0) is result
