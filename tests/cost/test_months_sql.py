"""UTC months as integers in Spark SQL (cost/months_sql.py), held to Python's
calendar and to Spark's own date functions on the suite's session: day boundaries, leap
days and era edges from year 1 to 9999, every day of 1600-2400, times beyond them as far
as Spark holds, and the month a message due exactly at midnight on the 1st ends in."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqsdelay.cost.inputs import read_scheduled
from sqsdelay.cost.job import aggregate
from sqsdelay.cost.months_sql import month_of, month_start_micros, month_text
from sqsdelay.cost.pricing import load_pricing

pytestmark = pytest.mark.spark

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z
LAST = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z
DAY = 86_400_000_000


def micros(t: datetime) -> int:
    return (t - EPOCH) // timedelta(microseconds=1)


def with_months(spark: Any, rows: Any) -> Any:
    """`rows` (a column `us`) with `m`, `starts` and `text` (months_sql)."""
    query = f"SELECT us, {month_of('us')} AS m FROM {{rows}}"  # noqa: S608
    columns = f"us, m, {month_start_micros('m')} AS starts, {month_text('m')} AS text"
    return spark.sql(f"SELECT {columns} FROM ({query})", rows=rows)  # noqa: S608


def check(spark: Any, values: list[int]) -> None:
    rows = spark.createDataFrame([(v,) for v in values], "us BIGINT")
    for r in with_months(spark, rows).collect():
        t = EPOCH + timedelta(microseconds=r.us)
        assert r.m == t.year * 12 + t.month - 1, t
        assert r.starts == micros(datetime(t.year, t.month, 1, tzinfo=UTC)), t
        assert r.text == f"{t.year:04d}-{t.month:02d}", t


def test_edges(spark: Any) -> None:
    days = [
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(2024, 2, 29, tzinfo=UTC),
        datetime(2024, 3, 1, tzinfo=UTC),
        datetime(2000, 2, 29, tzinfo=UTC),  # a leap year of 400
        datetime(2100, 3, 1, tzinfo=UTC),  # no 29 February that year
        datetime(1969, 12, 31, tzinfo=UTC),
        datetime(1600, 3, 1, tzinfo=UTC),  # an era's first day
        datetime(2026, 12, 31, tzinfo=UTC),
    ]
    values = [FIRST, FIRST + 1, LAST, -1, 0, 1]
    for day in days:
        values += [micros(day) - 1, micros(day), micros(day) + 1]
    check(spark, values)


def test_as_sparks_own_functions_on_every_day_around_year_0_and_beyond_9999(spark: Any) -> None:
    """Every day's last microsecond from 1600 to 2400 (292,194 days, counted in Spark); the
    first and last microsecond of every day of the 800 on each side of 0000-01-01 (years -3
    to 2: a day before 1970 floored, not truncated, in negative years too); and times far
    before year 1 and after 9999, near the ends of Spark's range (which Python's calendar
    cannot hold)."""
    start, end = micros(datetime(1600, 1, 1, tzinfo=UTC)), micros(datetime(2400, 1, 1, tzinfo=UTC))
    year_0 = -62_167_219_200_000_000  # 0000-01-01T00:00:00Z
    far = [year_0 - 1, year_0, 253_402_300_800_000_000, -9_000_000_000_000_000_000]
    far += [-9_200_000_000_000_000_000, 9_000_000_000_000_000_000, 9_200_000_000_000_000_000]
    days = spark.range(start // DAY, end // DAY).selectExpr(f"id * {DAY} + {DAY} - 1 AS us")
    around_0 = spark.range(year_0 // DAY - 800, year_0 // DAY + 800)
    edges = around_0.selectExpr(f"explode(array(id * {DAY}, id * {DAY} + {DAY} - 1)) AS us")
    listed = spark.createDataFrame([(v,) for v in far], "us BIGINT")
    rows = days.unionByName(edges).unionByName(listed)
    theirs = [
        "date_format(timestamp_micros(us), 'yyyy-MM') AS their_text",
        "unix_micros(CAST(trunc(timestamp_micros(us), 'month') AS TIMESTAMP)) AS their_start",
        "year(timestamp_micros(us)) * 12 + month(timestamp_micros(us)) - 1 AS their_m",
    ]
    same = "text <=> their_text AND starts <=> their_start AND m <=> their_m"
    differ = with_months(spark, rows).selectExpr("*", *theirs).where(f"NOT ({same})")
    assert differ.limit(5).collect() == []
    assert rows.count() == (end - start) // DAY + 2 * 1600 + len(far)
    # and they are what their names say: a negative year, and years past 9999
    texts = {r.us: r.text for r in with_months(spark, listed).collect()}
    assert texts[year_0 - 1] == "-0001-12" and texts[year_0] == "0000-01"
    assert (
        texts[9_200_000_000_000_000_000][0] == "+" and texts[-9_200_000_000_000_000_000][0] == "-"
    )


def test_null_stays_null(spark: Any) -> None:
    rows = spark.createDataFrame([(None,)], "us BIGINT")
    [row] = with_months(spark, rows).collect()
    assert row.m is None and row.text is None


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(FIRST, LAST), min_size=1, max_size=300))
def test_any_instant(spark: Any, values: list[int]) -> None:
    check(spark, values)


def test_a_message_due_at_midnight_on_the_first_ends_in_that_month_with_nothing_in_it(
    spark: Any, tmp_path: Path
) -> None:
    """Due 2026-02-01T00:00:00Z: its life is all January's; February gets a row of zeros
    (as the month list of Spark's date functions made it), and no message."""
    log = tmp_path / "events.jsonl"
    sent = {"event": "delay.scheduled", "destination": "orders", "size_bytes": 100}
    log.write_text(json.dumps({**sent, "timestamp": "2026-01-31T23:59:59Z", "delay_seconds": 1}))
    shape = aggregate(read_scheduled(spark, [str(log)]), load_pricing()).shape
    by_month = shape.set_index("month")
    assert sorted(by_month.index) == ["2026-01", "2026-02"]
    assert by_month.loc["2026-01", "messages"] == 1 and by_month.loc["2026-01", "cycles"] == 0
    assert by_month.loc["2026-02", ["messages", "routed_delay", "chunks"]].tolist() == [0, 0, 0]
