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
from sqsdelay.cost.collect import to_pandas
from sqsdelay.cost.fold import (
    BILL_ROW_BUDGET,
    TOP_DESTINATIONS,
    Folded,
    fold,
    local_idle_polls,
)
from sqsdelay.cost.inputs import KINDS, PRICED, carried_over
from sqsdelay.cost.months_sql import month_of, month_start_micros, month_text
from sqsdelay.cost.pricing import Pricing, park_break_even_seconds
from sqsdelay.cost.request_counts import AT_SEND, Quantities, quantities
from sqsdelay.cost.sql import Sql, SqlOps, literal

QUANTITY_SUMS = [f.name for f in fields(Quantities) if f.name != "messages"]
SUMMED = ("messages", "delay_seconds", *QUANTITY_SUMS)
# The keys of the two roll-ups of the grouped input (`aggregate`).
SHAPE = ("kind", "month", "band", "bucket", "parked_route")
PER_DESTINATION = ("kind", "destination", "month", "parked_route")
# Grouped rows that come to the driver to be rolled up there (about 80 bytes each a column):
# 10M messages to 200 destinations over a year made 78,413.
GROUP_ROW_BUDGET = 200_000
# `kept`: the grouped rows a checkpoint on a local master (the tests turn it off to run the
# cluster's way).
CHECKPOINT_ON_LOCAL_MASTER = True


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
    cached: list[Any]  # the Spark frames still kept (the grouped rows, `focus`'s); `release()`

    def release(self) -> None:
        """Frees every kept frame, each whatever became of the others; the first failure is
        raised once all were tried."""
        failed: Exception | None = None
        for frame in self.cached:
            try:
                unkept(frame)
            except Exception as exc:
                failed = failed or exc
        if failed is not None:
            raise failed


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
    over the input, kept in Spark (`kept`) and rolled up twice: per (kind, usage
    month, band, bucket, route) for the totals, and per (kind, destination, usage month,
    route), which comes to the driver as it is when it is small, else is folded to the
    `top` destinations in Spark (`sqsdelay.cost.fold`). `bill`, given the known
    destinations (a Spark DataFrame), returns the bill's booked lines (`read_bill`).

    A message's hops are spread over the calendar months (UTC) of its life [sent, sent +
    delay] by the share of that life in each month: a 90-day delay sent on 1 January counts
    31/90 of its passes in January, 28/90 in February, 31/90 in March. Its count and first
    send stay in the month it was sent. Messages still looping from before the window
    (`carried_over`) are added first."""
    import pandas as pd

    spark = df.sparkSession
    query = grouped_sql(pricing, cycle_seconds=cycle_seconds, batch_fill=batch_fill)
    # One pass over the input, grouped by every key, kept in Spark until the driver has what
    # it needs: summed without the destination, and per destination without the band and
    # bucket (the effect of GROUPING SETS, without expanding every input row twice).
    grouped = kept(spark.sql(query, rows=df))
    # Usually (a few hundred destinations, a year) a few thousand groups: they come to the
    # driver and are rolled up there. Else Spark rolls them up (and folds the destinations
    # when they are many), and only the small roll-ups reach the driver. Counting them
    # first ran Spark jobs of its own (11 jobs on the tests' event log, 4 to 6 now). A
    # result over the budget costs the budget's rows, collected and dropped (some hundred
    # MB on the driver; it takes millions of messages to make that many groups).
    head = to_pandas(grouped.limit(GROUP_ROW_BUDGET + 1))
    local = len(head) <= GROUP_ROW_BUDGET

    def per_destination() -> Any:
        return rollup(grouped, PER_DESTINATION, where=f"kind IN {_in(PRICED)}")

    if local:
        priced_head = head[head["kind"].isin(PRICED)]
        shape = rolled_up(head, SHAPE)
        few = priced_head["destination"].nunique(dropna=False) <= top
    else:
        shape = to_pandas(rollup(grouped, SHAPE))
        known = per_destination().select("destination").distinct()
        few = known.limit(top + 1).count() <= top
    bands = [name for _, name in BANDS] + [LONGER]
    shape["band"] = shape["band"].map(lambda b: None if b != b else bands[int(b)])
    priced_shape = shape[shape["kind"].isin(PRICED)]
    shape["kind"] = shape["kind"].map(KINDS)
    start, end = _window(priced_shape, since, until)
    bill_lines = None
    if bill is not None:  # read once, as the input is
        if local:  # the names are on the driver already: no Spark jobs to find them again
            seen = priced_head["destination"].drop_duplicates()
            known = spark.createDataFrame(
                [(None if d != d else d,) for d in seen], "destination string"
            )
        bill_lines = bill(known).persist()  # else the Spark query `few` was counted from
    bill_rows = None
    if few and bill_lines is not None:
        bill_rows = to_pandas(bill_lines.limit(BILL_ROW_BUDGET + 1))
        few = len(bill_rows) <= BILL_ROW_BUDGET  # a bill of many other queues: folded too
    if few:
        rows = rolled_up(priced_head, PER_DESTINATION) if local else to_pandas(per_destination())
        firsts = rows.groupby("destination")["first_ts"].min()
        first_seen = {
            d: max(start, utc(pd.Timestamp(t).to_pydatetime())) for d, t in firsts.items()
        }
        folded = Folded(rows, local_idle_polls(first_seen, end), bill_rows, 0, None, None)
    else:
        with small_queries(spark):
            folded = fold(
                per_destination(),
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
        [f for f in (grouped, folded.cached, bill_lines) if f is not None],
    )


def kept(frame: Any) -> Any:
    """The grouped rows, kept in Spark for the collect and the queries after it. On a local
    master, a checkpoint (eager): every later query then plans from the grouped rows, not
    from the input's query again (whose plan, compared with the cache's under each query,
    was half the CPU of a report that folds destinations, and a tenth of a small one's;
    docs/benchmarks.md). On a cluster, cached (lazily): a local checkpoint's blocks live
    on executors, and one that is lost takes them with it, with no lineage to compute them
    again (Spark's `RDD.localCheckpoint`). `unkept` frees either."""
    # local[N], not local-cluster[...], whose executors are JVMs of their own
    if CHECKPOINT_ON_LOCAL_MASTER and frame.sparkSession.sparkContext._jsc.sc().isLocal():
        return frame.localCheckpoint()
    return frame.persist()


def unkept(frame: Any) -> None:
    """Frees a frame `kept` or cached: `DataFrame.unpersist` does not reach a checkpoint's
    blocks, which belong to the RDD under its plan, and would stay until the JVM collects
    the frame (in a session that runs report after report, the tests' or an EMR user's)."""
    frame.unpersist()
    plan = frame._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)


