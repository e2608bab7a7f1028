"""The cost job on Spark: aggregates billed requests per destination, month, delay band and
delay bucket from the records `inputs.py` reads (or `workload.py` generates). Only native
Spark SQL functions run on the rows; only the small aggregate reaches the driver.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from sqsdelay.core import wire_format
from sqsdelay.cost.bands import BANDS, LONGER
from sqsdelay.cost.fold import (
    BILL_ROW_BUDGET,
    TOP_DESTINATIONS,
    Folded,
    fold,
    local_idle_polls,
    reduced,
)
from sqsdelay.cost.inputs import KINDS, PRICED, carried_over
from sqsdelay.cost.pricing import (
    AT_SEND,
    Pricing,
    Quantities,
    park_break_even_seconds,
    quantities,
)
from sqsdelay.cost.session import SparkOps

QUANTITY_SUMS = [f.name for f in fields(Quantities) if f.name != "messages"]


@dataclass
class Aggregate:
    """The aggregate as it reaches the driver: a few thousand rows whatever the number of
    destinations (pandas); with destinations folded, also the FOCUS rows for Spark to write."""

    shape: Any  # per (kind, month, band, bucket, parked_route): totals, bands, histogram
    destinations: Any  # per (kind, destination, month, parked_route), priced kinds, folded
    idle: Any  # idle polls per (destination, month), folded: the delay and staging queues
    bill: Any  # the bill's lines per (component, destination, month, currency), or None
    folded: int  # destinations in the "(other N destinations)" rows
    start: datetime  # the window, UTC
    end: datetime
    focus: Any  # with `folded`: Spark DataFrame, the FOCUS 1.2 rows of every resource
    cached: list[Any]  # the Spark frames behind `focus`; `release()` when it is written

    def release(self) -> None:
        for frame in self.cached:
            frame.unpersist()


def aggregate(
    df: Any,
    pricing: Pricing,
    *,
    cycle_seconds: int = 900,
    batch_fill: int = 10,
    since: datetime | None = None,
    until: datetime | None = None,
    bill: Callable[[Any], Any] | None = None,
    top: int = TOP_DESTINATIONS,
    registry_table: str | None = None,
) -> Aggregate:
    """The message count and the summed quantities every model is linear in (priced later,
    on the small aggregate, by `Requests.of`), with the first and last send, in one pass
    over the input, cached in Spark and rolled up twice: per (kind, usage month, band,
    bucket, route) for the totals, and per (kind, destination, usage month, route), which
    comes to the driver as it is when it is small, else is folded to the `top` destinations
    in Spark (`sqsdelay.cost.fold`). `bill`, given the known destinations (a Spark
    DataFrame), returns the bill's booked lines (`read_bill`).

    A message's hops are spread over the calendar months (UTC) of its life [sent, sent +
    delay] by the share of that life in each month: a 90-day delay sent on 1 January counts
    31/90 of its passes in January, 28/90 in February, 31/90 in March. Its count and first
    send stay in the month it was sent. Messages still looping from before the window
    (`carried_over`) are added first."""
    import pandas as pd
    from pyspark.sql import functions as F

    df = df.unionByName(carried_over(df, cycle_seconds))
    delay, size = F.col("delay_seconds"), F.col("size_bytes")
    q = quantities(
        delay,
        size,
        ops=SparkOps(),
        cycle_seconds=cycle_seconds,
        batch_fill=batch_fill,
        chunk_bytes=pricing.billing_chunk_bytes,
        # The threshold a worker with SQSDELAY_PARKING=scheduler uses by default.
        park_after=park_break_even_seconds(pricing, cycle_seconds=cycle_seconds),
        fifo_destination=F.col("destination").endswith(wire_format.FIFO_SUFFIX).cast("int"),
    )
    # Integer keys: cheaper to hash than strings; named again on the small result.
    band = F.lit(0)
    for upper, _ in BANDS:
        band = band + (delay > upper).cast("int")
    bucket = F.floor(F.log2(F.greatest(delay, F.lit(1)))).cast("int")
    sent_us = F.unix_micros("ts")
    end_us = sent_us + delay * 1_000_000
    first = F.trunc("ts", "month")
    spread = F.col("kind").isin(*PRICED) & (delay > 0)
    months = F.when(
        spread,
        F.sequence(first, F.trunc(F.timestamp_micros(end_us), "month"), F.expr("INTERVAL 1 MONTH")),
    ).otherwise(F.array(first))
    rows = df.select(
        "*",
        band.alias("band"),
        bucket.alias("bucket"),
        F.explode(months).alias("m"),
    )
    m = F.col("m")
    overlap = F.least(F.col("_end"), F.unix_micros(F.add_months(m, 1).cast("timestamp"))) - (
        F.greatest(F.col("_sent"), F.unix_micros(m.cast("timestamp")))
    )
    rows = rows.withColumn("_sent", sent_us).withColumn("_end", end_us)
    life = F.when(spread, overlap / (delay * 1_000_000)).otherwise(F.lit(1.0))
    at_send = F.when(m.isNull() | (m == first), 1.0).otherwise(0.0)
    rows = rows.withColumn("_life", life).withColumn("_at_send", at_send)

    def weighted(name: str) -> Any:
        weight = "_at_send" if name in AT_SEND else "_life"
        return F.sum(getattr(q, name) * F.col(weight)).alias(name)

    summed = ("messages", "delay_seconds", *QUANTITY_SUMS)
    keys = ["kind", "destination", "month", "band", "bucket", "parked_route"]
    # One pass over the input, grouped by every key; it stays in Spark (cached), and the
    # driver gets it summed without the destination, and per destination without the band
    # and bucket (the effect of GROUPING SETS, without expanding every input row twice).
    cached = (
        rows.groupBy(
            "kind",
            "destination",
            F.date_format("m", "yyyy-MM").alias("month"),
            "band",
            "bucket",
            "parked_route",
        )
        .agg(
            F.sum("_at_send").alias("messages"),
            F.sum(delay * F.col("_at_send")).alias("delay_seconds"),
            *(weighted(name) for name in QUANTITY_SUMS),
            F.min("ts").alias("first_ts"),
            F.max("ts").alias("last_ts"),
        )
        .persist()
    )

    def rollup(frame: Any, by: list[str]) -> Any:
        return frame.groupBy(*by).agg(*(reduced(c) for c in (*summed, "first_ts", "last_ts")))

    shape = rollup(cached, [k for k in keys if k != "destination"]).toPandas()
    names = [name for _, name in BANDS] + [LONGER]
    shape["band"] = shape["band"].map(lambda b: None if b != b else names[int(b)])
    priced_shape = shape[shape["kind"].isin(PRICED)]
    shape["kind"] = shape["kind"].map(KINDS)
    start, end = _window(priced_shape, since, until)
    per_destination = rollup(
        cached.where(F.col("kind").isin(*PRICED)), ["kind", "destination", "month", "parked_route"]
    )
    known = per_destination.select("destination").distinct()
    bill_lines = None
    if bill is not None:  # read once, as the input is
        bill_lines = bill(known).persist()
    # Few destinations (the usual case): their rows come to the driver as they are. Many:
    # they are ranked and folded in Spark, and Spark writes the FOCUS rows.
    few = known.limit(top + 1).count() <= top
    bill_rows = None
    if few and bill_lines is not None:
        bill_rows = bill_lines.limit(BILL_ROW_BUDGET + 1).toPandas()
        few = len(bill_rows) <= BILL_ROW_BUDGET  # a bill of many other queues: folded too
    if few:
        rows = per_destination.toPandas()
        firsts = rows.groupby("destination")["first_ts"].min()
        first_seen = {
            d: max(start, utc(pd.Timestamp(t).to_pydatetime())) for d, t in firsts.items()
        }
        folded = Folded(rows, local_idle_polls(first_seen, end), bill_rows, 0, None, None)
    else:
        with small_queries(df.sparkSession):
            folded = fold(
                per_destination,
                pricing=pricing,
                cycle_seconds=cycle_seconds,
                batch_fill=batch_fill,
                start=start,
                end=end,
                bill=bill_lines,
                top=top,
                registry_table=registry_table,
            )
    destinations = folded.destinations
    destinations["kind"] = destinations["kind"].map(KINDS)
    return Aggregate(
        shape,
        destinations,
        folded.idle,
        folded.bill,
        folded.folded,
        start,
        end,
        folded.focus,
        [f for f in (cached, folded.cached, bill_lines) if f is not None],
    )


@contextlib.contextmanager
def small_queries(spark: Any) -> Iterator[None]:
    """Queries over the cached aggregate, not the input: re-planning each stage (adaptive
    execution) costs more than it saves on these rows. The session's settings are put back.
    Whole-stage code generation stays on: turned off over a plan cached with it, Spark 3.5.5
    fails an assertion in ColumnarToRowExec when it canonicalizes the plan (EMR's Spark;
    tests/cost/test_fold.py under make spark35)."""
    settings = {"spark.sql.adaptive.enabled": "false"}
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _window(
    priced: Any, since: datetime | None, until: datetime | None
) -> tuple[datetime, datetime]:
    """The window in UTC: the bounds given, else the first and last send of priced rows."""
    import pandas as pd

    def first_or(t: datetime | None, column: str, pick: str) -> datetime:
        if t is not None:
            return t
        value = getattr(priced[column], pick)() if not priced.empty else None
        if value is None or value != value:  # no priced rows: the report says so
            return datetime(1970, 1, 1, tzinfo=UTC)
        stamp: datetime = pd.Timestamp(value).to_pydatetime()
        return stamp

    start, end = first_or(since, "first_ts", "min"), first_or(until, "last_ts", "max")
    return utc(start), utc(end)


def utc(t: datetime) -> datetime:
    """A time in UTC; one without an offset is taken as UTC (the events' zone)."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
