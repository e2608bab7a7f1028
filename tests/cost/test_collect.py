"""`cost/collect.to_pandas` gives the frame `toPandas()` gives, with less memory."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest

from sqsdelay.cost import collect
from sqsdelay.cost.collect import to_pandas

pytestmark = pytest.mark.spark

SCHEMA = (
    "kind int, bucket int, band int, messages double, destination string, "
    "parked_route boolean, month date, first_ts timestamp, small tinyint, big bigint, "
    "short smallint, share float, local timestamp_ntz"
)
AT = datetime(2026, 3, 1, 10, tzinfo=UTC)
LATE_NAIVE = datetime(2200, 1, 1)  # pandas' nanoseconds reach 2262
LATE = LATE_NAIVE.replace(tzinfo=UTC)
ROWS = [
    (1, 0, 2, 3.5, "orders", False, date(2026, 3, 1), AT, 1, 2, 3, 0.5, datetime(2026, 3, 1)),
    (2, 1, *[None] * 11),  # a null in every nullable one
    (3, 2, 0, 1e-9, "billing", True, date(1970, 1, 1), LATE, -1, -2, -3, -0.25, LATE_NAIVE),
]


def same(spark: Any, rows: list[tuple[Any, ...]], schema: str) -> pd.DataFrame:
    df = spark.createDataFrame(rows, schema)
    ours, theirs = to_pandas(df), df.toPandas()
    pd.testing.assert_frame_equal(ours, theirs)
    return ours


def test_the_report_s_column_types_come_as_to_pandas_gives_them(spark: Any) -> None:
    frame = same(spark, ROWS, SCHEMA)
    assert frame["first_ts"].dt.tz is None  # naive UTC, as the report reads them
    assert frame.loc[0, "first_ts"] == pd.Timestamp("2026-03-01 10:00")
    assert frame.loc[0, "month"] == date(2026, 3, 1)  # datetime.date, not a timestamp
    assert pd.isna(frame.loc[1, "band"]) and frame["band"].dtype == "float64"


def test_no_rows_give_the_same_empty_frame(spark: Any) -> None:
    assert same(spark, [], SCHEMA).empty


def test_other_column_types_take_to_pandas(spark: Any) -> None:
    """Arrow's conversion gives a map as a list of pairs and a struct as a dict; toPandas
    a dict and a Row."""
    rows = [({"a": 1}, (1, "x"), [1, 2], Decimal("1.50"))]
    schema = "tags map<string,int>, pair struct<n:int,s:string>, ids array<int>, d decimal(10,2)"
    frame = same(spark, rows, schema)
    assert frame.loc[0, "tags"] == {"a": 1}


def test_repeated_column_names_take_to_pandas(spark: Any) -> None:
    assert list(same(spark, [(1, 2)], "a int, a int").columns) == ["a", "a"]


def test_without_a_pyarrow_that_converts_it_is_to_pandas(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark 4 collects without pyarrow, and pyarrow before 13 lacks an option this needs."""
    monkeypatch.setattr(collect, "_arrow_converts", lambda: False)
    df = spark.createDataFrame([(AT,)], "t timestamp")
    monkeypatch.setattr(type(df), "toArrow", lambda self: pytest.fail("took Arrow"))
    assert to_pandas(df).loc[0, "t"] == pd.Timestamp("2026-03-01 10:00")


def test_timestamps_come_in_utc_whatever_the_session_zone(spark: Any) -> None:
    """toPandas gives the session's local time; the report counts in UTC throughout."""
    df = spark.createDataFrame([(datetime(2026, 3, 1, 10, tzinfo=UTC),)], "t timestamp")
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        assert to_pandas(df).loc[0, "t"] == pd.Timestamp("2026-03-01 10:00")
        assert df.toPandas().loc[0, "t"] == pd.Timestamp("2026-03-01 05:00")
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
