"""The cost job on Spark: reads `delay.scheduled` records (or generates a what-if workload)
and aggregates billed requests per destination, month, delay band and delay bucket. Only
native Spark SQL functions run on the rows; only the small aggregate reaches the driver.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from sqsdelay.core import defaults, quotas, wirenames
from sqsdelay.cost.bands import BANDS, LONGER
from sqsdelay.cost.fold import (
    BILL_ROW_BUDGET,
    TOP_DESTINATIONS,
    Folded,
    fold,
    local_idle_polls,
    reduced,
)
from sqsdelay.cost.pricing import Pricing, Quantities, park_break_even_seconds, quantities
from sqsdelay.cost.whatif import Fixed, Histogram, LogNormal, Uniform, WhatIf
from sqsdelay.errors import InvalidInput

# The largest temporary direct I/O buffer the report's JVM keeps for reuse (spark_session).
MAX_CACHED_IO_BUFFER = 1 << 20


def spark_session(
    master: str | None = None,
    *,
    fast_start: bool = False,
    driver_memory: str = "1g",
    java_options: str = "",
) -> Any:
    """A SparkSession: local[2] by default, or whatever spark-submit configured.
    `java_options` go to the driver JVM (the class-data archive's, see `classarchive`)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName("sqsdelay-cost-report").config(
        "spark.sql.session.timeZone", "UTC"
    )
    # spark-submit starts the JVM first and hands Python its gateway; only then does its
    # --master apply. (SparkConf() cannot see it before the gateway is attached.)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if master or not submitted:
        log4j = resources.files("sqsdelay").joinpath("data/log4j2.properties")
        java = f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{log4j}"
        # Parquet reads a column chunk (up to a row group, 128 MiB) into a heap buffer; the
        # JDK copies it through a temporary direct buffer of the same size and by default
        # keeps one per thread for good: 170 MiB of the report's peak. Larger ones are freed.
        java += f" -Djdk.nio.maxCachedBufferSize={MAX_CACHED_IO_BUFFER}"
        if fast_start:  # halves start-up; fine for tests, 3x slower on big jobs
            java += " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        if java_options:
            java += " " + java_options
        builder = (
            builder.master(master or "local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "true")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.memory", driver_memory)
            .config("spark.driver.extraJavaOptions", java)
            .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
        )
        # glibc makes up to 8 malloc arenas per core for a threaded process such as the
        # JVM; two keep its native memory (the RSS outside the heap) down. Only the JVM
        # launched here sees the variable.
        with _environment(MALLOC_ARENA_MAX="2"):
            return builder.getOrCreate()
    return builder.getOrCreate()


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """These environment variables, unless already set, while the block runs."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def spark_running() -> bool:
    """Whether this process already has a SparkContext (a caller's session to leave alone)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def stop_spark(spark: Any, timeout: float = 120.0) -> None:
    """Stop the session and the JVM this process launched, and wait for it to exit. The JVM
    otherwise lives until Python exits, holding its heap while the report is drawn. Under
    spark-submit the JVM launched Python and is left alone."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    gateway.shutdown()
    if proc.stdin is not None:
        proc.stdin.close()  # the gateway exits when its stdin closes
    # A JVM slow to shut down finishes on its own; the report need not wait for ever.
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)
    # A later session in this process then launches a fresh JVM.
    SparkContext._gateway = None
    SparkContext._jvm = None


class SparkOps:
    """The pricing formulas' operations as Spark column functions."""

    def ceil(self, x: Any) -> Any:
        from pyspark.sql import functions as F

        return F.ceil(x)

    def maximum(self, a: Any, b: Any) -> Any:
        from pyspark.sql import functions as F

        return F.greatest(a, F.lit(b)) if not hasattr(b, "alias") else F.greatest(a, b)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        from pyspark.sql import functions as F

        return F.when(cond, a).otherwise(b)


def _schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("event", T.StringType()),
            T.StructField("timestamp", T.StringType()),
            T.StructField("message_id", T.StringType()),
            T.StructField("destination", T.StringType()),
            T.StructField("delay_seconds", T.DoubleType()),
            T.StructField("size_bytes", T.DoubleType()),
            T.StructField("route", T.StringType()),
            T.StructField("remaining_seconds", T.DoubleType()),
        ]
    )


