"""`replay-errors` with EventBridge Scheduler's own dead letters (core/parking.py reads them,
core/replay.py moves them), against the in-memory stub: a parked message goes back to its
delay queue and a recurring occurrence to its destination, each as its schedule would have
sent it, with a replay token; what cannot be read is refused with NotReplayable and stays
in the error queue, whatever a producer or Scheduler wrote in its attributes and body."""

from __future__ import annotations

import base64
import json
import string
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqsdelay.core import identity, message_shape, parking, recurring, tracing, wire_format
from sqsdelay.core.flows import drive
from sqsdelay.core.parking import NotReplayable
from sqsdelay.core.replay import replay_errors
from sqsdelay.settings import Settings
from tests.support.stub import StubAws

ERROR, DELAY, DESTINATION = "p-error", "p-orders-delay.fifo", "p-orders"
URL = "https://sqs.eu-central-1.amazonaws.com/123456789012/"
TARGET = parking.ParkTarget(
    "sqsdelay", "arn:aws:iam::1:role/s", URL + DELAY, "arn:aws:sqs:eu-central-1:1:p-error"
)
DUE_MS = 1_800_000_000_000
FIRE_MS = parking.fire_ms_of(parking.at_expression(DUE_MS - 1_020_000)) or 0


def parked_input(
    body: str = "hello", *, queue_url: str = URL + DELAY, attempt: bool = True, **attrs: Any
) -> str:
    """The input of a parked message's schedule, as the worker and the sender write it."""
    attributes: dict[str, Any] = {
        wire_format.MESSAGE_ID_ATTRIBUTE: message_shape.string_attribute("order-1"),
        "bin": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
        **attrs,
    }
    if attempt:
        attributes[wire_format.ATTEMPT_ATTRIBUTE] = message_shape.string_attribute("2")
    request = parking.create_schedule_request(
        name=identity.schedule_name(DELAY, "order-1"),
        fire_ms=FIRE_MS,
        target=parking.ParkTarget(TARGET.group, TARGET.role_arn, queue_url, TARGET.dead_letter_arn),
        body=body,
        attributes=parking.back_attributes(attributes, DUE_MS, FIRE_MS),
        group_id="order-1",
        dedup=identity.park_dedup_id("order-1", DUE_MS),
        trace_header="Root=1-5759e988-bd862e3fe1be46a994272793",
    )
    return str(request["Target"]["Input"])


def dead_letter(stub: StubAws, body: str, mid: str, **attributes: str) -> None:
    """Scheduler's dead letter: the input as the body, its attributes about the failure."""
    said = {
        "ERROR_CODE": "AWS.SimpleQueueService.NonExistentQueue",
        "ERROR_MESSAGE": "The specified queue does not exist.",
        "EXECUTION_ID": "ad06bd2c72b54b8a",
        "SCHEDULE_ARN": "arn:aws:scheduler:eu-central-1:1:schedule/sqsdelay/sqsdelay-ab",
        "TARGET_ARN": parking.SEND_MESSAGE_TARGET,
        **attributes,
    }
    stub.queues[ERROR].append(
        {
            "MessageBody": body,
            "MessageAttributes": {k: message_shape.string_attribute(v) for k, v in said.items()},
            "MessageId": mid,
        }
    )


def left_in_error_queue(stub: StubAws) -> list[str]:
    return [
        m["MessageId"]
        for i, m in enumerate(stub.queues[ERROR])
        if f"{ERROR}#{i}" not in stub.deleted[ERROR]
    ]


