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

from sqsdelay.cost import classarchive, localpaths, summary
from sqsdelay.cost import focus as focus_rows
from sqsdelay.cost.bill import Resources, read_bill
from sqsdelay.cost.inputs import read_scheduled
from sqsdelay.cost.job import aggregate, small_queries, utc
from sqsdelay.cost.options import REPORT_OPTIONS, ReportRequest, report_arguments
from sqsdelay.cost.render.files import publish, write, write_csv
from sqsdelay.cost.session import spark_running, spark_session, stop_spark
from sqsdelay.cost.workload import generate
from sqsdelay.errors import InvalidInput
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.cost")


def run_report(
    request: ReportRequest,
    *,
    master: str | None = None,
    fast_start: bool = False,
    class_archive: Path | None = None,
    spark: Any = None,
    progress: Any = None,
) -> Any:
    """Read (or generate), aggregate, read the bill (if any), and write the report that
    `request` asks for. Returns the `Report`. The other arguments say how Spark runs: its
    master (or the caller's `spark`), the class-data archive, and a `progress` callback.
    With `request.snapshots`, the same files also go to `<snapshots>/<UTC time of the
    run>/`, so that a scheduled run that overwrites `latest` keeps its history."""
    r = request
    inputs, bills, what_if, output = list(r.inputs), list(r.bills), r.what_if, r.output

    def step(text: str) -> None:
        if progress is not None:
            progress(text)

    if not inputs and what_if is None:
        raise InvalidInput("give --input PATH... or --what-if SPEC")
    # one zone for the bounds, from the CLI or spark-submit: without an offset, UTC
    since, until = (None if t is None else utc(t) for t in (r.since, r.until))
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
    targets = [output] + ([snapshot_of(r.snapshots, datetime.now(UTC))] if r.snapshots else [])
    remote = any("://" in t for t in targets)  # published through Hadoop's file systems
    if owned and class_archive is not None:
        # A dump the last report left would take a core from this report's JVM: stopped
        # (this run may then record a list and dump after itself, `classarchive.stop_dump`).
        classarchive.stop_dump(class_archive)
    java = classarchive.use_option(class_archive)
    # No archive yet: this run lists the classes it loads, and one is written from the list.
    classlist = None
    runtime: tuple[str, str] | None = None  # the JVM's java and class path, for the archive
    # One report at a time records a list and dumps (`classarchive.claim`); a report that
    # fails after its claim leaves it to go stale (an hour), and no archive meanwhile.
    first = owned and not remote and not java
    if first and class_archive is not None and classarchive.claim(class_archive):
        classlist = classarchive.classlist_for(class_archive)
    if classlist is not None:
        java = classarchive.record_option(classlist)
    spark = spark or spark_session(master, fast_start=fast_start, java_options=java)
    step("reading and aggregating")
    try:
        if what_if:
            df = generate(spark, what_if)
        else:
            df = read_scheduled(spark, inputs, r.input_format, since=since, until=until)

        def bill(known: Any) -> Any:
            resources = Resources(known, r.registry_table, r.schedule_group)
            return read_bill(spark, bills, resources, r.bill_format)

        agg = aggregate(
            df,
            r.pricing,
            cycle_seconds=r.cycle_seconds,
            batch_fill=r.batch_fill,
            since=since,
            until=until,
            bill=bill if bills else None,
            top=r.top,
            registry_table=r.registry_table,
        )
        try:
            # Every resource by name: with destinations folded, too many rows for the driver,
            # so Spark writes them; else the report writes them with its other files.
            if agg.folded:
                step("writing the FOCUS rows")
                with small_queries(spark):
                    for target in targets:
                        write_csv(spark, agg.focus, target, focus_rows.FILE, focus_rows.ORDER)
        finally:  # a caller's session outlives a failed write too
            _release(agg)
    except Exception as exc:  # Spark reports a missing path as AnalysisException
        if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in str(exc):
            raise InvalidInput(f"input not found: {', '.join([*inputs, *bills])}") from None
        raise
    if owned and not remote:
        # The archive must fit this JVM: ask it for its java and class path before it stops.
        if classlist is not None:
            runtime = classarchive.runtime_of(spark)
        step("stopping Spark")
        stop_spark(spark)  # its memory is freed before the report is drawn
    source = "what-if workload" if what_if else ", ".join(inputs)
    step("writing the report")
    report = summary.build(
        agg,
        r.pricing,
        batch_fill=r.batch_fill,
        cycle_seconds=r.cycle_seconds,
        source=source,
        free_tier=r.free_tier,
        registry_table=r.registry_table,
        running=r.running,
    )
    if remote:
        with tempfile.TemporaryDirectory() as tmp:
            write(report, Path(tmp))
            for target in targets:
                publish(spark, tmp, target)
        if owned:
            stop_spark(spark)
    else:
        for target in targets:
            write(report, Path(target))
        if class_archive is not None and classlist is not None and runtime is not None:
            # Once the report is written and its JVM gone (the dump's peak then stands alone).
            step("writing the class-data archive in the background, for a faster start next time")
            classarchive.dump_in_background(class_archive, classlist, *runtime)
    return report


def _release(agg: Any) -> None:
    """Frees the rows the report kept in Spark once its figures are out. A failure here (a
    py4j call) costs memory until the JVM collects them, never the report."""
    try:
        agg.release()
    except Exception as exc:
        log.warning("cost.release_failed", error=type(exc).__name__, detail=str(exc)[:200])


def snapshot_of(prefix: str, at: datetime) -> str:
    """Where one run's copy goes: `<prefix>/2026-11-25T070312Z` (sorts by time)."""
    return f"{prefix.rstrip('/')}/{at:%Y-%m-%dT%H%M%SZ}"


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point for `spark-submit .../sqsdelay/cost/run.py --input ... --output ...`."""
    import argparse

    parser = argparse.ArgumentParser(description="sqsdelay cost report (spark-submit entry)")
    parser.add_argument("--output", required=True)
    for o in REPORT_OPTIONS:  # as `sqsdelay cost-report` has them; several values each
        several: dict[str, Any] = {"nargs": "*", "action": "extend"} if o.many else {}
        parser.add_argument(
            o.option,
            dest=o.name,
            type=datetime.fromisoformat if o.kind is datetime else o.kind,
            default=o.default,
            help=o.help,
            choices=o.choices or None,
            **several,
        )
    parser.add_argument("--cycle-seconds", type=int, default=900)
    parser.add_argument("--registry-table", help="the registry's DynamoDB table, in the bill")
    parser.add_argument("--schedule-group", help="the Scheduler group, in the bill")
    parser.add_argument("--snapshots", help="also write a copy to <SNAPSHOTS>/<UTC time>/")
    args = vars(parser.parse_args(argv))
    if (top := args["top_destinations"]) is not None and top < 1:
        parser.error("--top-destinations must be at least 1")
    arguments = report_arguments(args)
    spark = spark_session()  # under spark-submit, its master and resources apply
    request = ReportRequest(
        **arguments,
        output=args["output"],
        cycle_seconds=args["cycle_seconds"],
        registry_table=args["registry_table"],
        schedule_group=args["schedule_group"],
        snapshots=args["snapshots"],
    )
    report = run_report(request, spark=spark)
    s = report.summary
    print(
        json.dumps(
            {
                "master": spark.sparkContext.master,
                "output": args["output"],
                "messages": s["messages"],
                "average_monthly_estimated_cost": s["average_monthly_estimated_cost"],
            }
        )
    )


if __name__ == "__main__":
    main()
