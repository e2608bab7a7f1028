"""The AWS bill as an input: AWS Data Exports (CUR 2.0, and FOCUS 1.2 with AWS columns),
read in the same Spark job as the events and reduced to the lines of sqsdelay's resources.

Column names are AWS's own: CUR 2.0,
https://docs.aws.amazon.com/cur/latest/userguide/table-dictionary-cur2.html, and FOCUS 1.2
with AWS columns,
https://docs.aws.amazon.com/cur/latest/userguide/table-dictionary-focus-1-2-aws-columns.html.
The two are told apart by their columns, not by file names.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqsdelay.core import tags
from sqsdelay.core.queue_trios import SERVING_QUEUE_ENDINGS
from sqsdelay.cost import formats
from sqsdelay.errors import InvalidInput

CUR2 = "CUR 2.0"
FOCUS = "FOCUS 1.2 with AWS columns"
# What each export must have for the reconciliation; `line_item_net_unblended_cost` is used
# when the export has it (accounts with net pricing), else `line_item_unblended_cost`.
REQUIRED = {
    CUR2: (
        "line_item_product_code",
        "line_item_resource_id",
        "line_item_usage_type",
        "line_item_usage_start_date",
        "line_item_line_item_type",
        "line_item_unblended_cost",
        "line_item_currency_code",
        "line_item_usage_amount",
        "pricing_public_on_demand_cost",
    ),
    FOCUS: (
        "ChargePeriodStart",
        "ChargeCategory",
        "ResourceId",
        "ListCost",
        "BilledCost",
        "BillingCurrency",
        "ConsumedQuantity",
        "x_ServiceCode",
        "x_UsageType",
    ),
}
# Each export's column for the fields the reconciliation reads (`billed`: what was paid).
COMMON = ("product", "resource", "line_type", "start", "list", "billed", "currency", "usage")
SOURCE = {
    CUR2: (
        "line_item_product_code",
        "line_item_resource_id",
        "line_item_line_item_type",
        "line_item_usage_start_date",
        "pricing_public_on_demand_cost",
        "line_item_unblended_cost",
        "line_item_currency_code",
        "line_item_usage_amount",
    ),
    FOCUS: (
        "x_ServiceCode",
        "ResourceId",
        "ChargeCategory",
        "ChargePeriodStart",
        "ListCost",
        "BilledCost",
        "BillingCurrency",
        "ConsumedQuantity",
    ),
}
SQS, DYNAMODB = "AWSQueueService", "AmazonDynamoDB"
# Components a line is booked to; the destination queue's lines cannot be split: the
# hand-overs land there, among the application's own sends and receives.
DELAY_QUEUE, DESTINATION_QUEUE = tags.queue_component("delay"), tags.queue_component("destination")
REGISTRY, SCHEDULE_GROUP = "registry", "schedule-group"
UNATTRIBUTED = "unattributed"  # SQS lines without a resource id (credits, mostly)


# Components booked by their `sqsdelay:component` tag (the worker's and the error queue's
# lines are not part of the estimate).
TAGGED = (DELAY_QUEUE, DESTINATION_QUEUE, REGISTRY, SCHEDULE_GROUP)


def _tags(df: Any, column: str) -> Any:
    """The line's resource tags as a map with keys normalised: `user:sqsdelay:component`
    (FOCUS) and `user_sqsdelay_component` (CUR 2.0) both become `sqsdelay_component`. CUR
    2.0 Parquet has a map; CSV exports and FOCUS have a JSON object. No column: no tags."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if column not in df.columns:
        return F.create_map().cast("map<string,string>")
    tags, kind = F.col(column), df.schema[column].dataType
    if isinstance(kind, T.StructType):  # a Parquet writer that made the map a struct
        tags = F.to_json(tags)
    if not isinstance(kind, T.MapType):
        tags = F.from_json(tags.cast("string"), "map<string,string>")

    def key(k: Any, _: Any) -> Any:
        return F.regexp_replace(F.regexp_replace(F.lower(k), "[^a-z0-9]", "_"), "^user_", "")

    return F.transform_keys(tags, key)


