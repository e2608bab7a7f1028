"""Parking's pure rules (core/parking.py), without Scheduler: the fire time, the at()
expression, and the schedule's input, which brings back whatever the producer wrote."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import parking, wire_format
from sqsdelay.core.delays import whole_seconds
from sqsdelay.core.parking import ParkTarget
from sqsdelay.errors import InvalidMessage

TARGET = ParkTarget(
    group="sqsdelay",
    role_arn="arn:aws:iam::123456789012:role/sqsdelay-scheduler",
    delay_queue_url="https://sqs.stub/123456789012/orders-delay.fifo",
    dead_letter_arn="arn:aws:sqs:us-east-1:123456789012:error",
)
values = st.one_of(
    st.text(min_size=1, max_size=40).map(lambda s: {"DataType": "String", "StringValue": s}),
    st.binary(min_size=1, max_size=40).map(lambda b: {"DataType": "Binary", "BinaryValue": b}),
)
attributes = st.dictionaries(st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,15}", fullmatch=True), values)


@given(due_ms=st.integers(10**12, 4 * 10**12), cycle=st.sampled_from([1, 2, 60, 900]))
def test_a_schedule_fires_in_whole_seconds_before_the_due_time_with_its_lead(
    due_ms: int, cycle: int
) -> None:
    fire = parking.fire_at_ms(due_ms, cycle)
    assert fire % 1000 == 0
    assert due_ms - parking.lead_seconds(cycle) * 1000 - 1000 < fire
    assert fire <= due_ms - parking.lead_seconds(cycle) * 1000
    assert parking.fire_ms_of(parking.at_expression(fire)) == fire


def test_only_at_expressions_have_a_fire_time() -> None:
    assert parking.fire_ms_of("rate(1 hour)") is None
    assert parking.expressible(parking.LAST_EXPRESSIBLE_MS)
    assert not parking.expressible(parking.LAST_EXPRESSIBLE_MS + 1) and not parking.expressible(-1)


@given(attrs=attributes, body=st.text(max_size=300), due=st.integers(0, 10**13))
def test_whatever_a_producer_wrote_comes_back_from_the_schedule(
    attrs: dict[str, dict[str, object]], body: str, due: int
) -> None:
    fire = parking.fire_at_ms(due + 10**9, 900)
    back = parking.back_attributes(attrs, due + 10**9, fire)  # type: ignore[arg-type]
    request = parking.create_schedule_request(
        name="n",
        fire_ms=fire,
        target=TARGET,
        body=body,
        attributes=back,
        group_id="g",
        dedup="d",
    )
    sent = parking.send_message_of(request["Target"]["Input"])
    assert sent["MessageBody"] == body and sent["MessageAttributes"] == back
    assert sent["QueueUrl"] == TARGET.delay_queue_url
    assert (sent["MessageGroupId"], sent["MessageDeduplicationId"]) == ("g", "d")
    left = int(back[wire_format.DELAY_ATTRIBUTE]["StringValue"])
    assert left == whole_seconds(due + 10**9 - fire)  # never early for a reader without DueAt


def test_a_conflict_is_ours_only_for_the_same_time_and_input() -> None:
    request = parking.create_schedule_request(
        name="n", fire_ms=10**12, target=TARGET, body="b", attributes={}, group_id="g", dedup="d"
    )
    assert parking.is_own_schedule(json.loads(json.dumps(request)), request)
    other = {**request, "ScheduleExpression": parking.at_expression(10**12 + 1000)}
    assert not parking.is_own_schedule(other, request)


def test_an_input_over_schedulers_limit_stays_in_the_loop() -> None:
    with pytest.raises(InvalidMessage, match="too large to park"):
        parking.create_schedule_request(
            name="n",
            fire_ms=10**12,
            target=TARGET,
            body="x" * (parking.MAX_INPUT_BYTES + 1),
            attributes={},
            group_id="g",
            dedup="d",
        )
