"""The batch step driven call by call by the stub SQS and Scheduler: no server at all."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sqsdelay.core import tracing, wire_format
from sqsdelay.core.decision import Limits
from sqsdelay.core.queue_names import is_group_id
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.core.received import Received
from sqsdelay.core.step import StepConfig, StepState
from tests.support.steps import DAY, PARK_AFTER, QF, Clock, Q, message, run
from tests.support.stub import StubAws


def failure_reason(entry: dict[str, Any]) -> str:
    reason: str = json.loads(
        entry["MessageAttributes"][wire_format.FAILURE_ATTRIBUTE]["StringValue"]
    )["reason"]
    return reason


def test_a_mangled_due_time_never_stops_the_batch() -> None:
    # "²" passes str.isdigit() but not int(): it used to raise out of the decision and end
    # the worker's TaskGroup, then the next worker's.
    mangled = ["²", "٣", "9" * 40, "-5", "1e3", "", " 7"]
    batch = [
        message(
            i, 60, attrs={wire_format.DUE_AT_ATTRIBUTE: {"DataType": "Number", "StringValue": v}}
        )
        for i, v in enumerate(mangled)
    ]
    batch.append(message(99, 60))
    stub = StubAws()
    outcome = run(batch, stub)
    assert outcome.ends == {m.message_id: "handed-over" for m in batch}
    # The NServiceBus delay decided instead of the mangled due time: 60 s after SentTimestamp.
    assert {e["DelaySeconds"] for e in stub.queues["orders"]} == {60}
    assert sorted(stub.deleted[Q.delay]) == sorted(m.receipt_handle for m in batch)


def test_a_delay_too_large_for_a_date_is_dead_lettered_with_the_reason_parking_on() -> None:
    # Thirty 9s used to raise OverflowError in parking.at_expression.
    stub = StubAws()
    outcome = run([message(1, "9" * 30), message(2, "99999999999"), message(3, 3 * DAY)], stub)
    assert outcome.ends == {"id1": "dead-lettered", "id2": "dead-lettered", "id3": "parked"}
    reasons = [failure_reason(e) for e in stub.queues["error"]]
    assert all("SQSDELAY_MAX_DELAY_SECONDS" in r or "not an integer" in r for r in reasons)
    assert any("SQSDELAY_MAX_DELAY_SECONDS" in r for r in reasons)


def test_requeues_back_off_while_receives_work() -> None:
    # Sends to the delay queue fail (a KMS grant for Decrypt without GenerateDataKey), while
    # receives succeed: the second batch must not try again before the backoff is over.
    stub = StubAws()
    stub.fail("SendMessageBatch", "KMS.AccessDeniedException", queue=Q.delay)
    state, clock = StepState(), Clock()
    first = run([message(1, 3 * DAY)], stub, state=state, clock=clock, target=None)
    assert first.ends == {"id1": "held"} and first.held[0].wait_seconds >= 1
    clock.advance(0.2)  # the worker receives again at once
    second = run([message(2, 3 * DAY)], stub, state=state, clock=clock, target=None)
    assert second.ends == {"id2": "held"}
    assert second.held[0].reason == "target backing off"
    assert stub.count("SendMessageBatch", Q.delay) == 1
    assert stub.count("DeleteMessageBatch") == 0  # nothing unsent is ever deleted


def test_scheduler_calls_fit_the_batch_budget_and_stop_when_the_breaker_opens() -> None:
    stub = StubAws()
    stub.timeout("CreateSchedule")
    clock = Clock()
    start = clock()
    config = StepConfig(
        limits=Limits(park_after_seconds=PARK_AFTER), call_timeout=20, park_concurrency=3
    )
    batch = [message(i, 3 * DAY) for i in range(10)]
    outcome = run(batch, stub, config=config, clock=clock, budget=48)
    creates = [c for c in stub.calls if c.api == "CreateSchedule"]
    # One round of three at once (bounded concurrency), then the breaker stops the rest.
    assert len(creates) == 3 and [c.api for c in stub.rounds[0]] == ["CreateSchedule"] * 3
    assert all(c.timeout is not None and 0 < c.timeout <= 20 for c in stub.calls)
    assert set(outcome.ends.values()) == {"requeued"}  # the loop took over, nothing lost
    assert clock() - start <= 48


def test_a_slow_scheduler_leaves_the_sends_their_time() -> None:
    # Every round of parks is answered only at its time limit; parking stops at its share
    # of the budget and everything left is requeued within the budget.
    stub = StubAws()
    stub.timeout("CreateSchedule", times=1)
    stub.timeout("CreateSchedule")
    state, clock = StepState(), Clock()
    state.scheduler.failure = lambda *_: 0.0  # type: ignore[method-assign]  # never opens
    start = clock()
    batch = [message(i, 3 * DAY) for i in range(10)]
    config = StepConfig(
        limits=Limits(park_after_seconds=PARK_AFTER), call_timeout=10, park_concurrency=2
    )
    outcome = run(batch, stub, config=config, state=state, clock=clock, budget=48)
    assert set(outcome.ends.values()) == {"requeued"}
    assert clock() - start <= 48
    assert stub.count("CreateSchedule") < 10  # the park phase ran out of time


def test_a_record_that_cannot_even_be_dead_lettered_is_held_and_the_rest_move() -> None:
    odd = message(1, 60, attrs={"n": {"DataType": "String", "StringValue": 5}})
    stub = StubAws()
    outcome = run([odd, message(2, 60), message(3, 3 * DAY)], stub, target=None)
    assert outcome.ends == {"id1": "held", "id2": "handed-over", "id3": "requeued"}
    assert [e["ReceiptHandle"] for e in stub.hidden[Q.delay]] == ["rh1"]
    assert sorted(stub.deleted[Q.delay]) == ["rh2", "rh3"]


def test_a_lost_send_answer_holds_the_message_and_keeps_the_original() -> None:
    stub = StubAws()
    stub.drop("SendMessageBatch", queue="orders")
    outcome = run([message(1, 60)], stub)
    assert outcome.ends == {"id1": "held"}
    assert stub.queues["orders"] and not stub.deleted[Q.delay]  # at least once, never lost


def test_a_batch_refused_for_its_content_is_retried_entry_by_entry() -> None:
    stub = StubAws()
    stub.fail("SendMessageBatch", "InvalidParameterValue", queue="orders", times=1)
    stub.fail_entries("SendMessageBatch", "InvalidMessageContents", queue="orders")
    outcome = run([message(1, 60), message(2, 60)], stub)
    assert outcome.ends == {"id1": "held", "id2": "held"}
    assert stub.count("SendMessageBatch", "orders") == 3


def test_a_stop_budget_counts_every_call_of_a_batch() -> None:
    from sqsdelay.settings import Settings

    s = Settings()
    assert s.batch_budget_seconds() <= 0.8 * s.visibility_timeout_seconds
    assert s.stop_budget_seconds() == s.receive_deadline_seconds() + s.batch_budget_seconds()
    assert s.receive_deadline_seconds() == s.wait_time_seconds + 5
    assert s.stop_budget_seconds() <= 75


# -- properties --------------------------------------------------------------------------

texts = st.one_of(
    st.text(max_size=30),
    st.from_regex(r"[+-]?[0-9]{1,40}", fullmatch=True),
    st.sampled_from(["²", "٣", "1e3", " 5", "9" * 30, "-0", "", "1" * 5000]),
)
values = st.one_of(
    st.builds(
        lambda t, v: {"DataType": t, "StringValue": v},
        st.sampled_from(["String", "Number", "String.x", "Binary"]),
        st.one_of(texts, st.none(), st.integers()),
    ),
    st.builds(lambda b: {"DataType": "Binary", "BinaryValue": b}, st.binary(max_size=20)),
    st.builds(lambda t: {"DataType": t}, st.text(max_size=5)),
)
names = st.one_of(
    st.sampled_from(
        [
            wire_format.DELAY_ATTRIBUTE,
            wire_format.DUE_AT_ATTRIBUTE,
            wire_format.MESSAGE_ID_ATTRIBUTE,
            wire_format.FAILURE_ATTRIBUTE,
            wire_format.GROUP_ID_ATTRIBUTE,
            wire_format.DELAY_MS_ATTRIBUTE,
        ]
    ),
    st.text(min_size=1, max_size=12),
)
stamps = st.one_of(st.integers(0, 2**53).map(str), texts)
records = st.lists(
    st.tuples(
        st.dictionaries(names, values, max_size=12),
        stamps,
        stamps,
        st.one_of(st.integers(1, 6).map(str), texts),
        st.one_of(st.none(), st.just("Root=1-5759e988-bd862e3fe1be46a994272793"), texts),
    ),
    max_size=10,
)
FAULTS = ["fail", "throttle", "timeout", "drop", "entries", None]
APIS = [
    "SendMessageBatch",
    "DeleteMessageBatch",
    "ChangeMessageVisibilityBatch",
    "CreateSchedule",
    "GetSchedule",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.lists(st.sampled_from(FAULTS), min_size=5, max_size=5), st.integers(-1, 9))
# found by hypothesis: a broker clock at the end of year 9999 made the at() expression raise
@example(
    recs=[
        (
            {wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": "9000"}},
            "253402292820000",
            "0",
            "1",
            None,
        )
    ],
    faults=["fail"] * 5,
    skew_s=0,
)
@pytest.mark.parametrize("queues", [Q, QF], ids=["delay-queue", "fifo-staging"])
def test_any_batch_ends_every_record_in_exactly_one_place(
    queues: QueueTrio,
    recs: list[tuple[dict[str, Any], str, str, str, str | None]],
    faults: list[str | None],
    skew_s: int,
) -> None:
    """Whatever a producer wrote, from a delay queue or a FIFO destination's staging queue."""
    stub = StubAws()
    for api, fault in zip(APIS, faults, strict=True):
        if fault == "fail":
            stub.fail(api, "InternalError", status=500)
        elif fault == "throttle":
            stub.throttle(api)
        elif fault == "timeout":
            stub.timeout(api)
        elif fault == "drop":
            stub.drop(api)
        elif fault == "entries" and api.endswith("Batch"):
            stub.fail_entries(api, "InvalidMessageContents")
    batch = [
        Received(
            f"id{i}",
            f"rh{i}",
            "body",
            attrs,  # type: ignore[arg-type]  # whatever a producer wrote
            {
                "SentTimestamp": sent,
                "ApproximateFirstReceiveTimestamp": first,
                "ApproximateReceiveCount": count,
                **({tracing.ATTRIBUTE: trace} if trace is not None else {}),
            },
        )
        for i, (attrs, sent, first, count, trace) in enumerate(recs)
    ]
    clock = Clock()
    clock.advance(skew_s)
    state = StepState()
    outcome = run(batch, stub, clock=clock, state=state, queues=queues)
    assert set(outcome.ends) == {m.message_id for m in batch}
    # The metrics count each end once, and a lateness is never negative.
    tally = state.stats.tally
    ends = [e for e in outcome.ends.values() if e != "held"]
    assert sum(
        n for (_, m), n in tally.counts.items() if not m.startswith(("Due", "Sched"))
    ) == len(outcome.ends)
    lateness = tally.lateness.get(queues.destination, [])
    assert len(lateness) == (0 if queues.forwards else ends.count("handed-over"))
    assert all(v >= 0 for v in lateness)
    held = [h.source.message_id for h in outcome.held]
    assert len(held) == len(set(held)) and set(held) == {
        i for i, end in outcome.ends.items() if end == "held"
    }
    moved = {m.receipt_handle for m in batch if outcome.ends[m.message_id] != "held"}
    assert set(stub.deleted[queues.delay]) <= moved  # nothing held or unsent is ever deleted
    for entry in stub.queues["orders"]:  # never early: the hand-over waits out what is left
        assert 0 <= entry.get("DelaySeconds", 0) <= 900
        assert is_group_id(entry.get("MessageGroupId", "g"))  # a fair queue's tenant
    for entry in [e for sent in stub.queues.values() for e in sent]:  # a trace SQS takes
        header = entry.get("MessageSystemAttributes", {}).get(tracing.ATTRIBUTE)
        assert header is None or tracing.is_header(header["StringValue"])
    for entry in stub.queues["orders.fifo"]:  # in the sender's group, deduplicated by its id
        assert "DelaySeconds" not in entry and entry["MessageGroupId"]
        assert len(entry["MessageDeduplicationId"]) == 64
        assert wire_format.GROUP_ID_ATTRIBUTE not in entry.get("MessageAttributes", {})