@dataclass(frozen=True)
class Resources:
    """What names sqsdelay's resources in a bill."""

    destinations: Any  # Spark DataFrame: the events' destinations (full queue names)
    registry_table: str | None = None
    schedule_group: str | None = None


def kind_of(columns: Sequence[str], path: str) -> str:
    """CUR 2.0 or FOCUS by the columns; a file with neither's columns, or with some of them
    missing, is refused with the columns it lacks."""
    have = set(columns)
    scores = {kind: len(have & set(cols)) for kind, cols in REQUIRED.items()}
    kind = max(scores, key=lambda k: scores[k])
    missing = [c for c in REQUIRED[kind] if c not in have]
    if scores[kind] == 0:
        raise InvalidInput(
            f"{path} is not an AWS Data Exports bill: expected the columns of {CUR2} "
            f"({', '.join(REQUIRED[CUR2])}) or of {FOCUS} ({', '.join(REQUIRED[FOCUS])})"
        )
    if missing:
        raise InvalidInput(
            f"{path} looks like a {kind} export but lacks {', '.join(missing)}: export "
            f"{kind} with these columns (AWS Data Exports, resource ids included)"
        )
    return kind


_BILL_SUFFIXES = {".parquet": "parquet", ".csv": "csv"}
# Only the data files of an export folder (its metadata/ holds JSON manifests), at any depth.
_BILL_FILES = {"parquet": "*.parquet", "csv": "*.{csv,csv.gz}"}
_GLOB = set("*?[]{}")


def bill_format(paths: Sequence[str]) -> str:
    """The bill's format: by a file's name; inside a local folder (as AWS Data Exports
    writes it, `BILLING_PERIOD=…/…snappy.parquet`), by the files in it at any depth; Parquet,
    CUR 2.0's default, for a folder Spark reads (S3, HDFS) or a name that says no format."""
    return formats.format_of(
        paths, _BILL_SUFFIXES, what="bill", option="--bill-format parquet|csv", otherwise="parquet"
    )


def data_files(fmt: str, paths: Sequence[str]) -> str:
    """The `pathGlobFilter` that reads a folder's data files only. Spark applies it to a file
    named outright as well, so the last part of each path given is admitted as it is: a
    file called `cur_export` or `bill.gz` is read, as the format given."""
    named = [_escaped(p.rstrip("/").rsplit("/", 1)[-1]) for p in paths if not _GLOB & set(p)]
    return "{" + ",".join([_BILL_FILES[fmt], *(n for n in named if n)]) + "}"


def _escaped(name: str) -> str:
    """A name as Hadoop's glob matches it literally."""
    return "".join("\\" + c if c in "\\*?[]{}," else c for c in name)


def _read(spark: Any, paths: Sequence[str], fmt: str) -> Any:
    fmt = bill_format(paths) if fmt == "auto" else fmt
    if fmt not in _BILL_FILES:
        raise InvalidInput(f"unknown bill format {fmt!r}: use parquet or csv")
    # Folders at any depth, their data files only; a file whose name says its format is read
    # as it is, and one whose name does not passes the filter by its name.
    folders = [p for p in paths if formats.format_of_name(p, _BILL_SUFFIXES) is None]
    files = [p for p in paths if p not in folders]
    frames = []
    if folders:
        filtered = {"recursiveFileLookup": "true", "pathGlobFilter": data_files(fmt, folders)}
        frames.append(_load(spark.read.options(**filtered), folders, fmt))
    if files:
        frames.append(_load(spark.read, files, fmt))
    return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def _load(reader: Any, paths: Sequence[str], fmt: str) -> Any:
    if fmt == "parquet":
        return reader.parquet(*paths)
    return reader.csv(list(paths), header=True, mode="PERMISSIVE")  # gzip is read as it is


