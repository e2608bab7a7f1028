#!/usr/bin/env python3
"""Where a one-shot cost report's time goes. Prints one JSON object.

Runs `run_report`'s steps one by one in this process, as `sqsdelay cost-report` runs them,
timing each: Python's imports, the Spark session's start, the reading (planned), the
aggregation (its Spark jobs and py4j round trips counted), stopping Spark, the summary
and roll-ups on the driver (`summary.build`), and each output (the CSVs, summary.json, the
charts, the HTML page around them, the spreadsheet, the FOCUS rows). Wall and CPU seconds
of this process and of the JVM (its own threads, from /proc).

    .venv/bin/python scripts/profile_cost.py --input DIR_OR_FILE    # an event log or Parquet
    .venv/bin/python scripts/profile_cost.py --rows 10000000 --keep /tmp/rows10m

`--rows N` generates N Parquet rows with bench_cost.py's workload (200 destinations, a year)
into --keep (reused when it is there).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
STARTED = time.perf_counter()


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tree_cpu(pid: int) -> float:
    """CPU seconds of a live process (the JVM), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Phases:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.jvm: int | None = None

    def jvm_cpu(self) -> float:
        try:
            return tree_cpu(self.jvm) if self.jvm else 0.0
        except OSError:
            return 0.0

    def run(self, name: str, work: Callable[[], Any]) -> Any:
        wall, cpu, jvm = time.perf_counter(), time.process_time(), self.jvm_cpu()
        out = work()
        self.rows.append(
            {
                "phase": name,
                "wall_s": round(time.perf_counter() - wall, 2),
                "python_cpu_s": round(time.process_time() - cpu, 2),
                "jvm_cpu_s": round(max(self.jvm_cpu() - jvm, 0.0), 2),
            }
        )
        return out


def count_round_trips() -> list[int]:
    """py4j commands sent (each a round trip to the JVM), by patching its connection: all of
    them, and those that are not the release of a Java object Python's garbage collector
    dropped (when they come depends on the collector, not on the code that runs)."""
    import py4j.clientserver as clientserver
    from py4j import protocol

    release = protocol.MEMORY_COMMAND_NAME + protocol.MEMORY_DEL_SUBCOMMAND_NAME
    sent = [0, 0]
    send = clientserver.ClientServerConnection.send_command

    def counted(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        sent[0] += 1
        sent[1] += not command.startswith(release)
        return send(self, command, *args, **kwargs)

    clientserver.ClientServerConnection.send_command = counted  # type: ignore[method-assign]
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path)
    parser.add_argument("--rows", type=int)
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--fast-start", action="store_true", help="the suite's JVM options")
    args = parser.parse_args()
    if (args.input is None) == (args.rows is None):
        parser.error("give --input PATH or --rows N")
    source = args.input
    if source is None:
        from scripts.bench_cost import generate

        source = args.keep or Path(tempfile.mkdtemp()) / "rows.parquet"
        if not source.exists():
            generate(args.rows, source, "parquet")
    phases = Phases()

    def imports() -> None:
        import pyspark.sql  # noqa: F401

        import sqsdelay.cost.run  # noqa: F401

    phases.run("imports", imports)
    from pyspark import SparkContext

    from sqsdelay.cost import summary
    from sqsdelay.cost.inputs import read_scheduled
    from sqsdelay.cost.job import aggregate
    from sqsdelay.cost.pricing import load_pricing
    from sqsdelay.cost.render import files
    from sqsdelay.cost.render.charts import charts
    from sqsdelay.cost.render.html import render_html
    from sqsdelay.cost.session import spark_session, stop_spark

    pricing = load_pricing()
    spark = phases.run("session start", lambda: spark_session(fast_start=args.fast_start))
    proc = getattr(SparkContext._gateway, "proc", None)
    phases.jvm = proc.pid if proc is not None else None
    phases.rows[-1]["jvm_cpu_s"] = round(phases.jvm_cpu(), 2)
    tracker = spark.sparkContext.statusTracker()
    sent = count_round_trips()
    df = phases.run("reading (planned)", lambda: read_scheduled(spark, [str(source)], "auto"))
    spark.sparkContext.setJobGroup("aggregate", "aggregate")
    gc.collect()  # the reading's Java objects released now, not counted in the aggregate's
    read_trips, read_calls = sent
    agg = phases.run("aggregation (Spark jobs)", lambda: aggregate(df, pricing))
    trips, calls = sent[0] - read_trips, sent[1] - read_calls
    jobs = []
    for job in sorted(tracker.getJobIdsForGroup("aggregate")):
        info = tracker.getJobInfo(job)
        stages = [tracker.getStageInfo(s) for s in (info.stageIds if info else [])]
        jobs.append(" / ".join(s.name for s in stages if s is not None))
    agg.release()
    phases.run("stopping Spark", lambda: stop_spark(spark))
    report = phases.run(
        "summary and roll-ups",
        lambda: summary.build(agg, pricing, batch_fill=10, cycle_seconds=900, source=""),
    )
    out = Path(tempfile.mkdtemp())

    def tables() -> None:
        for name, table in report.tables.items():
            files.rounded(table).to_csv(out / f"{name}.csv")

    phases.run("CSV tables", tables)
    phases.run(
        "summary.json",
        lambda: (out / "summary.json").write_text(json.dumps(report.summary, default=str)),
    )
    phases.run("charts", lambda: charts(report))
    phases.run("HTML page (charts again inside)", lambda: render_html(report))
    phases.run("spreadsheet", lambda: files.write_xlsx(report, out / "report.xlsx"))
    if report.focus is not None:
        phases.run("FOCUS rows", lambda: report.focus.to_csv(out / "focus.csv", index=False))
    total = round(time.perf_counter() - STARTED, 2)
    outside = sum(
        p["wall_s"]
        for p in phases.rows
        if p["phase"] not in ("session start", "aggregation (Spark jobs)", "imports")
    )
    print(
        json.dumps(
            {
                "input": str(source),
                "phases": phases.rows,
                "total_wall_s": total,
                "outside_session_and_aggregation_s": round(outside, 2),
                "aggregate_spark_jobs": len(jobs),
                "aggregate_spark_job_stages": jobs,
                "aggregate_py4j_round_trips": trips,
                "aggregate_py4j_round_trips_without_releases": calls,
                "reading_py4j_round_trips": read_trips,
                "peak_rss_python_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