def test_a_parked_message_goes_back_to_its_delay_queue_as_its_schedule_would_have_sent_it() -> None:
    stub = StubAws()
    dead_letter(stub, parked_input(), "e-1")
    result = drive(replay_errors(ERROR, DELAY), stub)
    assert result.replayed == ["e-1"] and not result.skipped and not result.failed
    [back] = stub.queues[DELAY]
    assert back["MessageBody"] == "hello"
    attrs = back["MessageAttributes"]
    assert attrs["bin"] == {"DataType": "Binary", "BinaryValue": b"\x00\xff"}  # decoded
    assert attrs[wire_format.MESSAGE_ID_ATTRIBUTE]["StringValue"] == "order-1"
    assert attrs[wire_format.DUE_AT_ATTRIBUTE]["StringValue"] == str(DUE_MS)
    assert wire_format.DELAY_ATTRIBUTE in attrs
    assert attrs[wire_format.REPLAY_ATTRIBUTE]["StringValue"] == "e-1"  # a new delivery
    assert wire_format.ATTEMPT_ATTRIBUTE not in attrs  # its attempts start again
    assert not set(attrs) & set(parking.SCHEDULER_DEAD_LETTER_ATTRIBUTES)
    assert back["MessageGroupId"] == "order-1"
    assert back["MessageDeduplicationId"] == identity.replay_dedup_id("e-1")
    assert back["MessageSystemAttributes"][tracing.ATTRIBUTE]["StringValue"].startswith("Root=")
    assert left_in_error_queue(stub) == []


def test_a_replay_run_again_sends_the_same_deduplication_id() -> None:
    """A replay whose delete was lost and is run again within five minutes: FIFO drops the
    second copy (the same id), and the token is the same, so the registry and the guard
    see one replay."""
    stub = StubAws()
    dead_letter(stub, parked_input(), "e-1")
    stub.drop("DeleteMessage", times=1)
    first = drive(replay_errors(ERROR, DELAY), stub)
    assert list(first.not_deleted) == ["e-1"] and not first.failed and not first.replayed
    assert left_in_error_queue(stub) == []  # deleted, answer lost
    stub.deleted[ERROR].clear()  # as if the delete had not happened: it comes back
    stub.in_flight[ERROR].clear()
    again = drive(replay_errors(ERROR, DELAY), stub)
    assert again.replayed == ["e-1"]
    a, b = stub.queues[DELAY]
    assert a["MessageDeduplicationId"] == b["MessageDeduplicationId"]
    assert a["MessageAttributes"] == b["MessageAttributes"]


def occurrence_input(queue: str = "orders", **over: Any) -> str:
    limits = Settings(queue_prefix="p-").send_limits()
    fields: dict[str, Any] = {"name": "nightly", "rate": "1 day", "queue": queue, "body": "{}"}
    fields.update(over)
    schedule = recurring.RecurringSchedule.of(**fields)
    destination = "p-" + queue
    target = recurring.Target("g", "arn:aws:iam::1:role/r", URL + destination, "arn:e")
    return recurring.message_input(schedule, target, limits)


def test_a_recurring_occurrence_goes_to_its_destination_with_its_id() -> None:
    stub = StubAws()
    text = recurring.substituted(occurrence_input(), datetime(2027, 3, 29, tzinfo=UTC))
    dead_letter(stub, text, "e-1")
    result = drive(replay_errors(ERROR, DELAY), stub)
    assert result.replayed == ["e-1"], result.skipped
    [back] = stub.queues[DESTINATION]
    attrs = back["MessageAttributes"]
    occurrence = recurring.occurrence_of(attrs)
    assert occurrence is not None and occurrence.message_id == "nightly@2027-03-29T00:00:00Z"
    assert attrs[wire_format.REPLAY_ATTRIBUTE]["StringValue"] == "e-1"
    assert "MessageDeduplicationId" not in back  # a standard destination
    assert not stub.queues[DELAY]


def test_a_recurring_occurrence_sent_but_not_deleted_is_said_so_a_rerun_sends_it_again() -> None:
    """A standard destination has no deduplication id: a send that went out before its
    delete failed is reported apart from `failed`, as a second run delivers a second copy."""
    stub = StubAws()
    text = recurring.substituted(occurrence_input(), datetime(2027, 3, 29, tzinfo=UTC))
    dead_letter(stub, text, "e-1")
    stub.fail("DeleteMessage", "ServiceUnavailable", times=1, status=503)
    first = drive(replay_errors(ERROR, DELAY), stub)
    assert first.not_deleted == {"e-1": "ServiceUnavailable: stubbed"}
    assert not first.failed and not first.replayed
    assert left_in_error_queue(stub) == ["e-1"] and len(stub.queues[DESTINATION]) == 1
    again = drive(replay_errors(ERROR, DELAY), stub)
    assert again.replayed == ["e-1"] and left_in_error_queue(stub) == []
    assert len(stub.queues[DESTINATION]) == 2  # the copy the report warned of


