"""The cost job's inputs: `delay.scheduled` records from JSON lines, logfmt, CSV, Parquet,
CloudWatch Logs subscription envelopes and Firehose objects, each format told by its
suffix or given, read by Spark into one typed frame.
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from sqsdelay.core import defaults, quotas
from sqsdelay.cost import formats
from sqsdelay.errors import InvalidInput


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
    """The input format from the paths' suffixes (`.gz` aside), or for a local folder from
    the data files in it, as the bill's (`formats.format_of`); every path must agree. Any
    other path without a telling suffix (an S3 prefix, a Firehose object) needs --format."""
    return formats.format_of(paths, _SUFFIXES, what="input", option=f"--format {'|'.join(FORMATS)}")


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
    if name == "timestamp" and isinstance(have, T.TimestampNTZType):
        # A time without a zone (pandas' naive datetimes, DuckDB's TIMESTAMP) is the
        # session's (UTC) wall time, as its text would be parsed: cast, not formatted as
        # text and parsed again (a quarter of a 2M-row aggregation's time).
        return F.col(name).cast(T.TimestampType())
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


def carried_over(cycle_seconds: int) -> str:
    """Messages still looping from before the window: requeued in it but not scheduled in
    it. Each is priced from its first requeue on, as if scheduled then with its remaining
    delay plus the hop that requeue made (the requeue's send stands for the first send).
    A query over the read records `{rows}`, with their columns (`read_scheduled`)."""
    return f"""
        SELECT {CARRIED} AS kind, ts, message_id, destination,
            delay_seconds + {int(cycle_seconds)} AS delay_seconds, size_bytes,
            false AS parked_route  -- it was seen looping
        FROM (
            SELECT hop.*, row_number() OVER (PARTITION BY hop.message_id ORDER BY hop.ts) AS n
            FROM {{rows}} hop LEFT ANTI JOIN
                (SELECT DISTINCT message_id FROM {{rows}} WHERE kind = {SCHEDULED}) scheduled
                ON hop.message_id = scheduled.message_id
            WHERE hop.kind = {REQUEUED}
        )
        WHERE n = 1
    """  # noqa: S608 (the code's own numbers only)