FORMATS = ("json", "logfmt", "csv", "parquet", "cwl-subscription")
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".json": "json"}
_SUFFIXES |= {".jsonl": "json", ".ndjson": "json", ".log": "json"}


def detect_format(paths: Sequence[str]) -> str:
    """The input format from the paths' suffixes (`.gz` aside); every path must agree. A path
    without a telling suffix (a directory, an S3 prefix) needs --format."""
    found = set()
    for path in paths:
        name = path.rstrip("/").lower().removesuffix(".gz").removesuffix(".snappy")
        suffix = name[name.rfind(".") :] if "." in name.rsplit("/", 1)[-1] else ""
        if suffix not in _SUFFIXES:
            raise InvalidInput(
                f"cannot tell the format of {path!r} from its name: give --format "
                f"{'|'.join(FORMATS)}"
            )
        found.add(_SUFFIXES[suffix])
    if len(found) != 1:
        mixed = ", ".join(sorted(found))
        raise InvalidInput(f"the inputs mix formats ({mixed}): give one format per run")
    return found.pop()


# Row kinds, as small integers on the rows (cheap to group by) and as names in the aggregate.
# CARRIED: a message still looping from before the window, seen only by its requeues.
SCHEDULED, OTHER, MALFORMED, REQUEUED, CARRIED = 0, 1, 2, 3, 4
KINDS = {
    SCHEDULED: "scheduled",
    OTHER: "other",
    MALFORMED: "malformed",
    REQUEUED: "requeued",
    CARRIED: "carried_over",
}
# Priced kinds: their hops are in the estimate.
PRICED = (SCHEDULED, CARRIED)


def _column(df: Any, name: str, data_type: Any) -> Any:
    """A column by name (missing: null), converted only when its type needs it."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if name not in df.columns:
        return F.lit(None).cast(data_type)
    have = df.schema[name].dataType
    if name == "timestamp" and isinstance(have, T.TimestampType):
        return F.col(name)  # typed Parquet: nothing to parse
    if isinstance(data_type, T.DoubleType) and isinstance(have, T.IntegralType):
        return F.col(name)
    return F.col(name).cast(data_type)


def _typed_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField(f.name, T.TimestampType()) if f.name == "timestamp" else f
            for f in _schema().fields
        ]
    )


# A line of the library's: `event=` and a dotted name (`delay.scheduled`).
_EVENT_LINE = r"(^|\s)event=[a-z_]+\.[a-z_.]+"
# A number as logfmt writes it; anything else is not cast (a cast would fail under ANSI).
_NUMBER = r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$"
# The time an application's log format puts first (Python's asctime has a comma).
_LEADING_TIME = r"^\S*?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"


def _logfmt(text: Any, *, typed: bool) -> dict[str, Any]:
    """The event fields of a logfmt line, as the library logs through the application's own
    handler (`sqsdelay.logs`): `key=value` or `key="quoted value"` anywhere in the line. The
    time is the event's `timestamp=` (UTC), else the time the line starts with (taken as
    UTC). Columns by name, in `_schema()`'s order."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    def field(name: str) -> Any:
        raw = F.regexp_extract(text, rf'(?:^|\s){name}=("(?:[^"\\]|\\.)*"|\S*)', 1)
        unquoted = F.regexp_replace(F.regexp_replace(raw, r'^"|"$', ""), r"\\(.)", "$1")
        value = F.when(raw.startswith('"'), unquoted).otherwise(raw)
        return F.when(value != "", value)

    columns = {}
    for f in _schema().fields:
        value = field(f.name)
        if f.name == "timestamp":
            leading = F.regexp_replace(F.regexp_extract(text, _LEADING_TIME, 1), ",", ".")
            value = F.coalesce(value, F.when(leading != "", leading))
            value = F.try_to_timestamp(value) if typed else value
        elif isinstance(f.dataType, T.DoubleType):
            value = F.when(value.rlike(_NUMBER), value.cast("double"))
        columns[f.name] = value
    return columns


# A prefix's files at any depth: Firehose writes under YYYY/MM/DD/HH/.
_NESTED = {"recursiveFileLookup": "true"}
_ENVELOPE_START = re.compile(r'(?<=\})\s*(?=\{"messageType")')