def test_a_fifo_destinations_occurrence_keeps_its_group_and_gets_the_replays_dedup_id() -> None:
    stub = StubAws()
    text = recurring.substituted(occurrence_input("orders.fifo"), datetime(2027, 3, 29, tzinfo=UTC))
    dead_letter(stub, text, "e-1")
    fifo_delay = "p-orders-delay-fifo.fifo"
    result = drive(replay_errors(ERROR, fifo_delay), stub)
    assert result.replayed == ["e-1"], result.skipped
    [back] = stub.queues["p-orders.fifo"]
    assert back["MessageGroupId"] == "nightly"
    assert back["MessageDeduplicationId"] == identity.replay_dedup_id("e-1")


def test_another_destinations_schedule_is_left_and_said_so() -> None:
    stub = StubAws()
    dead_letter(stub, parked_input(queue_url=URL + "p-billing-delay.fifo"), "e-other")
    result = drive(replay_errors(ERROR, DELAY), stub)
    assert result.replayed == [] and not result.refused
    assert "belongs to 'p-billing-delay.fifo'" in result.skipped["e-other"]
    assert left_in_error_queue(stub) == ["e-other"] and not stub.in_flight[ERROR]


def test_what_cannot_be_read_is_refused_with_a_typed_error_and_stays() -> None:
    stub = StubAws()
    unfilled = occurrence_input()  # Scheduler did not fill in the occurrence's time
    own = {f"a{i}": message_shape.string_attribute("v") for i in range(6)}
    full = parked_input(attempt=False, **own)
    cases = {
        "e-text": "not json",
        "e-list": "[1, 2]",
        "e-keyword": unfilled,
        "e-no-room": full,  # ten attributes of its own: none left for the token
        "e-extra": json.dumps({"QueueUrl": URL + DELAY, "MessageBody": "x", "Entries": []}),
        "e-b64": json.dumps(
            {
                "QueueUrl": URL + DELAY,
                "MessageBody": "x",
                "MessageGroupId": "g",
                "MessageAttributes": {"b": {"DataType": "Binary", "BinaryValue": "%%"}},
            }
        ),
        "e-no-group": json.dumps({"QueueUrl": URL + DELAY, "MessageBody": "x"}),
    }
    for mid, body in cases.items():
        dead_letter(stub, body, mid)
    result = drive(replay_errors(ERROR, DELAY), stub)
    assert result.replayed == []
    assert set(result.refused) == set(cases)
    assert all(isinstance(e, NotReplayable) for e in result.refused.values())
    assert "context keyword" in str(result.refused["e-keyword"])
    assert "no room for sqsdelay.Replay" in str(result.refused["e-no-room"])
    assert "without a MessageGroupId" in str(result.refused["e-no-group"])
    assert all(result.skipped[m].startswith("not replayable: ") for m in cases)
    assert sorted(left_in_error_queue(stub)) == sorted(cases)
    assert not stub.queues[DELAY] and not stub.queues[DESTINATION]
    assert not stub.in_flight[ERROR]  # visible again when the scan ended


def test_the_workers_own_dead_letters_are_replayed_as_before_beside_schedulers() -> None:
    """A dead letter with sqsdelay.Failure is the worker's, whatever else it carries."""
    stub = StubAws()
    record = {"reason": "bad", "queue": DELAY, "delay_seconds": "60"}
    attrs = {
        wire_format.FAILURE_ATTRIBUTE: message_shape.string_attribute(json.dumps(record)),
        "SCHEDULE_ARN": message_shape.string_attribute("a producer's own attribute"),
    }
    stub.queues[ERROR].append({"MessageBody": "w", "MessageAttributes": attrs, "MessageId": "e-w"})
    dead_letter(stub, parked_input(), "e-s")
    result = drive(replay_errors(ERROR, DELAY), stub)
    assert sorted(result.replayed) == ["e-s", "e-w"]
    bodies = {m["MessageBody"]: m for m in stub.queues[DELAY]}
    assert bodies["w"]["MessageGroupId"] == identity.replay_dedup_id("e-w")  # its own group


# ---- whatever was written: refused or replayed, never lost ----

