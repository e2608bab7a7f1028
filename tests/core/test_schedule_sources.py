"""The schedulers' declarations as recurring schedules: the pure rules, and the entries
refused (naming the entry and what to do) before any call."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery import Celery
from celery.schedules import crontab, schedule, solar

from sqsdelay import schedule_sources
from sqsdelay.core import schedule_sources as rules
from sqsdelay.core.recurring import SCHEDULED_TIME, substituted
from sqsdelay.errors import InvalidSchedule


@pytest.mark.parametrize(
    ("seconds", "rate"),
    [
        (60, "1 minute"),
        (300, "5 minutes"),
        (7200, "2 hours"),
        (86_400, "1 day"),
        (5400, "90 minutes"),
    ],
)
def test_intervals_are_whole_minute_rates(seconds: float, rate: str) -> None:
    assert rules.rate_of(seconds, "beat entry", "e") == rate


@pytest.mark.parametrize("seconds", [0, 30, 90, 59.5, float("nan")])
def test_an_interval_scheduler_cannot_say_is_refused(seconds: float) -> None:
    with pytest.raises(InvalidSchedule, match=r"beat entry 'e': an interval of .* whole minutes"):
        rules.rate_of(seconds, "beat entry", "e")


def test_zones_and_fixed_offsets() -> None:
    assert rules.zone_name("Europe/Berlin", "s", "e") == "Europe/Berlin"
    assert rules.zone_name(timedelta(hours=2), "s", "e") == "Etc/GMT-2"  # UTC+2
    assert rules.zone_name(timedelta(hours=-5), "s", "e") == "Etc/GMT+5"
    assert rules.zone_name(timedelta(0), "s", "e") == "UTC"
    with pytest.raises(InvalidSchedule, match="whole-hour offsets only"):
        rules.zone_name(timedelta(hours=5, minutes=30), "s", "e")
    with pytest.raises(InvalidSchedule, match="s 'e': its time zone 'Mars/Base'"):
        rules.zone_name("Mars/Base", "s", "e")


def test_names() -> None:
    assert rules.schedule_name("s", "add every 30s") == "add-every-30s"
    assert rules.schedule_name("s", "tasks:report") == "tasks-report"
    with pytest.raises(InvalidSchedule, match="1-64"):
        rules.schedule_name("s", "x" * 65)
    with pytest.raises(InvalidSchedule, match="as 'a b' does"):
        rules.unique("s", [("a b", "a-b"), ("a:b", "a-b")])


def test_taskiq_timing() -> None:
    assert rules.taskiq_timing({"cron": "*/5 * * * *"}, "t", "e") == {
        "cron": "cron(0/5 * * * ? *)",
        "timezone": "UTC",
    }
    given = {"cron": "0 9 * * 1", "cron_offset": timedelta(hours=-3)}
    assert rules.taskiq_timing(given, "t", "e")["timezone"] == "Etc/GMT+3"
    assert rules.taskiq_timing({"interval": timedelta(hours=1)}, "t", "e") == {"rate": "1 hour"}
    with pytest.raises(InvalidSchedule, match="one-off time is not a recurring schedule"):
        rules.taskiq_timing({"time": "2027-01-01T00:00:00Z"}, "t", "e")


class Custom(schedule):
    pass


def _app(**beat: Any) -> Celery:
    app = Celery("t", broker="sqs://", set_as_current=False)
    app.conf.beat_schedule = beat
    app.conf.broker_transport_options = {"queue_name_prefix": "my."}
    return app


def test_a_beat_entry_is_the_task_message_kombu_sends() -> None:
    app = _app(nightly={"task": "report", "schedule": crontab(0, 2), "args": [1]})
    app.conf.timezone = "America/New_York"
    [s] = schedule_sources.from_celery(app)
    assert (s.name, s.expression, s.timezone) == (
        "nightly",
        "cron(0 2 * * ? *)",
        "America/New_York",
    )
    assert s.queue == "my-celery"  # kombu's SQS name: the prefix's '.' becomes '-'
    envelope = json.loads(substituted(s.body, datetime(2027, 1, 1, tzinfo=UTC)))
    assert SCHEDULED_TIME in s.body
    assert envelope["headers"]["task"] == "report"
    assert envelope["headers"]["id"] == envelope["properties"]["correlation_id"]
    assert envelope["headers"]["id"] == "nightly@2027-01-01T00:00:00Z"
    assert envelope["properties"]["delivery_info"]["routing_key"] == "celery"


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"task": "t", "schedule": solar.__new__(solar)}, "solar schedules have no cron"),
        ({"task": "t", "schedule": 45}, "an interval of 45 s"),
        ({"task": "t", "schedule": crontab(day_of_month=1, day_of_week=1)}, "matching both"),
        ({"task": "t", "schedule": 60, "options": {"countdown": 5}}, "options ['countdown']"),
        (
            {"task": "t", "schedule": Custom(60)},
            "Custom is a schedule class of its own",
        ),
        ({"task": "t"}, "needs 'task' and 'schedule'"),
    ],
)
def test_a_beat_entry_that_cannot_map_is_refused_by_name(entry: dict[str, Any], says: str) -> None:
    app = _app(fine={"task": "t", "schedule": 60}, odd=entry)
    with pytest.raises(InvalidSchedule, match="beat entry 'odd'") as refused:
        schedule_sources.from_celery(app)
    assert says in str(refused.value)


def test_an_app_in_local_time_is_refused() -> None:
    app = _app(e={"task": "t", "schedule": crontab(0, 2)})
    app.conf.enable_utc = False
    with pytest.raises(InvalidSchedule, match=r"set app\.conf\.timezone"):
        schedule_sources.from_celery(app)
