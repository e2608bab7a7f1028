"""The cost report job on Spark: reads `delay.scheduled` records (or generates a what-if
workload) and aggregates billed requests per destination, month, delay band and delay
bucket. Only native Spark SQL functions run on the rows; only the small aggregate reaches the
driver.

Local mode (embedded) by default; unchanged under `spark-submit --master ...`, where the
master and resources come from spark-submit.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from sqsdelay.errors import InvalidInput
from sqsdelay.pricing import Pricing, requests
from sqsdelay.whatif import Fixed, Histogram, LogNormal, Uniform, WhatIf

BANDS = [(900, "≤15 min"), (3600, "≤1 h"), (86_400, "≤1 day"), (30 * 86_400, "≤30 days")]
LONGER = "longer"
BAND_ORDER = [name for _, name in BANDS] + [LONGER]


def spark_session(
    master: str | None = None, *, fast_start: bool = False, driver_memory: str = "1g"
) -> Any:
    """A SparkSession: local[2] by default, or whatever spark-submit configured."""
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


def read_scheduled(spark: Any, paths: Sequence[str], fmt: str = "auto") -> Any:
    """Rows of (kind, ts, destination, delay_seconds, size_bytes). `kind` is `scheduled`,
    `other` (another event) or `malformed` (unparseable or missing fields): the latter two
    are counted, not fatal."""
    from pyspark.sql import functions as F

    fmt = detect_format(paths) if fmt == "auto" else fmt
    schema = _schema()
    if fmt == "json":
        # Text first, then from_json with a schema: no inference pass, bad lines survive.
        raw = spark.read.text(list(paths))
        rec = F.from_json("value", schema)
        df = raw.select(rec.alias("r")).select("r.*")
    elif fmt in ("csv", "parquet"):
        # Columns are matched by name (a CSV header may be in any order); missing ones are null.
        if fmt == "csv":
            df = spark.read.csv(list(paths), header=True, mode="PERMISSIVE")
        else:
            df = spark.read.parquet(*paths)
        df = df.select(
            *[
                (F.col(f.name) if f.name in df.columns else F.lit(None))
                .cast(f.dataType)
                .alias(f.name)
                for f in schema.fields
            ]
        )
    else:
        raise InvalidInput(f"unknown input format {fmt!r}: use json, csv or parquet")
    if fmt != "json":  # CSV/Parquet hold scheduled records; the event column is optional
        df = df.withColumn("event", F.coalesce("event", F.lit("delay.scheduled")))
    ts = F.coalesce(
        F.to_timestamp("timestamp"), F.to_timestamp("timestamp", "yyyy-MM-dd'T'HH:mm:ss.SSSSSSX")
    )
    complete = (
        ts.isNotNull()
        & F.col("destination").isNotNull()
        & (F.col("delay_seconds") >= 0)
        & (F.col("size_bytes") >= 0)
    )
    kind = (
        F.when(F.col("event").isNull(), "malformed")
        .when(F.col("event") != "delay.scheduled", "other")
        .when(complete, "scheduled")
        .otherwise("malformed")
    )
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
        F.lit("scheduled").alias("kind"),
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


def aggregate(df: Any, pricing: Pricing, *, cycle_seconds: int = 900, batch_fill: int = 10) -> Any:
    """The small aggregate as a pandas DataFrame: one row per (kind, destination, month,
    band, bucket) with the summed requests of every model."""
    from pyspark.sql import functions as F

    delay, size = F.col("delay_seconds"), F.col("size_bytes")
    r = requests(
        delay,
        size,
        ops=SparkOps(),
        cycle_seconds=cycle_seconds,
        batch_fill=batch_fill,
        chunk_bytes=pricing.billing_chunk_bytes,
    )
    band = F.when(delay.isNull(), None)
    for upper, name in BANDS:
        band = band.when(delay <= upper, name)
    band = band.otherwise(LONGER)
    bucket = F.when(delay.isNull(), None).otherwise(F.floor(F.log2(F.greatest(delay, F.lit(1)))))
    keys = [
        F.col("kind"),
        F.col("destination"),
        F.date_format("ts", "yyyy-MM").alias("month"),
        band.alias("band"),
        bucket.cast("int").alias("bucket"),
    ]
    scheduled = F.col("kind") == "scheduled"

    def total(x: Any) -> Any:
        return F.sum(F.when(scheduled, x).otherwise(0))

    sums = [
        F.count(F.lit(1)).alias("messages"),
        total(F.when(delay > cycle_seconds, 1).otherwise(0)).alias("delayed_messages"),
        total(delay).alias("delay_seconds"),
        total(size).alias("size_bytes"),
        total(r.cycles).alias("cycles"),
        total(r.reference_ops).alias("reference_ops"),
        total(r.exact_fifo).alias("exact_fifo"),
        total(r.exact_standard).alias("exact_standard"),
        total(r.batched_fifo).alias("batched_fifo"),
        total(r.batched_standard).alias("batched_standard"),
        total(r.scheduler_invocations).alias("scheduler_invocations"),
        total(r.scheduler_standard).alias("scheduler_standard"),
    ]
    return df.groupBy(*keys).agg(*sums).toPandas()


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


def run_report(
    *,
    inputs: Sequence[str],
    output: str,
    pricing: Pricing,
    batch_fill: int = 10,
    cycle_seconds: int = 900,
    what_if: WhatIf | None = None,
    input_format: str = "auto",
    master: str | None = None,
    fast_start: bool = False,
    spark: Any = None,
    progress: Any = None,
) -> Any:
    """Read (or generate), aggregate, and write the report. Returns the `Report`."""
    import tempfile

    from sqsdelay import cost_report

    def step(text: str) -> None:
        if progress is not None:
            progress(text)

    if not inputs and what_if is None:
        raise InvalidInput("give --input PATH... or --what-if SPEC")
    step("starting Spark")
    spark = spark or spark_session(master, fast_start=fast_start)
    step("reading and aggregating")
    try:
        df = generate(spark, what_if) if what_if else read_scheduled(spark, inputs, input_format)
        agg = aggregate(df, pricing, cycle_seconds=cycle_seconds, batch_fill=batch_fill)
    except Exception as exc:  # Spark reports a missing path as AnalysisException
        if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in str(exc):
            raise InvalidInput(f"input not found: {', '.join(inputs)}") from None
        raise
    source = f"what-if {what_if.total_messages:,} messages" if what_if else ", ".join(inputs)
    step("writing the report")
    report = cost_report.build(
        agg, pricing, batch_fill=batch_fill, cycle_seconds=cycle_seconds, source=source
    )
    if "://" in output:
        with tempfile.TemporaryDirectory() as tmp:
            cost_report.write(report, Path(tmp))
            publish(spark, tmp, output)
    else:
        cost_report.write(report, Path(output))
    return report


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point for `spark-submit .../sqsdelay/cost_job.py --input ... --output ...`."""
    import argparse

    from sqsdelay.pricing import load_pricing
    from sqsdelay.whatif import load_what_if

    parser = argparse.ArgumentParser(description="sqsdelay cost report (spark-submit entry)")
    parser.add_argument("--input", nargs="*", default=[])
    parser.add_argument("--output", required=True)
    parser.add_argument("--pricing", type=Path)
    parser.add_argument("--batch-fill", type=int, default=10)
    parser.add_argument("--cycle-seconds", type=int, default=900)
    parser.add_argument("--what-if", type=Path)
    parser.add_argument("--format", default="auto", choices=["auto", "json", "csv", "parquet"])
    args = parser.parse_args(argv)
    spark = spark_session()  # under spark-submit, its master and resources apply
    report = run_report(
        inputs=args.input,
        output=args.output,
        pricing=load_pricing(args.pricing),
        batch_fill=args.batch_fill,
        cycle_seconds=args.cycle_seconds,
        what_if=load_what_if(args.what_if) if args.what_if else None,
        input_format=args.format,
        spark=spark,
    )
    s = report.summary
    print(
        json.dumps(
            {
                "master": spark.sparkContext.master,
                "output": args.output,
                "messages": s["messages"],
                "average_monthly_cost": s["average_monthly_cost"],
            }
        )
    )


if __name__ == "__main__":
    main()