def grouped_sql(pricing: Pricing, *, cycle_seconds: int, batch_fill: int) -> str:
    """The query that groups the records `{rows}` (`read_scheduled`) and the messages
    carried over from before the window (`carried_over`) by every key, with the message
    count and the summed quantities every model is linear in, each weighted by the share of
    the message's life in the usage month (the month list is exploded: `aggregate`)."""
    delay, size = Sql("delay_seconds"), Sql("size_bytes")
    q = quantities(
        delay,
        size,
        ops=SqlOps(),
        cycle_seconds=cycle_seconds,
        batch_fill=batch_fill,
        chunk_bytes=pricing.billing_chunk_bytes,
        # The threshold a worker with SQSDELAY_PARKING=scheduler uses by default.
        park_after=park_break_even_seconds(pricing, cycle_seconds=cycle_seconds),
        fifo_destination=Sql(
            f"CAST(endswith(destination, {literal(wire_format.FIFO_SUFFIX)}) AS INT)"
        ),
    )
    # Integer keys: cheaper to hash than strings; named again on the small result.
    band = " + ".join(["0", *(f"CAST(delay_seconds > {upper} AS INT)" for upper, _ in BANDS)])
    spread = f"(kind IN {_in(PRICED)} AND delay_seconds > 0)"
    # Months are integers (months_sql): the first is the send's, the last the end's. A
    # message sent and due in one month (most of them) is one row with its whole life
    # there; only the others are exploded over their months, each weighted by its share.
    many = f"({spread} AND _last > _first)"
    month_end, month_start = month_start_micros("_m + 1"), month_start_micros("_m")
    overlap = f"(least(_end, {month_end}) - greatest(_sent, {month_start}))"
    life = f"CASE WHEN {many} THEN {overlap} / (delay_seconds * 1000000) ELSE 1.0D END"
    at_send = "CASE WHEN _m IS NULL OR _m = _first THEN 1.0D ELSE 0.0D END"

    def weighted(name: str) -> str:
        weight = "_at_send" if name in AT_SEND else "_life"
        return f"sum({literal(getattr(q, name))} * {weight}) AS {name}"

    keys = "kind, destination, _m, band, bucket, parked_route"
    # Only the code's own names and numbers go into the text: no input reaches it.
    timed = f"""
        SELECT *, unix_micros(ts) AS _sent, unix_micros(ts) + delay_seconds * 1000000 AS _end
        FROM (
            SELECT kind, ts, message_id, destination, delay_seconds, size_bytes, parked_route
            FROM {{rows}}
            UNION ALL {carried_over(cycle_seconds)}
        )
    """  # noqa: S608
    first, last = month_of("_sent"), month_of("_end")
    dated = f"SELECT *, {first} AS _first, {last} AS _last FROM ({timed})"  # noqa: S608
    return f"""
        WITH dated AS ({dated}
        ), exploded AS (
            SELECT *, {band} AS band,
                CAST(floor(log2(greatest(delay_seconds, 1))) AS INT) AS bucket,
                explode(CASE WHEN {many} THEN sequence(_first, _last) ELSE array(_first) END)
                    AS _m
            FROM dated
        ), weighted AS (
            SELECT *, {life} AS _life, {at_send} AS _at_send FROM exploded
        ), grouped AS (
            SELECT {keys},
                sum(_at_send) AS messages, sum(delay_seconds * _at_send) AS delay_seconds,
                {", ".join(weighted(name) for name in QUANTITY_SUMS)},
                min(ts) AS first_ts, max(ts) AS last_ts
            FROM weighted
            GROUP BY {keys}
        )
        SELECT kind, destination, {month_text("_m")} AS month, band, bucket, parked_route,
            {", ".join(SUMMED)}, first_ts, last_ts
        FROM grouped
    """  # noqa: S608


