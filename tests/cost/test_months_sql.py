"""UTC months as integer arithmetic in Spark SQL (cost/months_sql.py), held to Python's
calendar on the suite's session: every day boundary, leap day and era edge the report can
meet, from the first instant Spark has to the last."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqsdelay.cost.months_sql import month_layers, month_start_micros, month_text, nested

pytestmark = pytest.mark.spark

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z
LAST = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z


def micros(t: datetime) -> int:
    return (t - EPOCH) // timedelta(microseconds=1)


def computed(spark: Any, values: list[int]) -> list[tuple[int, int, int, str]]:
    rows = spark.createDataFrame([(v,) for v in values], "us BIGINT")
    query = nested("SELECT us FROM {rows}", [[item] for item in month_layers("us", "m")])
    columns = f"us, m, {month_start_micros('m')} AS starts, {month_text('m')} AS text"
    out = spark.sql(f"SELECT {columns} FROM ({query})", rows=rows)  # noqa: S608
    return [(r.us, r.m, r.starts, r.text) for r in out.collect()]


def check(spark: Any, values: list[int]) -> None:
    for us, month, starts, text in computed(spark, values):
        t = EPOCH + timedelta(microseconds=us)
        assert month == t.year * 12 + t.month - 1, t
        assert starts == micros(datetime(t.year, t.month, 1, tzinfo=UTC)), t
        assert text == f"{t.year:04d}-{t.month:02d}", t


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


def test_null_stays_null(spark: Any) -> None:
    rows = spark.createDataFrame([(None,)], "us BIGINT")
    query = nested("SELECT us FROM {rows}", [[item] for item in month_layers("us", "m")])
    [row] = spark.sql(f"SELECT m FROM ({query})", rows=rows).collect()  # noqa: S608
    assert row.m is None


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(FIRST, LAST), min_size=1, max_size=300))
def test_any_instant(spark: Any, values: list[int]) -> None:
    check(spark, values)
