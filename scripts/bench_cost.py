#!/usr/bin/env python3
"""Cost report benchmark: generate N delay.scheduled events as Parquet (200 destinations,
12 months), time `sqsdelay cost-report` on them in a fresh process (wall time, rows/s, peak
memory of the process tree, JVM included), and the same aggregation in DuckDB on the same
file. Prints one JSON object.

    .venv/bin/python scripts/bench_cost.py [--rows 1000000 10000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def generate(rows: int, path: Path) -> None:
    from pyspark.sql import functions as F

    from sqsdelay.cost_job import generate as gen
    from sqsdelay.cost_job import spark_session
    from sqsdelay.whatif import WhatIf

    spec = WhatIf.model_validate(
        {
            "messages_per_day": -(-rows // 365),
            "months": 12,
            "start": "2026-01-01",
            "destinations": 200,
            "delay_seconds": {"kind": "lognormal", "mu": 9, "sigma": 2.5},
            "size_bytes": {"kind": "lognormal", "mu": 7.5, "sigma": 1.5},
            "seed": 11,
        }
    )
    spark = spark_session(driver_memory="2g")
    df = (
        gen(spark, spec)
        .limit(rows)
        .select(
            F.date_format("ts", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("timestamp"),
            "destination",
            "delay_seconds",
            "size_bytes",
        )
    )
    df.write.mode("overwrite").parquet(str(path))
    spark.stop()


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


def timed_report(parquet: Path, out: Path) -> dict[str, Any]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sqsdelay",
            "cost-report",
            "--input",
            str(parquet),
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kib(proc.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    done.set()
    sampler.join()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"cost-report failed:\n{err[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {
        "wall_seconds": round(wall, 1),
        "peak_rss_mib": round(peak / 1024),
        "rows_per_second": round(summary["messages"] / wall),
        "messages": summary["messages"],
        "batched_cost": next(m["cost"] for m in summary["models"] if m["model"] == "batched"),
    }


DUCKDB_SQL = """
WITH rows AS (
  SELECT destination, strftime(CAST(timestamp AS TIMESTAMP), '%Y-%m') AS month,
         delay_seconds AS n, greatest(ceil(size_bytes / 65536), 1) AS chunks,
         CASE WHEN delay_seconds > 900
              THEN greatest(ceil(delay_seconds / 900) - 1, 1) ELSE 0 END AS k
  FROM read_parquet('{path}/*.parquet'))
SELECT destination, month,
  CASE WHEN n <= 900 THEN 1 WHEN n <= 3600 THEN 2 WHEN n <= 86400 THEN 3
       WHEN n <= 2592000 THEN 4 ELSE 5 END AS band,
  count(*) AS messages, sum(n) AS delay_seconds,
  sum(CASE WHEN n > 900 THEN 2 * n / 900 ELSE 0 END) AS reference_ops,
  sum(CASE WHEN n > 900 THEN chunks + k * (chunks + 1) + (k - 1) * chunks ELSE 0 END) AS exact_fifo,
  sum(chunks) AS exact_standard
FROM rows GROUP BY ALL
"""


def timed_duckdb(parquet: Path) -> dict[str, Any]:
    import duckdb

    started = time.perf_counter()
    con = duckdb.connect()
    result = con.execute(DUCKDB_SQL.format(path=parquet)).fetchall()
    wall = time.perf_counter() - started
    return {"wall_seconds": round(wall, 2), "groups": len(result)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--keep", type=Path, help="keep the generated data here")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-cost-"))
    results: dict[str, Any] = {"cores": os.cpu_count(), "mode": "local[2], fresh process"}
    try:
        for rows in args.rows:
            parquet = work / f"events-{rows}.parquet"
            started = time.perf_counter()
            if not parquet.exists():
                generate(rows, parquet)
            gen_s = round(time.perf_counter() - started, 1)
            spark = timed_report(parquet, work / f"report-{rows}")
            results[str(rows)] = {
                "generate_seconds": gen_s,
                "spark_cost_report": spark,
                "duckdb_same_aggregation": timed_duckdb(parquet),
            }
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
