"""Running the cost report: read or generate, aggregate on Spark, write the report.

Also the `spark-submit` entry point: `spark-submit .../sqsdelay/cost/run.py --input ...
--output ...`. Local mode (embedded) by default; under spark-submit its master and resources
apply.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqsdelay.cost import classarchive, localpaths
from sqsdelay.cost import focus as focus_rows
from sqsdelay.cost import report as cost_report
from sqsdelay.cost.bill import Resources, read_bill
from sqsdelay.cost.fold import TOP_DESTINATIONS
from sqsdelay.cost.job import (
    FORMATS,
    aggregate,
    generate,
    publish,
    read_scheduled,
    small_queries,
    spark_running,
    spark_session,
    stop_spark,
    utc,
    write_csv,
)
from sqsdelay.cost.pricing import Pricing, load_pricing
from sqsdelay.cost.running import Running, load_running
from sqsdelay.cost.whatif import WhatIf, load_what_if
from sqsdelay.errors import InvalidInput


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
    class_archive: Path | None = None,
    spark: Any = None,
    progress: Any = None,
    bills: Sequence[str] = (),
    bill_format: str = "auto",
    since: datetime | None = None,
    until: datetime | None = None,
    free_tier: frozenset[str] = frozenset(),
    registry_table: str | None = None,
    schedule_group: str | None = None,
    snapshots: str | None = None,
    running: Running | None = None,
    top: int = TOP_DESTINATIONS,
) -> Any:
    """Read (or generate), aggregate, read the bill (if any), and write the report. Returns
    the `Report`. With `snapshots`, the same files also go to `<snapshots>/<UTC time of the
    run>/`, so that a scheduled run that overwrites `latest` keeps its history."""

    def step(text: str) -> None:
        if progress is not None:
            progress(text)

    if not inputs and what_if is None:
        raise InvalidInput("give --input PATH... or --what-if SPEC")
    # one zone for the bounds, from the CLI or spark-submit: without an offset, UTC
    since, until = (None if t is None else utc(t) for t in (since, until))
    if since and until and since >= until:
        raise InvalidInput("--since must be before --until")
    if spark is not None:
        local = localpaths.session_fs_is_local(spark)
    else:
        local = master is None or master.startswith("local")
    missing = localpaths.missing([*inputs, *bills]) if local else []
    if missing and what_if is None:  # said before Spark starts (and prints a Java trace)
        raise InvalidInput(f"input not found: {', '.join(missing)}")
    step("starting Spark")
    # A session this call starts is stopped here, with its JVM; a caller's is left running.
    owned = spark is None and not spark_running()
    targets = [output] + ([snapshot_of(snapshots, datetime.now(UTC))] if snapshots else [])
    remote = any("://" in t for t in targets)  # published through Hadoop's file systems
    java = classarchive.use_option(class_archive)
    # No archive yet: this run lists the classes it loads, and one is written from the list.
    classlist = None
    if owned and not remote and class_archive is not None and not java:
        classlist = classarchive.classlist_for(class_archive)
        java = classarchive.record_option(classlist)
    spark = spark or spark_session(master, fast_start=fast_start, java_options=java)
    step("reading and aggregating")
    try:
        if what_if:
            df = generate(spark, what_if)
        else:
            df = read_scheduled(spark, inputs, input_format, since=since, until=until)

        def bill(known: Any) -> Any:
            resources = Resources(known, registry_table, schedule_group)
            return read_bill(spark, bills, resources, bill_format)

        agg = aggregate(
            df,
            pricing,
            cycle_seconds=cycle_seconds,
            batch_fill=batch_fill,
            since=since,
            until=until,
            bill=bill if bills else None,
            top=top,
            registry_table=registry_table,
        )
        # Every resource by name: with destinations folded, too many rows for the driver, so
        # Spark writes them; else the report writes them with its other files.
        if agg.folded:
            step("writing the FOCUS rows")
            with small_queries(spark):
                for target in targets:
                    write_csv(spark, agg.focus, target, focus_rows.FILE, focus_rows.ORDER)
        agg.release()
    except Exception as exc:  # Spark reports a missing path as AnalysisException
        if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in str(exc):
            raise InvalidInput(f"input not found: {', '.join([*inputs, *bills])}") from None
        raise
    if owned and not remote:
        # The archive must fit this JVM: ask it for its java and class path before it stops.
        runtime = classarchive.runtime_of(spark) if classlist is not None else None
        step("stopping Spark")
        stop_spark(spark)  # its memory is freed before the report is drawn
        if class_archive is not None and classlist is not None and runtime is not None:
            step("writing the class-data archive for a faster start next time (once)")
            classarchive.dump(class_archive, classlist, *runtime)
    source = "what-if workload" if what_if else ", ".join(inputs)
    step("writing the report")
    report = cost_report.build(
        agg,
        pricing,
        batch_fill=batch_fill,
        cycle_seconds=cycle_seconds,
        source=source,
        free_tier=free_tier,
        registry_table=registry_table,
        running=running,
    )
    if remote:
        with tempfile.TemporaryDirectory() as tmp:
            cost_report.write(report, Path(tmp))
            for target in targets:
                publish(spark, tmp, target)
        if owned:
            stop_spark(spark)
    else:
        for target in targets:
            cost_report.write(report, Path(target))
    return report


def snapshot_of(prefix: str, at: datetime) -> str:
    """Where one run's copy goes: `<prefix>/2026-11-25T070312Z` (sorts by time)."""
    return f"{prefix.rstrip('/')}/{at:%Y-%m-%dT%H%M%SZ}"


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point for `spark-submit .../sqsdelay/cost/run.py --input ... --output ...`."""
    import argparse

    parser = argparse.ArgumentParser(description="sqsdelay cost report (spark-submit entry)")
    parser.add_argument("--input", nargs="*", default=[])
    parser.add_argument("--output", required=True)
    parser.add_argument("--pricing", type=Path)
    parser.add_argument("--batch-fill", type=int, default=10)
    parser.add_argument("--cycle-seconds", type=int, default=900)
    parser.add_argument("--what-if", type=Path)
    parser.add_argument("--format", default="auto", choices=["auto", *FORMATS])
    parser.add_argument("--bill", nargs="*", default=[])
    parser.add_argument("--bill-format", default="auto", choices=["auto", "parquet", "csv"])
    parser.add_argument("--since", type=datetime.fromisoformat)
    parser.add_argument("--until", type=datetime.fromisoformat)
    parser.add_argument("--free-tier", action="append", default=[], choices=["sqs", "scheduler"])
    parser.add_argument("--currency")
    parser.add_argument("--exchange-rate", type=float)
    parser.add_argument("--registry-table", help="the registry's DynamoDB table, in the bill")
    parser.add_argument("--schedule-group", help="the Scheduler group, in the bill")
    parser.add_argument("--snapshots", help="also write a copy to <SNAPSHOTS>/<UTC time>/")
    parser.add_argument("--running", type=Path, help="how sqsdelay runs (YAML), for its cost")
    parser.add_argument("--top-destinations", type=int, default=TOP_DESTINATIONS)
    args = parser.parse_args(argv)
    spark = spark_session()  # under spark-submit, its master and resources apply
    report = run_report(
        inputs=args.input,
        output=args.output,
        pricing=load_pricing(args.pricing).converted(args.currency, args.exchange_rate),
        batch_fill=args.batch_fill,
        cycle_seconds=args.cycle_seconds,
        what_if=load_what_if(args.what_if) if args.what_if else None,
        input_format=args.format,
        spark=spark,
        bills=args.bill,
        bill_format=args.bill_format,
        since=args.since,
        until=args.until,
        free_tier=frozenset(args.free_tier),
        registry_table=args.registry_table,
        schedule_group=args.schedule_group,
        snapshots=args.snapshots,
        running=load_running(args.running),
        top=args.top_destinations,
    )
    s = report.summary
    print(
        json.dumps(
            {
                "master": spark.sparkContext.master,
                "output": args.output,
                "messages": s["messages"],
                "average_monthly_estimated_cost": s["average_monthly_estimated_cost"],
            }
        )
    )


if __name__ == "__main__":
    main()
