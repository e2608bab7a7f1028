"""The cost job on Spark: reads `delay.scheduled` records (or generates a what-if workload)
and aggregates billed requests per destination, month, delay band and delay bucket. Only
native Spark SQL functions run on the rows; only the small aggregate reaches the driver.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import fields
from importlib import resources
from typing import Any

from sqsdelay.cost.bands import BANDS, LONGER
from sqsdelay.cost.pricing import Pricing, Quantities, park_break_even_seconds, quantities
from sqsdelay.cost.whatif import Fixed, Histogram, LogNormal, Uniform, WhatIf
from sqsdelay.errors import InvalidInput


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
    return builder.getOrCreate()


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
        ]
    )


def detect_format(paths: Sequence[str]) -> str:
    first = paths[0].rstrip("/").lower()
    if first.endswith(".parquet") or first.endswith(".pq"):
        return "parquet"
    if first.endswith(".csv"):
        return "csv"
    return "json"


# Row kinds, as small integers on the rows (cheap to group by) and as names in the aggregate.
SCHEDULED, OTHER, MALFORMED = 0, 1, 2
KINDS = {SCHEDULED: "scheduled", OTHER: "other", MALFORMED: "malformed"}


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


def read_scheduled(spark: Any, paths: Sequence[str], fmt: str = "auto") -> Any:
    """Rows of (kind, ts, destination, delay_seconds, size_bytes). `kind` is SCHEDULED,
    OTHER (another event) or MALFORMED (unparseable or missing fields): the latter two are
    counted, not fatal."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fmt = detect_format(paths) if fmt == "auto" else fmt
    schema = _schema()
    if fmt == "json":
        # Spark's JSON reader with a schema: no inference pass, and the timestamp parsed by
        # the reader itself (measured: 10M lines 25 -> 14-19 s against text + from_json +
        # a string parse). PERMISSIVE: a bad line or value becomes nulls, hence MALFORMED.
        typed = T.StructType(
            [
                T.StructField(f.name, T.TimestampType()) if f.name == "timestamp" else f
                for f in schema.fields
            ]
        )
        df = spark.read.schema(typed).option("mode", "PERMISSIVE").json(list(paths))
    elif fmt in ("csv", "parquet"):
        # Columns are matched by name (a CSV header may be in any order); missing ones are null.
        if fmt == "csv":
            df = spark.read.csv(list(paths), header=True, mode="PERMISSIVE")
        else:
            df = spark.read.parquet(*paths)
        df = df.select(*[_column(df, f.name, f.dataType).alias(f.name) for f in schema.fields])
    else:
        raise InvalidInput(f"unknown input format {fmt!r}: use json, csv or parquet")
    if isinstance(df.schema["timestamp"].dataType, T.TimestampType):
        ts = F.col("timestamp")
    else:
        # One lenient parse (ISO 8601, any offset); an impossible date is malformed, not
        # fatal (to_timestamp raises under ANSI mode, Spark 4's default).
        ts = F.try_to_timestamp(F.col("timestamp"))
    complete = (
        ts.isNotNull()
        & F.col("destination").isNotNull()
        & (F.col("delay_seconds") >= 0)
        & (F.col("size_bytes") >= 0)
    )
    if fmt == "json":
        kind = (
            F.when(F.col("event").isNull(), MALFORMED)
            .when(F.col("event") != "delay.scheduled", OTHER)
            .when(complete, SCHEDULED)
            .otherwise(MALFORMED)
        )
    else:  # CSV/Parquet hold scheduled records; the event column is optional
        event = F.col("event")
        kind = F.when(event.isNotNull() & (event != "delay.scheduled"), OTHER).when(
            complete, SCHEDULED
        )
        kind = kind.otherwise(MALFORMED)
    return df.select(
        kind.alias("kind"),
        ts.alias("ts"),
        "destination",
        F.ceil("delay_seconds").cast("long").alias("delay_seconds"),
        F.col("size_bytes").cast("long").alias("size_bytes"),
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
        F.concat(F.lit("whatif-"), (F.col("id") % spec.destinations).cast("string")).alias(
            "destination"
        ),
        F.ceil(F.greatest(_sample(spec.delay_seconds, spec.seed), F.lit(0.0)))
        .cast("long")
        .alias("delay_seconds"),
        F.ceil(F.greatest(_sample(spec.size_bytes, spec.seed + 7), F.lit(0.0)))
        .cast("long")
        .alias("size_bytes"),
    )


QUANTITY_SUMS = [f.name for f in fields(Quantities) if f.name != "messages"]


def aggregate(df: Any, pricing: Pricing, *, cycle_seconds: int = 900, batch_fill: int = 10) -> Any:
    """The small aggregate as a pandas DataFrame: one row per (kind, destination, month,
    band, bucket) with the message count and the summed quantities every model is linear in
    (priced later, on the aggregate, by `Requests.of`)."""
    from pyspark.sql import functions as F

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
    )
    # Integer keys: cheaper to hash than strings; named again on the small result.
    band = F.lit(0)
    for upper, _ in BANDS:
        band = band + (delay > upper).cast("int")
    bucket = F.floor(F.log2(F.greatest(delay, F.lit(1)))).cast("int")
    keys = [
        F.col("kind"),
        F.col("destination"),
        F.date_trunc("month", "ts").alias("month"),
        band.alias("band"),
        bucket.alias("bucket"),
    ]
    sums = [
        F.count(F.lit(1)).alias("messages"),
        F.sum(delay).alias("delay_seconds"),
        *(F.sum(getattr(q, name)).alias(name) for name in QUANTITY_SUMS),
    ]
    agg = df.groupBy(*keys).agg(*sums).toPandas()
    names = [name for _, name in BANDS] + [LONGER]
    agg["band"] = agg["band"].map(lambda b: None if b != b else names[int(b)])
    agg["kind"] = agg["kind"].map(KINDS)
    agg["month"] = agg["month"].dt.strftime("%Y-%m")
    return agg


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