def rollup(frame: Any, by: tuple[str, ...], where: str = "true") -> Any:
    """The grouped rows summed over the keys not in `by`, in Spark."""
    sums = ", ".join(f"sum({c}) AS {c}" for c in SUMMED)
    keys = ", ".join(by)
    return frame.sparkSession.sql(
        f"SELECT {keys}, {sums}, min(first_ts) AS first_ts, max(last_ts) AS last_ts"  # noqa: S608
        f" FROM {{frame}} WHERE {where} GROUP BY {keys}",
        frame=frame,
    )


def rolled_up(frame: Any, by: tuple[str, ...]) -> Any:
    """The same on the driver (pandas), with Spark's rules: a null key is a group of its
    own, and a sum of nulls only is null."""
    groups = frame.groupby(list(by), dropna=False, sort=False)
    out = groups[list(SUMMED)].sum(min_count=1)
    out["first_ts"] = groups["first_ts"].min()
    out["last_ts"] = groups["last_ts"].max()
    return out.reset_index()


def _in(values: tuple[int | str, ...]) -> str:
    return "(" + ", ".join(literal(v) for v in values) + ")"


@contextlib.contextmanager
def small_queries(spark: Any) -> Iterator[None]:
    """Queries over the grouped rows, not the input: re-planning each stage (adaptive
    execution) costs more than it saves on these rows. The session's settings are put back.
    Whole-stage code generation stays on: turned off over a plan cached with it, Spark 3.5.5
    fails an assertion in ColumnarToRowExec when it canonicalizes the plan (EMR's Spark: the
    fold with a bill, the cluster's way, in make spark35)."""
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
