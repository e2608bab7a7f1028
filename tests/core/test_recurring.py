"""Recurring schedules' rules (core/recurring.py): the checked model, the request, an
occurrence read back, and what sync changes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from sqsdelay.core import parking, recurring, recurring_sync
from sqsdelay.core.recurring import RecurringSchedule
from sqsdelay.errors import InvalidInput, InvalidSchedule
from sqsdelay.settings import Settings

TARGET = recurring.Target(
    "sqsdelay-recurring",
    "arn:aws:iam::123456789012:role/r",
    "https://sqs.eu-central-1.amazonaws.com/123456789012/p-orders",
    "arn:aws:sqs:eu-central-1:123456789012:p-error",
)


def schedule(**over: Any) -> RecurringSchedule:
    fields: dict[str, Any] = {
        "name": "nightly",
        "cron": "0 9 * * MON-FRI",
        "timezone": "Europe/Berlin",
        "queue": "orders",
        "body": '{"task": "report"}',
    }
    fields.update(over)
    return RecurringSchedule.of(**fields)


def limits(**over: Any) -> Any:
    return Settings(queue_prefix="p-", **over).send_limits()


def test_the_request_sends_an_ordinary_message_with_the_occurrence_filled_in_by_scheduler() -> None:
    r = recurring.request(schedule(), TARGET, limits(), set_name="jobs")
    assert r["ScheduleExpression"] == "cron(0 9 ? * MON,TUE,WED,THU,FRI *)"
    assert r["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert r["Target"]["Arn"] == parking.SEND_MESSAGE_TARGET
    assert r["Target"]["DeadLetterConfig"] == {"Arn": TARGET.dead_letter_arn}
    assert r["Target"]["RetryPolicy"] == parking.RETRY_POLICY
    assert recurring.managed_set(r) == "jobs"
    sent = parking.send_message_of(
        recurring.substituted(r["Target"]["Input"], datetime(2026, 3, 30, 7, tzinfo=UTC))
    )
    assert sent["QueueUrl"] == TARGET.queue_url
    assert sent["MessageBody"] == '{"task": "report"}'
    attrs = sent["MessageAttributes"]
    assert attrs["NServiceBus.MessageId"]["StringValue"] == "nightly@2026-03-30T07:00:00Z"
    found = recurring.occurrence_of(attrs)
    assert found == recurring.Occurrence(
        "nightly", datetime(2026, 3, 30, 7, tzinfo=UTC), "nightly@2026-03-30T07:00:00Z"
    )


def test_the_same_schedule_makes_the_same_request() -> None:
    typed = schedule(message_type="Sales.Report, Sales")
    one = recurring.request(typed, TARGET, limits(wire_format="nservicebus"), set_name="s")
    two = recurring.request(typed, TARGET, limits(wire_format="nservicebus"), set_name="s")
    assert one == two
    with pytest.raises(InvalidInput, match="message type"):
        recurring.request(schedule(), TARGET, limits(wire_format="nservicebus"))


def test_nservicebus_envelope_carries_the_occurrence_id() -> None:
    r = recurring.request(
        schedule(message_type="Sales.Report, Sales"), TARGET, limits(wire_format="nservicebus")
    )
    text = recurring.substituted(r["Target"]["Input"], datetime(2026, 3, 30, 7, tzinfo=UTC))
    body = json.loads(json.loads(text)["MessageBody"])
    assert body["Headers"]["NServiceBus.MessageId"] == "nightly@2026-03-30T07:00:00Z"


def test_a_fifo_destination_gets_a_group_and_the_occurrence_as_deduplication_id() -> None:
    r = recurring.request(schedule(queue="orders.fifo"), TARGET, limits())
    sent = json.loads(r["Target"]["Input"])
    assert sent["MessageGroupId"] == "nightly"
    assert sent["MessageDeduplicationId"] == "nightly@" + recurring.SCHEDULED_TIME


@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"name": "has space"}, "1-64 letters"),
        ({"name": "x" * 65}, "1-64 letters"),
        ({"name": "sqsdelay-" + "a" * 48}, "parked message"),
        ({"cron": "0 9 * * * *"}, "exactly one of them must be ?"),
        ({"cron": None, "rate": "5 weeks"}, "not a rate"),
        ({"cron": None}, "either a cron or a rate"),
        ({"rate": "5 minutes"}, "either a cron or a rate"),
        ({"timezone": "Europe/Atlantis"}, "IANA"),
        ({"flexible_window_minutes": 0}, "1 to 1440"),
        ({"start": datetime(2027, 2, 1), "end": datetime(2027, 1, 1)}, "not after the start"),
        ({"body": ""}, "non-empty"),
        ({"max_retry_attempts": 186}, "0 to 185"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_input_is_refused_before_any_call(over: dict[str, Any], says: str) -> None:
    with pytest.raises(InvalidSchedule, match=says):
        schedule(**over)


def test_a_body_over_the_limit_is_refused() -> None:
    big = schedule(body="x" * (parking.MAX_INPUT_BYTES - 100))
    with pytest.raises(InvalidSchedule, match="Scheduler takes 262144"):
        recurring.request(big, TARGET, limits())
    with pytest.raises(InvalidInput, match="limit"):
        recurring.request(schedule(body="x" * 2_000_000), TARGET, limits())


def test_every_occurrence_carries_its_id_or_the_schedule_is_refused() -> None:
    """Beside sqsdelay.Schedule and sqsdelay.ScheduledTime, the id needs a slot: with 8
    attributes of the schedule's own it was dropped (the guard then refused every
    occurrence); now the schedule is refused before any call, saying how many fit."""
    seven = {f"a{i}": "v" for i in range(7)}
    sent = json.loads(
        recurring.request(schedule(attributes=seven), TARGET, limits())["Target"]["Input"]
    )
    assert "NServiceBus.MessageId" in sent["MessageAttributes"]
    with pytest.raises(InvalidSchedule, match="at most 7 attributes"):
        recurring.request(schedule(attributes={**seven, "a7": "v"}), TARGET, limits())


def test_dates_against_schedulers_clock() -> None:
    now = datetime(2026, 11, 28, 12, tzinfo=UTC).timestamp()
    with pytest.raises(InvalidSchedule, match=r"start .* is in the past"):
        schedule(start=datetime(2026, 11, 28, 11, tzinfo=UTC)).check_dates(now)
    with pytest.raises(InvalidSchedule, match=r"end .* is in the past"):
        schedule(end=datetime(2026, 11, 1, tzinfo=UTC)).check_dates(now)
    naive = schedule(start=datetime(2027, 1, 4, 9))  # in the schedule's zone
    assert naive.start == datetime(2027, 1, 4, 8, tzinfo=UTC)


def test_an_occurrence_without_schedulers_time_is_refused() -> None:
    attrs = {
        recurring.SCHEDULE_ATTRIBUTE: {"DataType": "String", "StringValue": "n"},
        recurring.SCHEDULED_TIME_ATTRIBUTE: {
            "DataType": "String",
            "StringValue": recurring.SCHEDULED_TIME,
        },
    }
    with pytest.raises(InvalidInput, match="did not fill in"):
        recurring.occurrence_of(attrs)
    assert recurring.occurrence_of({}) is None


def existing(r: dict[str, Any], **over: Any) -> dict[str, Any]:
    return {**r, "Arn": "arn", "CreationDate": datetime(2026, 1, 1, tzinfo=UTC), **over}


def test_sync_plans_only_its_own_set() -> None:
    keep = recurring.request(schedule(name="keep"), TARGET, limits(), set_name="jobs")
    change = recurring.request(schedule(name="change"), TARGET, limits(), set_name="jobs")
    new = recurring.request(schedule(name="new"), TARGET, limits(), set_name="jobs")
    have = {
        "keep": existing(keep),
        "change": existing(change, ScheduleExpression="cron(0 8 * * ? *)"),
        "gone": existing(
            recurring.request(schedule(name="gone"), TARGET, limits(), set_name="jobs")
        ),
        "other": existing(
            recurring.request(schedule(name="other"), TARGET, limits(), set_name="x")
        ),
        "hand": existing(recurring.request(schedule(name="hand"), TARGET, limits())),
        "foreign": {"Name": "foreign", "Description": "not ours"},
    }
    plan = recurring_sync.plan_sync([keep, change, new], have, "jobs")
    assert [r["Name"] for r in plan.create] == ["new"]
    assert [(r["Name"], r["_changed"]) for r in plan.update] == [("change", ["ScheduleExpression"])]
    assert plan.delete == ["gone"]
    assert plan.unchanged == ["keep"]
    assert plan.lines()[0].startswith("+ new")
    taken = recurring.request(schedule(name="other"), TARGET, limits(), set_name="jobs")
    with pytest.raises(InvalidSchedule, match="belongs to set 'x'"):
        recurring_sync.plan_sync([taken], have, "jobs")
    with pytest.raises(InvalidSchedule, match="twice"):
        recurring_sync.plan_sync([keep, keep], have, "jobs")


def test_a_sync_file_is_read_and_checked_whole() -> None:
    data = {
        "set": "jobs",
        "schedules": [{"name": "a", "rate": "5 minutes", "queue": "q", "body": "b"}],
    }
    name, group, got = recurring_sync.read_set(data, "file")
    assert (name, group, got[0].expression) == ("jobs", None, "rate(5 minutes)")
    bad = {"schedules": [{"name": "a", "cron": "0 9 * *", "queue": "q", "body": "b"}]}
    with pytest.raises(InvalidSchedule, match=r"schedules\[0\] \('a'\)"):
        recurring_sync.read_set(bad, "file")
    with pytest.raises(InvalidSchedule, match="unknown keys"):
        recurring_sync.read_set({"schedule": []}, "file")