_text = st.text(alphabet=string.printable, max_size=12)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 1000) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_attribute_value = st.fixed_dictionaries(
    {"DataType": st.sampled_from(["String", "Number", "Binary", "String.x", "Bogus", ""])},
    optional={"StringValue": _json, "BinaryValue": _json, "Other": _json},
)
_valid_value = st.one_of(
    st.builds(message_shape.string_attribute, _text),
    st.binary(max_size=4).map(
        lambda b: {"DataType": "Binary", "BinaryValue": base64.b64encode(b).decode()}
    ),
)
# A request as a schedule writes it, then up to two of its fields (or one more) replaced by
# anything at all: each check is reached, not only the first.
_request = st.tuples(
    st.fixed_dictionaries(
        {
            "QueueUrl": st.sampled_from([URL + DELAY, URL + DESTINATION, URL + "x"]),
            "MessageBody": _text.filter(bool),
        },
        optional={
            "MessageAttributes": st.dictionaries(_text, _valid_value, max_size=10),
            "MessageGroupId": _text.filter(bool),
            "MessageDeduplicationId": _text,
            "DelaySeconds": st.integers(0, 900),
            "MessageSystemAttributes": st.just(
                {tracing.ATTRIBUTE: message_shape.string_attribute("Root=1")}
            ),
        },
    ),
    st.dictionaries(
        st.sampled_from(
            [
                "QueueUrl",
                "MessageBody",
                "MessageAttributes",
                "MessageGroupId",
                "DelaySeconds",
                "MessageSystemAttributes",
                "Extra",
            ]
        ),
        _json
        | st.integers(-1, 901)
        | st.dictionaries(_text, _attribute_value | _json, max_size=11)
        | st.dictionaries(
            st.sampled_from([tracing.ATTRIBUTE, "Other"]), _attribute_value | _json, max_size=2
        ),
        max_size=2,
    ),
).map(lambda pair: {**pair[0], **pair[1]})
_body = _request.map(json.dumps) | _text | st.sampled_from([parked_input(), occurrence_input()])
_said = st.dictionaries(
    st.sampled_from([*parking.SCHEDULER_DEAD_LETTER_ATTRIBUTES, "RETRY_ATTEMPTS", "x"]),
    _text.filter(bool),
    max_size=6,
).map(lambda d: {**d, "SCHEDULE_ARN": d.get("SCHEDULE_ARN", "arn")})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_body, _said), min_size=1, max_size=4))
def test_every_dead_letter_is_replayed_or_refused_and_none_is_lost(
    letters: list[tuple[str, dict[str, str]]],
) -> None:
    stub = StubAws()
    for i, (body, said) in enumerate(letters):
        dead_letter(stub, body, f"e-{i}", **said)
    result = drive(replay_errors(ERROR, DELAY), stub)
    ids = {f"e-{i}" for i in range(len(letters))}
    assert set(result.replayed) | set(result.skipped) | set(result.failed) == ids
    assert set(result.refused) <= set(result.skipped)
    assert all(isinstance(e, NotReplayable) for e in result.refused.values())
    # Every one not replayed is still in the error queue, visible; each replayed one was
    # sent (to the delay queue or the destination) before it left.
    assert set(left_in_error_queue(stub)) == ids - set(result.replayed)
    assert not stub.in_flight[ERROR]
    sent = stub.queues[DELAY] + stub.queues[DESTINATION]
    assert len(sent) == len(result.replayed)
    for message in sent:
        attrs = message["MessageAttributes"]
        assert len(attrs) <= 10 and attrs[wire_format.REPLAY_ATTRIBUTE]["StringValue"] in ids
        assert not set(attrs) & set(parking.SCHEDULER_DEAD_LETTER_ATTRIBUTES) - {"x"}


@settings(max_examples=300, deadline=None)
@given(_body)
def test_reading_a_dead_letter_raises_nothing_but_not_replayable(body: str) -> None:
    try:
        resend = parking.resend_of_dead_letter(body)
    except NotReplayable:
        return
    assert resend.queue and isinstance(resend.body, str) and resend.body
    for value in resend.attributes.values():
        assert ("StringValue" in value) != ("BinaryValue" in value)
