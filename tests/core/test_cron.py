"""EventBridge Scheduler's cron and rate expressions and fire times (core/cron.py), with
its documented DST rules in Europe/Berlin around 2026-03-29 and 2026-10-25."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqsdelay.core import cron
from sqsdelay.errors import InvalidSchedule

BERLIN = ZoneInfo("Europe/Berlin")


def fires(expression: str, zone: str, after: datetime, n: int) -> list[datetime]:
    return list(islice(cron.fire_times(cron.parse_expression(expression), zone, after=after), n))


def local(times: list[datetime]) -> list[str]:
    return [t.astimezone(BERLIN).strftime("%m-%d %H:%M%z") for t in times]


@pytest.mark.parametrize(
    ("given_text", "expected"),
    [
        ("0 9 * * MON-FRI", "cron(0 9 ? * MON,TUE,WED,THU,FRI *)"),
        ("0 9 * * 1-5", "cron(0 9 ? * MON,TUE,WED,THU,FRI *)"),
        ("0 2 * * 5-7", "cron(0 2 ? * SUN,FRI,SAT *)"),  # Unix 7 is Sunday
        ("*/5 * * * *", "cron(0/5 * * * ? *)"),
        ("30 4 1 * *", "cron(30 4 1 * ? *)"),
        ("@daily", "cron(0 0 * * ? *)"),
        ("cron(0 9 ? * 2#1 *)", "cron(0 9 ? * 2#1 *)"),
        ("cron(0 9 L * ? 2027-2030)", "cron(0 9 L * ? 2027-2030)"),
        ("rate(5 minutes)", "rate(5 minutes)"),
        ("5 minutes", "rate(5 minutes)"),
        ("1 hours", "rate(1 hour)"),
        ("rate(2 day)", "rate(2 days)"),
    ],
)
def test_expressions_are_normalised_to_what_scheduler_takes(given_text: str, expected: str) -> None:
    assert cron.parse_expression(given_text).expression == expected


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("cron(0 9 * * * *)", "exactly one of them must be ?"),
        ("cron(0 9 ? * ? *)", "exactly one of them must be ?"),
        ("cron(0 9 * * ?)", "six"),
        ("cron(60 9 * * ? *)", "minutes '60' is not 0-59"),
        ("cron(0 24 * * ? *)", "hours '24'"),
        ("cron(0 9 ? * 8 *)", "day-of-week '8' is not 1-7"),
        ("cron(0 9 * * ? 2200)", "year '2200'"),
        ("cron(0 0 30 FEB ? *)", "can never fire"),
        ("cron(0 9 ? * 3#1,6#3 *)", "stand alone"),
        ("cron(0 9 ? * 2#6 *)", "1-5"),
        ("cron(0 9 5-1 * ? *)", "runs backwards"),
        ("0 9 1 * MON", "either one"),
        ("0 9 L * *", "Unix cron does not have"),
        ("rate(0 minutes)", "positive"),
        ("rate(5 weeks)", "not a rate"),
        ("every day", "not a cron expression"),
    ],
)
def test_what_scheduler_would_refuse_is_refused_saying_what_to_do(bad: str, says: str) -> None:
    with pytest.raises(InvalidSchedule, match=says) as caught:
        cron.parse_expression(bad)
    assert ":" in str(caught.value)  # the what-to-do part


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../etc/passwd", "Europe/Berlin "])
def test_unknown_time_zones_are_refused(name: str) -> None:
    with pytest.raises(InvalidSchedule, match="IANA"):
        cron.zone(name)


def test_spring_forward_skips_the_time_that_does_not_exist() -> None:
    # 2026-03-29 in Berlin: 02:00 CET becomes 03:00 CEST; 02:30 does not happen that day
    got = fires("cron(30 2 * * ? *)", "Europe/Berlin", datetime(2026, 3, 27, tzinfo=UTC), 3)
    assert local(got) == ["03-27 02:30+0100", "03-28 02:30+0100", "03-30 02:30+0200"]


def test_fall_back_runs_the_repeated_hour_once() -> None:
    # 2026-10-25 in Berlin: 03:00 CEST becomes 02:00 CET; 02:00-02:59 happen twice
    got = fires("cron(0/30 * * * ? *)", "Europe/Berlin", datetime(2026, 10, 24, 23, tzinfo=UTC), 5)
    assert [t.strftime("%H:%M") for t in got] == ["23:30", "00:00", "00:30", "02:00", "02:30"]
    assert local(got) == [
        "10-25 01:30+0200",
        "10-25 02:00+0200",
        "10-25 02:30+0200",  # not again at 02:00+0100, 02:30+0100
        "10-25 03:00+0100",
        "10-25 03:30+0100",
    ]
    daily = fires("cron(30 2 * * ? *)", "Europe/Berlin", datetime(2026, 10, 24, tzinfo=UTC), 3)
    assert local(daily) == ["10-24 02:30+0200", "10-25 02:30+0200", "10-26 02:30+0100"]


def test_starting_inside_the_repeated_hour_does_not_fire_its_first_pass_again() -> None:
    after = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)  # 02:10 CET, the second pass
    got = fires("cron(0/30 * * * ? *)", "Europe/Berlin", after, 2)
    assert local(got) == ["10-25 03:00+0100", "10-25 03:30+0100"]


def test_weekdays_in_the_schedules_zone() -> None:
    got = fires("0 9 * * MON-FRI", "Europe/Berlin", datetime(2026, 3, 27, tzinfo=UTC), 3)
    assert local(got) == ["03-27 09:00+0100", "03-30 09:00+0200", "03-31 09:00+0200"]


def test_year_nearest_weekday_last_and_nth() -> None:
    after = datetime(2026, 12, 1, tzinfo=UTC)
    # 2027-05-15 is a Saturday: 15W is Friday the 14th
    w = fires("cron(0 9 15W * ? 2027)", "UTC", after, 5)
    assert [t.date().isoformat() for t in w][4] == "2027-05-14"
    assert fires("cron(0 9 ? * 2#1 *)", "UTC", after, 1)[0].date().isoformat() == "2026-12-07"
    assert fires("cron(0 9 ? * 6L *)", "UTC", after, 1)[0].date().isoformat() == "2026-12-25"
    assert fires("cron(0 9 L * ? *)", "UTC", after, 1)[0].date().isoformat() == "2026-12-31"
    assert fires("cron(0 9 1 1 ? 2028)", "UTC", after, 2) == [datetime(2028, 1, 1, 9, tzinfo=UTC)]


def test_a_rate_counts_elapsed_time_from_its_start_through_dst() -> None:
    start = datetime(2026, 3, 28, 12, tzinfo=UTC)
    rate = cron.parse_expression("rate(1 day)")
    before = start - timedelta(seconds=1)
    got = list(islice(cron.fire_times(rate, "Europe/Berlin", after=before, start=start), 3))
    assert got == [start + timedelta(days=k) for k in range(3)]  # 24 h, not 13:00 local
    end = start + timedelta(days=1)
    bounded = list(cron.fire_times(rate, "UTC", after=before, start=start, end=end))
    assert bounded == [start, end]


def test_latest_missed_occurrence() -> None:
    expr = cron.parse_expression("cron(0 * * * ? *)")
    after = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)
    before = datetime(2026, 3, 29, 4, 10, tzinfo=UTC)
    assert cron.latest_before(expr, "Europe/Berlin", after=after, before=before) == datetime(
        2026, 3, 29, 4, tzinfo=UTC
    )
    assert cron.latest_before(expr, "UTC", after=before, before=before) is None


minute = st.sampled_from(["0", "15", "30", "0/10", "5,35", "*"])
hour = st.sampled_from(["*", "1", "2", "3", "1-3", "0/2", "2,14"])
day = st.sampled_from(["* * ?", "? * *", "? * SUN", "L * ?", "25-31 3,10 ?", "? 3,10 1#5"])


@settings(max_examples=60, deadline=None)
@given(
    m=minute,
    h=hour,
    d=day,
    zone=st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]),
    offset=st.integers(0, 400 * 24),
)
def test_fire_times_increase_and_never_name_a_nonexistent_or_repeated_wall_time(
    m: str, h: str, d: str, zone: str, offset: int
) -> None:
    dom, month, dow = d.split()
    expr = cron.parse_expression(f"cron({m} {h} {dom} {month} {dow} *)")
    tz = ZoneInfo(zone)
    after = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=offset)
    got = list(islice(cron.fire_times(expr, zone, after=after), 60))
    assert got
    assert all(a < b for a, b in pairwise(got))
    assert got[0] > after
    walls = [t.astimezone(tz).replace(tzinfo=None) for t in got]
    assert len(set(walls)) == len(walls)  # a repeated wall time fires once
    for t, wall in zip(got, walls, strict=True):
        assert cron.exists(wall, tz)
        # the instant is the wall time's first, so the cron named exactly this wall time
        assert wall.replace(tzinfo=tz, fold=0).astimezone(UTC) == t
        assert t.astimezone(tz).minute in cron.expand(
            cron.MINUTES, expr.fields[0].replace("*", "0/1")
        )