def read_bill(spark: Any, paths: Sequence[str], resources: Resources, fmt: str = "auto") -> Any:
    """The bill's lines of sqsdelay's resources, summed per (component, destination, month),
    in Spark: columns component, destination, month (YYYY-MM, the usage's), list, billed,
    currency, requests (SQS lines' usage amount; null for other services), lines. Tax
    lines are left out (the estimate has no tax)."""
    from pyspark.sql import functions as F

    df = _read(spark, paths, fmt)
    kind = kind_of(df.columns, ", ".join(paths))
    cast = {"start": "timestamp", "list": "double", "billed": "double", "usage": "double"}
    columns = {
        col: F.col(src).cast(cast[col]) if col in cast else F.col(src)
        for col, src in zip(COMMON, SOURCE[kind], strict=True)
    }
    net = "line_item_net_unblended_cost"
    if kind == CUR2 and net in df.columns:  # accounts with net pricing: what was paid
        columns["billed"] = F.coalesce(F.col(net).cast("double"), columns["billed"])
    columns["tags"] = _tags(df, "resource_tags" if kind == CUR2 else "Tags")
    lines = df.select(*(expr.alias(col) for col, expr in columns.items()))
    lines = lines.where(F.col("line_type") != "Tax")
    resource = F.coalesce(F.col("resource"), F.lit(""))
    # arn:aws:sqs:<region>:<account>:<queue>; arn:aws:dynamodb:...:table/<table>
    queue = F.substring_index(resource, ":", -1)
    # a join, not a list of names: there may be 100,000 destinations
    known = resources.destinations.select(F.col("destination").alias("_known")).distinct()
    lines = lines.join(F.broadcast(known), queue == F.col("_known"), "left")
    table = F.substring_index(resource, "table/", -1)
    sqs = F.col("product") == SQS
    # sqsdelay's own tags, where they are active cost allocation tags, come first
    tagged = F.col("tags").getItem("sqsdelay_component")
    named = F.col("tags").getItem("sqsdelay_destination")
    component = F.when(tagged.isin(*TAGGED), tagged)
    # a destination's delay queue, or a FIFO one's delay and staging queues, by the
    # component of their role, as the installer tags them
    for ending, _, role in SERVING_QUEUE_ENDINGS:
        component = component.when(sqs & queue.endswith(ending), tags.queue_component(role))
    destination_queue = sqs & F.col("_known").isNotNull()
    component = component.when(destination_queue, tags.queue_component("destination"))
    component = component.when(sqs & (resource == ""), UNATTRIBUTED)
    destination = (
        F.when(tagged == REGISTRY, F.lit("(registry)"))
        .when(tagged == SCHEDULE_GROUP, F.lit("(schedule group)"))
        .when(tagged.isin(*TAGGED) & named.isNotNull(), named)
    )
    for ending, replaced, _ in SERVING_QUEUE_ENDINGS:
        base = F.regexp_replace(queue, re.escape(ending) + "$", "")
        destination = destination.when(
            sqs & queue.endswith(ending), F.concat(base, F.lit(replaced))
        )
    destination = destination.when(sqs & (resource != ""), queue)
    if resources.registry_table:
        registry = (F.col("product") == DYNAMODB) & resource.contains(":table/")
        registry = registry & (table == resources.registry_table)
        component = component.when(registry, REGISTRY)
        destination = destination.when(registry, F.lit("(registry)"))
    if resources.schedule_group:
        name = resources.schedule_group
        group = resource.contains(f":schedule-group/{name}") | resource.contains(
            f":schedule/{name}/"
        )
        component = component.when(group, SCHEDULE_GROUP)
        destination = destination.when(group, F.lit("(schedule group)"))
    booked = lines.select(
        component.alias("component"),
        F.when(component == UNATTRIBUTED, F.lit("(no resource id)"))
        .otherwise(destination)
        .alias("destination"),
        F.date_format("start", "yyyy-MM").alias("month"),
        "list",
        "billed",
        "currency",
        # SQS usage is in requests (64 KB chunks); other services' units are not comparable
        F.when(sqs, F.col("usage")).alias("requests"),
    ).where(F.col("component").isNotNull())
    return booked.groupBy("component", "destination", "month", "currency").agg(
        F.sum(F.coalesce(F.col("list"), F.lit(0.0))).alias("list"),
        F.sum(F.coalesce(F.col("billed"), F.lit(0.0))).alias("billed"),
        F.sum("requests").alias("requests"),
        F.count(F.lit(1)).alias("lines"),
    )
