"""One batch in hand (core/batch_in_hand.py): where each record ends (moved, held, dropped,
released) with the events, metrics and spans each end counts, the broker's time the batch
reckons with, and how events name a message."""

from __future__ import annotations

import dataclasses
from typing import Any

from sqsdelay.core import wire_format
from sqsdelay.core.batch_in_hand import BatchInHand, event_ids
from sqsdelay.core.decision import HandOver, Park, Requeue
from sqsdelay.core.metrics import CANCELLED, EVENT_METRICS, HELD, window
from sqsdelay.core.outcomes import BatchEnds, Held
from sqsdelay.core.record_decisions import outgoing
from sqsdelay.core.step_state import StepState
from tests.support.steps import CONFIG, Clock, Q, T, message

DUE = T + 60_000


def batch(spans: bool = False) -> tuple[BatchInHand, Clock]:
    clock = Clock()
    config = dataclasses.replace(CONFIG, spans=spans)
    b = BatchInHand(
        queues=Q, target=None, config=config, state=StepState(), clock=clock,
        local_ms=T, deadline=clock() + 48, outcome=BatchEnds(),
    )  # fmt: skip
    return b, clock


def with_id(value: str, **system: str) -> Any:
    attrs = {wire_format.MESSAGE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": value}}
    return message(1, 60, attrs=attrs, **system)


def test_events_name_a_message_by_its_own_id_then_its_group_then_its_sqs_id() -> None:
    assert event_ids(with_id("order-7")) == {"message_id": "order-7", "sqs_message_id": "id1"}
    # not an id SQS would take as a group id: a foreign message, named by its group
    assert event_ids(with_id("no spaces allowed")) == {"message_id": "g1", "sqs_message_id": "id1"}
    bare = dataclasses.replace(message(1, 60), system={})
    assert event_ids(bare) == {"message_id": "id1", "sqs_message_id": "id1"}


def test_the_broker_time_is_the_arrival_plus_the_time_since_plus_the_offset() -> None:
    b, clock = batch()
    assert b.broker_ms() == T
    clock.advance(1.5)
    b.offset_ms = 2000
    assert b.broker_ms() == T + 1500 + 2000


def test_a_hand_over_counts_its_event_and_lateness_and_forgets_its_failures() -> None:
    b, clock = batch()
    m = message(1, 60)
    b.state.failures.record(m.message_id, "throttled", message_fault=False)
    clock.advance(59.5)  # sent with 1 s of DelaySeconds left: half a second late
    out = outgoing(m, HandOver(1, DUE, {}))
    b.moved(out)
    assert b.done == [out] and b.outcome.ends == {"id1": "handed-over"}
    assert b.state.stats.events["delay.handed_over"] == 1
    assert b.state.stats.tally.counts[(Q.destination, EVENT_METRICS["delay.handed_over"])] == 1
    assert b.state.stats.tally.lateness[Q.destination] == [500]
    assert b.state.failures.get(m.message_id).last_error is None
    assert b.outcome.spans == []  # spans only when OpenTelemetry asks for them


def test_a_requeue_counts_the_window_it_is_due_in() -> None:
    b, _ = batch()
    b.moved(outgoing(message(1, 3600), Requeue(3600, T + 3_600_000, {}, "g", "d")))
    assert b.outcome.ends == {"id1": "requeued"}
    assert b.state.stats.tally.counts[(Q.destination, window(3_600_000))] == 1
    assert b.state.stats.tally.lateness == {}


def test_a_moved_record_is_a_span_to_the_queue_it_went_to_a_parked_ones_the_delay_queue() -> None:
    b, clock = batch(spans=True)
    clock.advance(0.25)
    b.moved(outgoing(with_id("order-7"), HandOver(60, DUE, {})))
    fallback = Requeue(900, DUE, {}, "g", "d")
    b.moved(outgoing(message(2, 86_400), Park(86_400, DUE, {}, "id2", DUE - 1000, fallback)))
    hand_over, park = b.outcome.spans
    assert (hand_over.operation, hand_over.destination, hand_over.message_id) == (
        "hand-over",
        Q.destination,
        "order-7",
    )
    assert (hand_over.start_ms, hand_over.end_ms, hand_over.due_ms) == (T, T + 250, DUE)
    assert (park.operation, park.destination) == ("park", Q.delay)


def test_a_dropped_record_is_cancelled_or_a_duplicate_and_counts_as_cancelled() -> None:
    b, _ = batch()
    cancelled, duplicate = message(1, 60), message(2, 60)
    b.drop(cancelled, "cancelled")
    b.drop(duplicate, "duplicate")
    assert b.dropped == [cancelled, duplicate] and b.done == []
    assert b.outcome.ends == {"id1": "cancelled", "id2": "dropped"}
    events = b.state.stats.events
    assert (events["delay.cancelled"], events["delay.duplicate_dropped"]) == (1, 1)
    assert b.state.stats.tally.counts[(Q.destination, CANCELLED)] == 2


def test_a_held_record_waits_with_its_reason_and_a_copy_in_hand_is_released() -> None:
    b, _ = batch()
    held, copy = message(1, 60), message(2, 60)
    b.hold(held, 30, "Scheduler throttled")
    b.release(copy)
    assert b.outcome.ends == {"id1": "held"}  # a released copy has no end: it comes back
    assert b.outcome.held == [Held(held, 30, "Scheduler throttled")]
    assert b.outcome.released == [copy]
    assert b.state.stats.tally.counts[(Q.destination, HELD)] == 1
    assert b.state.stats.events["delay.copy_in_hand"] == 1
