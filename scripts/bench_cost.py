#!/usr/bin/env python3
"""Cost report benchmark. Prints one JSON object with every figure and ratio.

- one-shot: `sqsdelay cost-report` on N Parquet rows in a fresh process (wall time, rows/s,
  peak memory of the process tree, JVM included), against DuckDB doing the same aggregation
  in a fresh process on the same file (`spark_over_duckdb`). As a user runs it by default:
  a run before it wrote the JVM class-data archive (SQSDELAY_SPARK_CLASS_ARCHIVE=auto), and
  that run and one with the archive off are reported next to it. Spark's start-up alone (a
  fresh process that starts and stops a session) is reported separately;
- warm: the aggregation on M Parquet rows in one Spark session after a warm-up run, against
  DuckDB's second run in one connection;
- json: `sqsdelay cost-report` on N lines of the JSON event log, as SQSDELAY_LOG_FILE writes
  them, in a fresh process, with its rate next to the Parquet rate.

One-shot figures are the median of --repeat runs (Parquet, DuckDB and JSON interleaved, so
that a busy moment on the machine does not fall on one of them only); the range is printed
next to it. Peak memory is the highest of all runs.

    .venv/bin/python scripts/bench_cost.py [--rows 10000000] [--warm-rows 50000000]
        [--json-rows 10000000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SPEC = {
    "months": 12,
    "start": "2026-01-01",
    "destinations": 200,
    "delay_seconds": {"kind": "lognormal", "mu": 9, "sigma": 2.5},
    "size_bytes": {"kind": "lognormal", "mu": 7.5, "sigma": 1.5},
    "seed": 11,
}


def generate(rows: int, path: Path, fmt: str) -> float:
    """N rows as Parquet (typed columns) or as JSON event-log lines."""
    from pyspark.sql import functions as F

    from sqsdelay.cost.job import generate as gen
    from sqsdelay.cost.job import spark_session
    from sqsdelay.cost.whatif import WhatIf

    started = time.perf_counter()
    spec = WhatIf.model_validate({**SPEC, "messages_per_day": -(-rows // 365)})
    spark = spark_session(driver_memory="2g")
    df = gen(spark, spec).limit(rows)
    if fmt == "parquet":  # typed columns, as a conversion of the event log would store them
        df.select(
            F.col("ts").alias("timestamp"), "destination", "delay_seconds", "size_bytes"
        ).write.mode("overwrite").parquet(str(path))
    else:  # the event log's fields, in its order, the time as the log writes it
        df = df.withColumn("timestamp", F.date_format("ts", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"))
        df.select(
            "destination",
            "delay_seconds",
            "size_bytes",
            F.lit("delay-queue").alias("route"),
            F.lit("delay.scheduled").alias("event"),
            F.lit("info").alias("level"),
            "timestamp",
        ).write.mode("overwrite").json(str(path))
    spark.stop()
    return round(time.perf_counter() - started, 1)


def _tree_rss_kib(root: int) -> int:
    """Resident memory of a process and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))
        except (OSError, StopIteration):
            continue
    return total


def timed_process(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Wall time and peak memory of a fresh process tree."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kib(proc.pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{args[:4]} failed:\n{err[-3000:]}")
    return {
        "wall_seconds": round(time.perf_counter() - started, 2),
        "peak_rss_mib": round(peak / 1024),
        "stdout": out,
    }


def spark_report(path: Path, out: Path, archive: str = "auto") -> dict[str, Any]:
    command = ["cost-report", "--input", str(path), "--output", str(out)]
    # The default (auto) keeps its archive in the cache directory; here, the work directory.
    env = {**os.environ, "SQSDELAY_SPARK_CLASS_ARCHIVE": archive}
    env["XDG_CACHE_HOME"] = str(out.parent / "cache")
    run = timed_process([sys.executable, "-m", "sqsdelay", *command], env)
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["input"]["scheduled"]
    return {
        "wall_seconds": run["wall_seconds"],
        "peak_rss_mib": run["peak_rss_mib"],
        "rows": rows,
        "rows_per_second": round(rows / run["wall_seconds"]),
        "batched_cost": next(m["cost"] for m in summary["models"] if m["model"] == "batched"),
    }


STARTUP = """
import time
t = time.perf_counter()
from sqsdelay.cost.job import spark_session
s = spark_session()
s.range(1).count()
print(round(time.perf_counter() - t, 2))
s.stop()
"""


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median run by wall time, with the range of wall times and the highest peak."""
    ordered = sorted(runs, key=lambda r: r["wall_seconds"])
    walls = [r["wall_seconds"] for r in ordered]
    peaks = [r["peak_rss_mib"] for r in ordered]
    wall = round(statistics.median(walls), 2)
    median = {
        **ordered[(len(ordered) - 1) // 2],
        "wall_seconds": wall,
        "wall_seconds_range": [walls[0], walls[-1]],
        "peak_rss_mib": max(peaks),
        "runs": len(runs),
    }
    if "rows" in median:
        median["rows_per_second"] = round(median["rows"] / wall)
    return median


def spark_startup() -> dict[str, Any]:
    run = timed_process([sys.executable, "-c", STARTUP])
    return {"session_ready_seconds": float(run["stdout"].strip()), **_drop(run)}


def _drop(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != "stdout"}


# The job's aggregation in DuckDB: the same keys (destination, UTC month, band, log2 bucket)
# and the same nine sums of per-message quantities, on the same file.
DUCKDB_SQL = """
SET TimeZone = 'UTC';
SET enable_progress_bar = false;
SELECT destination, strftime(CAST("timestamp" AS TIMESTAMPTZ), '%Y-%m') AS month,
  (n > 900)::INT + (n > 3600)::INT + (n > 86400)::INT + (n > 2592000)::INT AS band,
  floor(log2(greatest(n, 1)))::INT AS bucket,
  count(*) AS messages, sum(n) AS delay_seconds, sum(size) AS size_bytes,
  sum((n > 900)::INT) AS routed, sum(CASE WHEN n > 900 THEN n ELSE 0 END) AS routed_delay,
  sum(k) AS cycles, sum(c) AS chunks, sum(CASE WHEN n > 900 THEN c ELSE 0 END) AS routed_chunks,
  sum(k * c) AS cycle_chunks, sum(b) AS batch_chunks, sum(k * b) AS cycle_batch_chunks