def envelope_texts(content: bytes) -> Iterator[str]:
    """The JSON envelopes in one file: gzip members one at a time (Firehose writes each
    record as its own member, back to back), or the file's text; one envelope a line, or
    back to back. A member that does not decompress ends the file (what is left is not
    readable); it is not an error of the whole job."""
    if content[:2] != b"\x1f\x8b":
        yield from _ENVELOPE_START.split(content.decode("utf-8", "replace"))
        return
    while content[:2] == b"\x1f\x8b":
        member = zlib.decompressobj(wbits=31)
        try:
            text = member.decompress(content)
        except zlib.error:
            return
        yield from _ENVELOPE_START.split(text.decode("utf-8", "replace"))
        content = member.unused_data


def _envelope_frames(frames: Iterator[Any]) -> Iterator[Any]:
    import pandas as pd

    for frame in frames:
        for content in frame["content"]:
            texts = envelope_texts(bytes(content))
            # a thousand envelopes at a time: a 128 MB object is not held decompressed
            while chunk := list(itertools.islice(texts, 1000)):
                yield pd.DataFrame({"doc": chunk})


def _cwl_events(spark: Any, paths: Sequence[str]) -> Any:
    """The event lines inside CloudWatch Logs subscription envelopes, gzipped or not: one
    envelope per line or per file, or as Firehose writes them to S3 (envelopes back to back,
    each its own gzip member, no separator). CONTROL_MESSAGE envelopes carry no events."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    envelope = T.StructType(
        [
            T.StructField("messageType", T.StringType()),
            T.StructField(
                "logEvents",
                T.ArrayType(
                    T.StructType(
                        [
                            T.StructField("timestamp", T.LongType()),
                            T.StructField("message", T.StringType()),
                        ]
                    )
                ),
            ),
        ]
    )
    # Files as bytes: a Firehose object is gzip without a .gz suffix, which Spark's text
    # reader would not decompress. Each file becomes its envelopes (`envelope_texts`).
    files = spark.read.options(**_NESTED).format("binaryFile").load(list(paths))
    files = files.select("content")
    docs = files.mapInPandas(_envelope_frames, "doc string")
    raw = docs.select(F.from_json("doc", envelope, {"mode": "PERMISSIVE"}).alias("m"))
    lines = raw.where(F.col("m.messageType") == "DATA_MESSAGE").select(
        F.explode("m.logEvents").alias("e")
    )
    message = F.col("e.message")
    parsed = F.from_json(message, _typed_schema(), {"mode": "PERMISSIVE"})
    # An application that ships the library's logfmt lines: parsed as `--format logfmt`;
    # its own lines count as other events, not as malformed ones.
    as_json = F.ltrim(message).startswith("{")
    ours = message.rlike(_EVENT_LINE)
    fields = _logfmt(message, typed=True)
    fields["event"] = F.when(ours, fields["event"]).otherwise(F.lit("(application)"))
    return lines.select(
        *(F.when(as_json, parsed[name]).otherwise(col).alias(name) for name, col in fields.items())
    )


def read_scheduled(
    spark: Any,
    paths: Sequence[str],
    fmt: str = "auto",
    *,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Any:
    """Rows of (kind, ts, message_id, destination, delay_seconds, size_bytes). `kind` is
    SCHEDULED, REQUEUED (a worker's hop: `delay_seconds` is its remaining delay), OTHER
    (another event) or MALFORMED (unparseable, missing or impossible fields): the latter two
    are counted, not fatal. Rows outside [since, until) are left out."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fmt = detect_format(paths) if fmt == "auto" else fmt
    schema = _schema()
    if fmt == "json":
        # Spark's JSON reader with a schema: no inference pass, and the timestamp parsed by
        # the reader itself (measured: 10M lines 25 -> 14-19 s against text + from_json +
        # a string parse). PERMISSIVE: a bad line or value becomes nulls, hence MALFORMED.
        # Gzipped files (.gz) are read as they are.
        reader = spark.read.options(**_NESTED).schema(_typed_schema())
        df = reader.option("mode", "PERMISSIVE").json(list(paths))
    elif fmt == "cwl-subscription":
        df = _cwl_events(spark, paths)
        fmt = "json"  # the lines inside are the event log's
    elif fmt == "logfmt":
        # Only the library's lines (`event=` and a dotted name: `delay.scheduled`); the
        # application's own are not input at all, neither events nor malformed lines.
        text = spark.read.options(**_NESTED).text(list(paths))
        text = text.where(F.col("value").rlike(_EVENT_LINE))
        df = text.select(*(c.alias(n) for n, c in _logfmt(F.col("value"), typed=False).items()))
        fmt = "json"  # the same events as the JSON log, the same rules
    elif fmt in ("csv", "parquet"):
        # Columns are matched by name (a CSV header may be in any order); missing ones are null.
        if fmt == "csv":
            df = spark.read.options(**_NESTED).csv(list(paths), header=True, mode="PERMISSIVE")
        else:
            df = spark.read.options(**_NESTED).parquet(*paths)
        df = df.select(*[_column(df, f.name, f.dataType).alias(f.name) for f in schema.fields])
    else:
        raise InvalidInput(f"unknown input format {fmt!r}: use {', '.join(FORMATS)}")
    if isinstance(df.schema["timestamp"].dataType, T.TimestampType):
        ts = F.col("timestamp")
    else:
        # One lenient parse (ISO 8601, any offset); an impossible date is malformed, not
        # fatal (to_timestamp raises under ANSI mode, Spark 4's default).
        ts = F.try_to_timestamp(F.col("timestamp"))
    event = F.col("event")
    requeued = event == "delay.requeued"
    delay = F.when(requeued, F.col("remaining_seconds")).otherwise(F.col("delay_seconds"))
    complete = ts.isNotNull() & F.col("destination").isNotNull() & _sane(delay, F.col("size_bytes"))
    if fmt == "json":
        kind = (
            F.when(event.isNull(), MALFORMED)
            .when(requeued & complete & F.col("message_id").isNotNull(), REQUEUED)
            .when(requeued, MALFORMED)
            .when(event != "delay.scheduled", OTHER)
            .when(complete, SCHEDULED)
            .otherwise(MALFORMED)
        )
    else:  # CSV/Parquet hold scheduled records; the event column is optional
        kind = F.when(event.isNotNull() & (event != "delay.scheduled"), OTHER).when(
            complete, SCHEDULED
        )
        kind = kind.otherwise(MALFORMED)
    valid = kind.isin(SCHEDULED, REQUEUED)
    out = df.select(
        kind.alias("kind"),
        ts.alias("ts"),
        "message_id",
        "destination",
        # Only a sane value is converted: a huge one would fail the whole run under ANSI.
        F.when(valid, F.ceil(delay).cast("long")).alias("delay_seconds"),
        F.when(valid, F.col("size_bytes").cast("long")).alias("size_bytes"),
        # The route the sender took: a parked message waits in Scheduler, not in the loop.
        F.coalesce(F.col("route") == "parked", F.lit(False)).alias("parked_route"),
    )
    if since is not None:
        out = out.where(F.col("ts").isNull() | (F.col("ts") >= F.lit(since)))
    if until is not None:
        out = out.where(F.col("ts").isNull() | (F.col("ts") < F.lit(until)))
    return out


def _sane(delay: Any, size: Any) -> Any:
    """A delay and a size that can be: finite, not negative, within SQS's and our limits.
    NaN compares greater than everything in Spark, so the upper bounds reject it too."""
    return (
        (delay >= 0)
        & (delay <= defaults.MAX_DELAY_SECONDS)
        & (size >= 0)
        & (size <= quotas.MAX_MESSAGE_BYTES)
    )


def carried_over(df: Any, cycle_seconds: int) -> Any:
    """Messages still looping from before the window: requeued in it but not scheduled in
    it. Each is priced from its first requeue on, as if scheduled then with its remaining
    delay plus the hop that requeue made (the requeue's send stands for the first send)."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    scheduled = df.where(F.col("kind") == SCHEDULED).select("message_id").distinct()
    hops = df.where(F.col("kind") == REQUEUED).join(scheduled, "message_id", "left_anti")
    first = Window.partitionBy("message_id").orderBy("ts")
    return (
        hops.withColumn("n", F.row_number().over(first))
        .where(F.col("n") == 1)
        .select(
            F.lit(CARRIED).alias("kind"),
            "ts",
            "message_id",
            "destination",
            (F.col("delay_seconds") + cycle_seconds).alias("delay_seconds"),
            "size_bytes",
            F.lit(False).alias("parked_route"),  # it was seen looping
        )
    )


def _sample(dist: Any, seed: int) -> Any:
    """A column drawn from a what-if distribution, with native functions only."""
    from pyspark.sql import functions as F

    if isinstance(dist, Fixed):
        return F.lit(dist.value)
    if isinstance(dist, Uniform):
        return F.lit(dist.min) + F.rand(seed) * (dist.max - dist.min)
    if isinstance(dist, LogNormal):
        return F.exp(F.lit(dist.mu) + F.randn(seed) * dist.sigma)
    assert isinstance(dist, Histogram)
    total = sum(w for _, w in dist.buckets)
    u = F.rand(seed) * total
    v = F.rand(seed + 1)
    expr, cumulative, lower = None, 0.0, 0.0
    for upper, weight in dist.buckets:
        cumulative += weight
        value = F.lit(lower) + v * (upper - lower)
        expr = F.when(u < cumulative, value) if expr is None else expr.when(u < cumulative, value)
        lower = upper
    assert expr is not None
    return expr.otherwise(F.lit(lower))


def generate(spark: Any, spec: WhatIf) -> Any:
    """The what-if workload as the same rows `read_scheduled` produces, generated in Spark."""
    from pyspark.sql import functions as F

    per_day = spec.messages_per_day
    start = F.lit(spec.start.isoformat()).cast("timestamp")
    offset = F.floor(F.col("id") / per_day) * 86_400 + F.floor(
        (F.col("id") % per_day) * (86_400 / per_day)
    )
    return spark.range(spec.total_messages).select(
        F.lit(SCHEDULED).alias("kind"),
        (start + F.make_interval(secs=offset)).alias("ts"),
        F.lit(None).cast("string").alias("message_id"),
        F.concat(F.lit("whatif-"), (F.col("id") % spec.destinations).cast("string")).alias(
            "destination"
        ),
        F.ceil(F.greatest(_sample(spec.delay_seconds, spec.seed), F.lit(0.0)))
        .cast("long")
        .alias("delay_seconds"),
        F.ceil(F.greatest(_sample(spec.size_bytes, spec.seed + 7), F.lit(0.0)))
        .cast("long")
        .alias("size_bytes"),
        F.lit(False).alias("parked_route"),  # what-if: it loops; the models compare routes
    )


QUANTITY_SUMS = [f.name for f in fields(Quantities) if f.name != "messages"]
# Quantities that happen when the message is sent (the count and the first send); the rest
# (the worker's passes and the hand-over) are spread over the message's life.
AT_SEND = ("routed", "chunks", "routed_chunks")


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
        fifo_destination=F.col("destination").endswith(wirenames.FIFO_SUFFIX).cast("int"),
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


def write_csv(spark: Any, df: Any, target: str, name: str, order: Sequence[str] = ()) -> None:
    """`df` as one CSV file `<target>/<name>`, sorted by `order`, written by Spark (a path or
    a Hadoop URI): the rows never pass through the driver."""
    jvm = spark._jvm
    path_cls = jvm.org.apache.hadoop.fs.Path
    base = target.rstrip("/") if "://" in target else Path(target).resolve().as_uri()
    parts = f"{base}/_{name}.parts"
    df.coalesce(1).sortWithinPartitions(*order).write.mode("overwrite").option(
        "header", True
    ).option("escape", '"').csv(parts)
    fs = path_cls(parts).getFileSystem(spark._jsc.hadoopConfiguration())
    (part,) = fs.globStatus(path_cls(parts + "/part-*"))
    dest = path_cls(f"{base}/{name}")
    fs.delete(dest, False)
    fs.rename(part.getPath(), dest)
    fs.delete(path_cls(parts), True)


def publish(spark: Any, local_dir: str, target: str) -> None:
    """Copy the report from the driver's disk to `target` when it is a Hadoop URI (s3a://,
    hdfs://, file://), e.g. on a cluster whose driver disk is ephemeral."""
    jvm = spark._jvm
    path_cls = jvm.org.apache.hadoop.fs.Path
    dest = path_cls(target)
    fs = dest.getFileSystem(spark._jsc.hadoopConfiguration())
    fs.mkdirs(dest)
    for name in sorted(os.listdir(local_dir)):
        fs.copyFromLocalFile(
            False,
            True,
            path_cls(os.path.join(local_dir, name)),
            path_cls(target.rstrip("/") + "/" + name),
        )
