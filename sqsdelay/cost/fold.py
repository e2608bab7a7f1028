"""Per-destination figures kept in Spark, so that a report over 100,000 destinations brings
only a few thousand rows to the driver: the `top` destinations by estimated (or billed) cost
by name, the others folded into one row per month. The per-resource FOCUS rows are written
by Spark itself, every destination by name.

Idle polling is worked out here too (it is per destination): one 20 s long poll at a time on
each delay queue, from its first message in the window to the window's end, by the seconds
of each month.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from sqsdelay.core import queue_names, quotas, tags, wire_format
from sqsdelay.cost import bill as b
from sqsdelay.cost.collect import to_pandas
from sqsdelay.cost.focus import DYNAMODB, SCHEDULER, SQS
from sqsdelay.cost.money import Billed, estimated_requests, route_requests
from sqsdelay.cost.pricing import Pricing
from sqsdelay.cost.request_counts import Quantities, Requests

# The report's tables show this many destinations by name (times the months, times two
# routes: a few thousand rows at most); `--top-destinations` changes it.
TOP_DESTINATIONS = 200
# The bill's summed lines (per resource and month) brought to the driver as they are when
# the destinations are few; a bill with more (many other delay or destination queues) is
# folded in Spark as well.
BILL_ROW_BUDGET = 10_000


def others(n: int) -> str:
    """The name of the row that stands for `n` destinations outside the top."""
    return f"(other {n:,} destinations)"


def estimated(cycle_seconds: int, batch_fill: int) -> dict[str, Any]:
    """Spark columns of one aggregate row's requests for the route its messages took:
    `fifo` (the delay queue's), `destination_fifo` (a FIFO destination's own), `standard`
    (the hand-overs, and a FIFO destination's staging queue) and `invocations` (parked
    messages' Scheduler invocations), from its summed quantities (`Requests.of` is linear).
    Also the registry's request units, which do not depend on the route."""
    from pyspark.sql import functions as F

    q = Quantities(**{f.name: F.col(f.name) for f in fields(Quantities)})
    r = Requests.of(q, cycle_seconds=cycle_seconds, batch_fill=batch_fill)
    route = route_requests(r, F.col("parked_route"), lambda c, a, b: F.when(c, a).otherwise(b))
    return {
        "fifo": route.fifo,
        "destination_fifo": r.batched_destination_fifo,  # a FIFO destination's forwards
        "standard": route.standard,
        "invocations": route.invocations,
        "writes": r.registry_writes,
        "reads": r.registry_reads,
    }


def seconds_by_month(start: datetime, end: datetime) -> dict[str, float]:
    """The seconds of [start, end) in each calendar month (UTC), by YYYY-MM."""
    out: dict[str, float] = {}
    at = start
    while at < end:
        nxt = datetime(at.year + at.month // 12, at.month % 12 + 1, 1, tzinfo=UTC)
        out[f"{at.year:04d}-{at.month:02d}"] = (min(nxt, end) - at).total_seconds()
        at = nxt
    return out


POLLS = ["idle_poll_requests", "staging_poll_requests"]


def local_idle_polls(first_seen: dict[str, datetime], end: datetime) -> Any:
    """`idle_polls` in pandas, for a few destinations (a frame by destination and month)."""
    import pandas as pd

    rows = [
        {
            "destination": d,
            "month": m,
            "idle_poll_requests": secs / quotas.LONG_POLL_SECONDS,
            "staging_poll_requests": secs / quotas.LONG_POLL_SECONDS
            if queue_names.is_fifo(d)
            else 0.0,
        }
        for d, t in first_seen.items()
        for m, secs in seconds_by_month(t, end).items()
    ]
    frame = pd.DataFrame(rows, columns=["destination", "month", *POLLS])
    # float even when empty (a zero-length window): an object column would spoil the join
    return frame.set_index(["destination", "month"])[POLLS].astype(float)


def idle_polls(firsts: Any, start: datetime, end: datetime) -> Any:
    """Idle long polls per (destination, month), from `firsts` (destination, first_ts), in
    Spark: the delay queue's, and a FIFO destination's staging queue's (long-polled at all
    times, standard requests)."""
    from pyspark.sql import functions as F

    first = F.greatest(F.col("first_ts"), F.lit(start))
    stop = F.lit(end)
    month = F.col("m").cast("timestamp")
    overlap = F.unix_micros(F.least(stop, F.add_months(F.col("m"), 1).cast("timestamp")))
    overlap = (overlap - F.unix_micros(F.greatest(F.col("first"), month))) / 1e6
    step = F.expr("INTERVAL 1 MONTH")
    months = F.sequence(F.trunc("first", "month"), F.trunc(stop, "month"), step)
    return (
        firsts.select("destination", first.alias("first"))
        .where(F.col("first") < stop)
        .select("destination", "first", F.explode(months).alias("m"))
        .select(
            "destination",
            F.date_format("m", "yyyy-MM").alias("month"),
            (overlap / quotas.LONG_POLL_SECONDS).alias("idle_poll_requests"),
        )
        .where(F.col("idle_poll_requests") > 0)
        .withColumn(
            "staging_poll_requests",
            F.when(
                F.col("destination").endswith(wire_format.FIFO_SUFFIX), F.col("idle_poll_requests")
            ).otherwise(F.lit(0.0)),
        )
    )


@dataclass
class Folded:
    """What reaches the driver (pandas), and the FOCUS rows (Spark, every destination)."""

    destinations: Any  # the aggregate's rows per (kind, destination, month, parked_route)
    idle: Any  # Series: idle polls per (destination, month)
    bill: Any  # the bill's lines per (component, destination, month, currency), or None
    folded: int  # destinations in the `others` rows
    focus: Any  # Spark DataFrame, the columns of `sqsdelay.cost.focus`
    cached: Any  # what `focus` is computed from


def fold(
    per_destination: Any,
    *,
    pricing: Pricing,
    cycle_seconds: int,
    batch_fill: int,
    start: datetime,
    end: datetime,
    bill: Any = None,
    top: int = TOP_DESTINATIONS,
    registry_table: str | None = None,
) -> Folded:
    """`per_destination`: the aggregate's (kind, destination, month, parked_route) rows of
    the priced kinds, in Spark. `bill`: the bill's booked lines per (component,
    destination, month, currency), in Spark. Destinations are ranked by the larger of their
    estimate (idle polling included) and their delay queue's list cost in the bill."""
    from pyspark.sql import functions as F

    cols = estimated(cycle_seconds, batch_fill)
    requests = per_destination.select(
        "destination",
        "month",
        *(cols[k].alias(k) for k in ("fifo", "destination_fifo", "standard", "invocations")),
    )
    firsts = per_destination.groupBy("destination").agg(F.min("first_ts").alias("first_ts"))
    idle = idle_polls(firsts, start, end)
    keys = ["destination", "month"]
    parts = ("fifo", "destination_fifo", "standard", "invocations", *POLLS)

    def padded(frame: Any) -> Any:  # a union and one shuffle is cheaper than a full join
        return frame.select(*keys, *(F.col(c) if c in frame.columns else F.lit(0.0).alias(c)
                                     for c in parts))  # fmt: skip

    per_month = (
        padded(requests)
        .unionByName(padded(idle))
        .groupBy(*keys)
        .agg(*(F.sum(c).alias(c) for c in parts))
        .persist()  # ranked here, and the FOCUS rows later
    )
    cost = estimated_requests(
        Billed(F.col("fifo"), F.col("standard"), F.col("invocations")),
        destination_fifo=F.col("destination_fifo"),
        delay_polls=F.col("idle_poll_requests"),
        staging_polls=F.col("staging_poll_requests"),
    ).cost(pricing)  # at first-tier list prices: a ranking, not the estimate
    rank = per_month.groupBy("destination").agg(F.sum(cost).alias("usd"))
    if bill is not None:
        listed = (
            bill.where(F.col("component") == b.DELAY_QUEUE)
            .groupBy("destination")
            .agg(F.sum("list").alias("listed"))
        )
        rank = (
            rank.join(listed, "destination", "full")
            .fillna({"usd": 0.0, "listed": 0.0})
            .select("destination", F.greatest("usd", "listed").alias("usd"))
        )
    ranked = rank.orderBy(F.desc("usd"), "destination").limit(top + 1).collect()
    names = [r["destination"] for r in ranked[:top]]
    folded = rank.count() - len(names) if len(ranked) > top else 0
    label = F.col("destination")
    if folded:
        label = F.when(label.isin(*names) | label.startswith("("), label).otherwise(
            F.lit(others(folded))
        )
    sums = [c for c in per_destination.columns if c not in ("kind", *keys, "parked_route")]
    small = to_pandas(
        per_destination.withColumn("destination", label)
        .groupBy("kind", *keys, "parked_route")
        .agg(*(reduced(c) for c in sums))
    )
    polls = ("idle_poll_requests", "staging_poll_requests")
    idle_small = (
        to_pandas(
            per_month.where(F.col("idle_poll_requests") > 0)
            .withColumn("destination", label)
            .groupBy(*keys)
            .agg(*(F.sum(c).alias(c) for c in polls))
        )
        .set_index(keys)[list(polls)]
        .astype(float)  # float even when empty: an object column would spoil the join
    )
    bill_small = None
    if bill is not None:
        own = F.col("component").isin(b.DELAY_QUEUE, b.DESTINATION_QUEUE)
        bill_small = to_pandas(
            bill.withColumn("destination", F.when(own, label).otherwise(F.col("destination")))
            .groupBy("component", *keys, "currency")
            .agg(*(F.sum(c).alias(c) for c in ("list", "billed", "requests", "lines")))
        )
    units = per_destination.groupBy("month").agg(
        F.sum(cols["writes"]).alias("writes"), F.sum(cols["reads"]).alias("reads")
    )
    focus = focus_rows(per_month, units, pricing, registry_table)
    return Folded(small, idle_small, bill_small, folded, focus, per_month)


def reduced(column: str) -> Any:
    """How the aggregate's column adds up over rows: the first send's minimum, the last
    send's maximum, the sum of any other."""
    from pyspark.sql import functions as F

    if column == "first_ts":
        return F.min(column).alias(column)
    if column == "last_ts":
        return F.max(column).alias(column)
    return F.sum(column).alias(column)


def focus_rows(per_month: Any, units: Any, pricing: Pricing, registry_table: str | None) -> Any:
    """The FOCUS rows of `sqsdelay.cost.focus.focus_rows`, as a Spark DataFrame, for when
    the destinations are too many for the driver (the same rows: tests/cost/test_fold.py)."""
    from pyspark.sql import functions as F

    tier = pricing.sqs_tiers[0]
    destination = F.col("destination")

    def line(service: str, resource: Any, quantity: Any, unit: str, per_million: float,
             component: Any, named: Any) -> Any:  # fmt: skip
        return F.struct(
            F.lit(service).alias("service"),
            resource.alias("resource"),
            quantity.cast("double").alias("quantity"),
            F.lit(unit).alias("unit"),
            F.lit(per_million / 1e6).alias("price"),
            F.lit(component).alias("component"),  # a name, or a column of them
            named.cast("string").alias("named"),
        )

    # One row per destination and month becomes one per resource: an explode, not a union.
    # queue_names.delay_queue_of, in Spark: a FIFO destination's is <base>-delay-fifo.fifo
    fifo = wire_format.FIFO_SUFFIX
    delay_queue = F.when(
        destination.endswith(fifo),
        F.concat(
            F.regexp_replace(destination, re.escape(fifo) + "$", ""),
            F.lit(wire_format.FIFO_DELAY_QUEUE_SUFFIX),
        ),
    ).otherwise(F.concat(destination, F.lit(wire_format.DELAY_QUEUE_SUFFIX)))
    # queues.handover_queue, in Spark: a FIFO destination's standard requests are its
    # staging queue's, tagged as its role is
    staged = destination.endswith(fifo)
    standard_queue = F.when(
        staged,
        F.concat(
            F.regexp_replace(destination, re.escape(fifo) + "$", ""),
            F.lit(wire_format.STAGING_QUEUE_SUFFIX),
        ),
    ).otherwise(destination)
    standard_component = F.when(staged, F.lit(tags.queue_component("staging"))).otherwise(
        F.lit(tags.queue_component("destination"))
    )
    per_resource = [
        line(SQS, delay_queue, F.col("fifo") + F.col("idle_poll_requests"), "Requests",
             tier.fifo_per_million, tags.queue_component("delay"), destination),
        line(SQS, standard_queue, F.col("standard") + F.col("staging_poll_requests"),
             "Requests", tier.standard_per_million, standard_component, destination),
        line(SQS, destination, F.col("destination_fifo"), "Requests", tier.fifo_per_million,
             tags.queue_component("destination"), destination),
        line(SCHEDULER, destination, F.col("invocations"), "Invocations",
             pricing.scheduler_per_million, "schedule-group", destination),
    ]  # fmt: skip
    lines = per_month.select("month", F.explode(F.array(*per_resource)).alias("r"))
    if registry_table is not None:
        table, none = F.lit(registry_table), F.lit(None)
        registry = [
            line(DYNAMODB, table, F.col("writes"), "Write Request Units",
                 pricing.dynamodb_write_per_million, "registry", none),
            line(DYNAMODB, table, F.col("reads"), "Read Request Units",
                 pricing.dynamodb_read_per_million, "registry", none),
        ]  # fmt: skip
        lines = lines.unionByName(units.select("month", F.explode(F.array(*registry)).alias("r")))
    r = lines.select("month", "r.*").where(F.col("quantity") > 0)
    start = F.to_timestamp(F.concat(F.col("month"), F.lit("-01")))
    tagged = F.when(
        F.col("named").isNull(), F.create_map(F.lit(tags.COMPONENT), F.col("component"))
    ).otherwise(
        F.create_map(
            F.lit(tags.COMPONENT), F.col("component"), F.lit(tags.DESTINATION), F.col("named")
        )
    )
    stamp = "yyyy-MM-dd'T'HH:mm:ss'Z'"
    return r.select(
        F.date_format(start, stamp).alias("ChargePeriodStart"),
        F.date_format(F.add_months(start, 1), stamp).alias("ChargePeriodEnd"),
        F.col("service").alias("ServiceName"),
        F.col("resource").alias("ResourceId"),
        F.col("quantity").alias("PricingQuantity"),
        F.col("unit").alias("PricingUnit"),
        F.col("price").alias("ListUnitPrice"),
        (F.col("quantity") * F.col("price")).alias("ListCost"),
        F.lit(pricing.currency).alias("BillingCurrency"),
        F.to_json(tagged).alias("Tags"),
        F.lit(True).alias("x_Estimate"),
    )
