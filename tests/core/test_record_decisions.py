"""A received batch's decisions (core/record_decisions.py): the clock offset its first
receives feed and its redeliveries use, each decision as its outgoing entry, and a record
whose decision fails, dead-lettered with the reason or, when even that fails, held."""

from __future__ import annotations

from typing import Any

import pytest

from sqsdelay.core import message_shape, record_decisions
from sqsdelay.core.clock import ClockOffset
from sqsdelay.core.decision import HandOver, Limits, Poison
from sqsdelay.core.failures import FailureLog
from sqsdelay.core.record_decisions import decide_batch, decide_one, outgoing
from tests.support.steps import T, message

SOURCE = "orders-delay.fifo"


def decide(batch: list[Any], offset: ClockOffset | None = None, **options: Any) -> Any:
    return decide_batch(
        batch, local_ms=T, offset=offset or ClockOffset(), lim=Limits(), source_queue=SOURCE,
        **options,
    )  # fmt: skip


def test_a_first_receive_sets_the_offset_that_a_redelivery_before_it_in_the_batch_uses() -> None:
    """The broker's clock is 2 s ahead of ours: a message due 60 s after it was sent is
    handed over with 58 s left, the redelivery too though it comes first in the batch."""
    offset = ClockOffset()
    again = message(2, 60, ApproximateReceiveCount="2", ApproximateFirstReceiveTimestamp="0")
    first = message(1, 60, ApproximateFirstReceiveTimestamp=str(T + 2000))
    outs, stuck = decide([again, first], offset)
    assert offset.estimate() == 2000 and not stuck
    assert [(o.source, o.decision.remaining_seconds) for o in outs] == [(again, 58), (first, 58)]


def test_a_redelivery_or_a_first_receive_without_its_time_teaches_the_offset_nothing() -> None:
    offset = ClockOffset()
    again = message(1, 60, ApproximateReceiveCount="2", ApproximateFirstReceiveTimestamp="5")
    decide([again, message(2, 60, ApproximateFirstReceiveTimestamp="soon")], offset)
    assert offset.estimate() is None  # none observed: the decisions use the local clock


def test_a_decision_is_its_outgoing_entry_with_the_body_attributes_and_size() -> None:
    m = message(1, 60)
    out = outgoing(m, HandOver(58, T + 60_000, {"a": {"DataType": "String", "StringValue": "v"}}))
    assert out.target == "destination" and out.source is m
    assert out.entry == {
        "MessageBody": "body 1",
        "DelaySeconds": 58,
        "MessageAttributes": {"a": {"DataType": "String", "StringValue": "v"}},
    }
    assert out.size == message_shape.message_size("body 1", out.decision.attributes)
    assert "MessageAttributes" not in outgoing(m, Poison("bad", {})).entry


def test_a_fault_of_ours_dead_letters_the_record_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_a: Any, **_k: Any) -> Any:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(record_decisions, "decide", broken)
    m = message(1, 60)
    out = decide_one(
        m, local_ms=T, offset_ms=0, lim=Limits(), source_queue=SOURCE, failures=FailureLog()
    )
    assert out is not None and isinstance(out.decision, Poison) and out.target == "error"
    assert out.decision.reason == "cannot be handled (ZeroDivisionError: a bug)"
    assert out.decision.attributes == m.attributes  # the record as it came, for a replay


def test_a_record_that_cannot_even_be_dead_lettered_is_held_not_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_a: Any, **_k: Any) -> Any:
        raise ValueError("no entry")

    monkeypatch.setattr(record_decisions, "outgoing", broken)
    batch = [message(1, 60), message(2, 60)]
    outs, stuck = decide(batch)
    assert outs == [] and stuck == batch