FROM (
  SELECT *, greatest(ceil(n / 900) - 1, 0) AS k, greatest(ceil(size / 65536), 1) AS c,
    CASE WHEN n > 900 THEN greatest(ceil(size * 10 / 65536), 1) ELSE 0 END AS b
  FROM (SELECT "timestamp", destination, ceil(delay_seconds) AS n, size_bytes AS size
        FROM read_parquet('{path}/*.parquet')))
GROUP BY ALL
"""

DUCKDB_ONE_SHOT = """
import sys, time
t = time.perf_counter()
import duckdb
rows = duckdb.connect().execute(sys.argv[1]).fetchall()
print(round(time.perf_counter() - t, 3), len(rows))
"""


def duckdb_fresh(path: Path) -> dict[str, Any]:
    run = timed_process([sys.executable, "-c", DUCKDB_ONE_SHOT, DUCKDB_SQL.format(path=path)])
    inner, groups = run["stdout"].split()[-2:]
    return {**_drop(run), "query_seconds": float(inner), "groups": int(groups)}


def duckdb_warm(path: Path) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect()
    con.execute(DUCKDB_SQL.format(path=path)).fetchall()  # warm-up
    started = time.perf_counter()
    groups = len(con.execute(DUCKDB_SQL.format(path=path)).fetchall())
    return {"wall_seconds": round(time.perf_counter() - started, 2), "groups": groups}


def spark_warm(path: Path) -> dict[str, Any]:
    from sqsdelay.cost.job import aggregate, read_scheduled, spark_session
    from sqsdelay.cost.pricing import load_pricing

    spark = spark_session()
    pricing = load_pricing()
    aggregate(read_scheduled(spark, [str(path)]), pricing)  # warm-up
    started = time.perf_counter()
    agg = aggregate(read_scheduled(spark, [str(path)]), pricing)
    wall = time.perf_counter() - started
    rows = int(agg["messages"].sum())
    spark.stop()
    return {"wall_seconds": round(wall, 2), "rows": rows, "rows_per_second": round(rows / wall)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--warm-rows", type=int, default=50_000_000)
    parser.add_argument("--json-rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="one-shot runs; the median")
    parser.add_argument("--keep", type=Path, help="keep (and reuse) the generated data here")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"cores": os.cpu_count(), "master": "local[2]"}
    try:
        data = {}
        for name, rows, fmt in (
            ("parquet", args.rows, "parquet"),
            ("warm", args.warm_rows, "parquet"),
            ("json", args.json_rows, "json"),
        ):
            path = work / f"events-{rows}.{fmt}"
            data[name] = path
            if rows and not path.exists():
                results[f"generate_{name}_seconds"] = generate(rows, path, fmt)
        results["spark_startup"] = spark_startup()
        if args.rows:
            shutil.rmtree(work / "cache", ignore_errors=True)
            writing = spark_report(data["parquet"], work / "report-first")
            runs: dict[str, list[dict[str, Any]]] = {"spark": [], "duck": [], "json": []}
            for _ in range(args.repeat):
                runs["spark"].append(spark_report(data["parquet"], work / "report-parquet"))
                runs["duck"].append(duckdb_fresh(data["parquet"]))
                if args.json_rows:
                    runs["json"].append(spark_report(data["json"], work / "report-json"))
            spark, duck = median_of(runs["spark"]), median_of(runs["duck"])
            off = spark_report(data["parquet"], work / "report-off", "off")
            results["one_shot_parquet"] = {
                "rows": args.rows,
                "spark_cost_report": spark,
                "duckdb_same_aggregation": duck,
                "spark_over_duckdb": round(spark["wall_seconds"] / duck["wall_seconds"], 2),
                "first_run_writing_class_archive": writing,
                "class_archive_off": {
                    **off,
                    "spark_over_duckdb": round(off["wall_seconds"] / duck["wall_seconds"], 2),
                },
            }
        if args.warm_rows:
            spark = spark_warm(data["warm"])
            duck = duckdb_warm(data["warm"])
            results["warm_parquet"] = {
                "rows": args.warm_rows,
                "spark_aggregation": spark,
                "duckdb_same_aggregation": duck,
                "spark_over_duckdb": round(spark["wall_seconds"] / duck["wall_seconds"], 2),
            }
        if args.json_rows:
            if args.rows:
                spark = median_of(runs["json"])
            else:
                spark = spark_report(data["json"], work / "report-json")
            results["one_shot_json"] = {"rows": args.json_rows, "spark_cost_report": spark}
            if args.rows:
                parquet_rate = results["one_shot_parquet"]["spark_cost_report"]["rows_per_second"]
                results["one_shot_json"]["json_over_parquet_rate"] = round(
                    spark["rows_per_second"] / parquet_rate, 2
                )
        peaks = [
            run["peak_rss_mib"]
            for key, value in results.items()
            if key.startswith("one_shot")
            for run in (value["spark_cost_report"], *value.values())
            if isinstance(run, dict) and "peak_rss_mib" in run
        ]
        results["peak_rss_mib"] = max(peaks, default=0)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
