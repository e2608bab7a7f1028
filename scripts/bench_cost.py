#!/usr/bin/env python3
"""Cost report benchmark. Prints one JSON object with every figure and ratio.

- one-shot: `sqsdelay cost-report` on N Parquet rows in a fresh process (wall time, rows/s,
  peak memory of the process tree, JVM included), against DuckDB doing the same aggregation
  (each message's hops spread over its usage months, as the report does) in a fresh process
  on the same file (`spark_over_duckdb`). As a user runs it by default:
  a run before it wrote the JVM class-data archive (SQSDELAY_SPARK_CLASS_ARCHIVE=auto), and
  that run and one with the archive off are reported next to it. Spark's start-up alone (a
  fresh process that starts and stops a session) is reported separately;
- warm: the aggregation on M Parquet rows in one Spark session after a warm-up run, against
  DuckDB's second run of the same aggregation in one connection;
- json: `sqsdelay cost-report` on N lines of the JSON event log, as SQSDELAY_LOG_FILE writes
  them, in a fresh process, with its rate next to the Parquet rate;
- after-first (`--after-first`, alone): a 7-line report run right after a first one, each
  in a fresh process with a fresh archive cache, as finance re-running with another option
  does: the first run leaves its class-data dump running (issue 63, 1), the second starts
  beside it. `--repeat` pairs, each pair once the dumps before it are done;
- bill: `sqsdelay cost-report --bill` on the N Parquet rows and a CUR 2.0 export of B lines
  (the destinations' delay and destination queues, other queues, other tables), one shot,
  against DuckDB spreading the same messages over their usage months and summing the same
  bill lines in a fresh process (`spark_over_duckdb`; issue bar: at most 3, peak 1.2 GiB).

DuckDB runs two formulations of the same work (tests/support/duckdb_cost.py): the fastest
we found (`duckdb_same_aggregation`, `spark_over_duckdb`), and the lateral unnest this
benchmark used until issue 46 (`duckdb_lateral_unnest`, `spark_over_duckdb_lateral_unnest`;
`--references duckdb` leaves it out).

One-shot figures are the median of --repeat runs (Parquet, DuckDB and JSON interleaved, so
that a busy moment on the machine does not fall on one of them only); the range is printed
next to it. Peak memory is the highest of all runs.

    .venv/bin/python scripts/bench_cost.py [--rows 10000000] [--warm-rows 50000000]
        [--json-rows 10000000] [--bill-rows 1000000] [--repeat 3] [--keep DIR]
        [--references duckdb,duckdb_lateral_unnest]
    .venv/bin/python scripts/bench_cost.py --after-first [--repeat 3]
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

# The DuckDB references are shared with the parity tests (tests/support/duckdb_cost.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support import duckdb_cost

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

    from sqsdelay.cost.session import spark_session
    from sqsdelay.cost.whatif import WhatIf
    from sqsdelay.cost.workload import generate as gen

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


def spark_report(
    path: Path, out: Path, archive: str = "auto", bill: Path | None = None
) -> dict[str, Any]:
    command = ["cost-report", "--input", str(path), "--output", str(out)]
    command += ["--bill", str(bill)] if bill else []
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


def archive_written(cache: Path, deadline_s: float = 600) -> float | None:
    """Seconds until no class-data dump holds its claim under `cache` (the claim is given up
    when the dump ends, `classarchive.release`) and its archive is there: None if there was
    no dump to wait for."""
    started = time.perf_counter()
    folder = cache / "sqsdelay"  # where `classarchive.class_archive_file` puts it

    def claimed() -> bool:
        return any(folder.glob("*.jsa.lock"))  # `classarchive.claim`'s file

    if not claimed():
        return None
    while claimed():
        if time.perf_counter() - started > deadline_s:
            raise SystemExit(f"the class-data archive's dump still runs after {deadline_s} s")
        time.sleep(0.5)
    # A failed dump gives its claim up too: the timed runs would then dump again beside
    # each other, the case this wait is for.
    if not any(folder.glob("*.jsa")):
        raise SystemExit("the class-data archive's dump ended without an archive")
    return round(time.perf_counter() - started, 1)


STARTUP = """
import time
t = time.perf_counter()
from sqsdelay.cost.session import spark_session
s = spark_session()
s.range(1).count()
print(round(time.perf_counter() - t, 2))
s.stop()
"""


SEVEN_LINES = [
    {"event": "delay.scheduled", "destination": "orders", "size_bytes": 900,
     "timestamp": f"2026-03-0{d}T10:00:00Z", "delay_seconds": 3600 * d}
    for d in range(1, 8)
]  # fmt: skip


def after_first(work: Path, repeat: int) -> dict[str, Any]:
    """`repeat` pairs of 7-line reports: a first run with no archive, then at once a second
    one, beside the class-data dump the first left (`dump_running_at_second`)."""
    log = work / "seven-lines.jsonl"
    log.write_text("\n".join(json.dumps(line) for line in SEVEN_LINES))
    pairs = []
    for _ in range(repeat):
        shutil.rmtree(work / "cache", ignore_errors=True)
        first = spark_report(log, work / "report-first")
        claim = list((work / "cache" / "sqsdelay").glob("*.jsa.lock"))
        second = spark_report(log, work / "report-second")
        pairs.append(
            {
                "first_seconds": first["wall_seconds"],
                "second_seconds": second["wall_seconds"],
                "second_over_first": round(second["wall_seconds"] / first["wall_seconds"], 2),
                "dump_running_at_second": bool(claim),
                "peak_rss_mib": max(first["peak_rss_mib"], second["peak_rss_mib"]),
                # the next pair starts once no dump runs (whichever report left it)
                "archive_written_seconds_later": archive_written(work / "cache"),
            }
        )
    ratios = sorted(p["second_over_first"] for p in pairs)
    return {"pairs": pairs, "second_over_first_median": ratios[(len(ratios) - 1) // 2]}


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


# The DuckDB references (tests/support/duckdb_cost.py, which the parity tests hold to the
# report's numbers): "duckdb", the fastest formulation of the report's aggregation we found,
# which every ratio is against; "duckdb_lateral_unnest", the same work as this benchmark
# wrote it until issue 46 (ten times slower), reported beside it.
REFERENCES = list(duckdb_cost.AGGREGATIONS)

DUCKDB_ONE_SHOT = """
import sys, time
t = time.perf_counter()
import duckdb
rows = duckdb.connect().execute(sys.argv[1]).fetchall()
print(round(time.perf_counter() - t, 3), len(rows))
"""


def generate_bill(rows: int, events: Path, path: Path) -> float:
    """A CUR 2.0 export of `rows` lines over the events' year: half the destinations' delay
    queues, a fifth their destination queues, the rest other queues and DynamoDB tables."""
    import duckdb
    import numpy as np
    import pandas as pd

    started = time.perf_counter()
    query = "SELECT DISTINCT destination FROM read_parquet(?)"
    names = [r[0] for r in duckdb.execute(query, [f"{events}/*.parquet"]).fetchall()]
    rng = np.random.default_rng(7)
    pick = rng.choice(len(names), rows)
    kind = rng.choice(4, rows, p=[0.5, 0.2, 0.2, 0.1])
    queue = np.array(names, dtype=object)[pick]
    arn = "arn:aws:sqs:us-east-1:123456789012:"
    resource = np.where(
        kind == 0,
        arn + queue + "-delay.fifo",
        np.where(kind == 1, arn + queue, np.where(kind == 2, arn + "other-" + queue, "")),
    )
    table = "arn:aws:dynamodb:us-east-1:123456789012:table/other-" + queue
    resource = np.where(kind == 3, table, resource)
    start = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(
        rng.integers(0, 365 * 24, rows), unit="h"
    )
    cost = rng.random(rows)
    pd.DataFrame(
        {
            "line_item_product_code": np.where(kind == 3, "AmazonDynamoDB", "AWSQueueService"),
            "line_item_resource_id": resource,
            "line_item_usage_type": np.where(kind == 0, "Requests-FIFO-Tier1", "Requests-Tier1"),
            "line_item_usage_start_date": start,
            "line_item_line_item_type": "Usage",
            "line_item_usage_amount": rng.integers(1, 1_000_000, rows).astype(float),
            "line_item_unblended_cost": cost,
            "line_item_net_unblended_cost": cost * 0.9,
            "line_item_currency_code": "USD",
            "pricing_public_on_demand_cost": cost,
        }
    ).to_parquet(path, coerce_timestamps="us")
    return round(time.perf_counter() - started, 1)


def duckdb_fresh(path: Path, name: str) -> dict[str, Any]:
    sql = duckdb_cost.aggregation_sql(name, str(path))
    run = timed_process([sys.executable, "-c", DUCKDB_ONE_SHOT, sql])
    inner, groups = run["stdout"].split()[-2:]
    return {**_drop(run), "query_seconds": float(inner), "groups": int(groups)}


def duckdb_bill_fresh(events: Path, bill: Path, name: str) -> dict[str, Any]:
    sql = duckdb_cost.bill_sql(name, str(events), str(bill))
    run = timed_process([sys.executable, "-c", DUCKDB_ONE_SHOT, sql])
    inner, _ = run["stdout"].split()[-2:]
    return {**_drop(run), "query_seconds": float(inner)}


def duckdb_warm(path: Path, name: str) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect()
    sql = duckdb_cost.aggregation_sql(name, str(path))
    con.execute(sql).fetchall()  # warm-up
    started = time.perf_counter()
    groups = len(con.execute(sql).fetchall())
    return {"wall_seconds": round(time.perf_counter() - started, 2), "groups": groups}


def spark_warm(path: Path) -> dict[str, Any]:
    from sqsdelay.cost.inputs import read_scheduled
    from sqsdelay.cost.job import aggregate
    from sqsdelay.cost.pricing import load_pricing
    from sqsdelay.cost.session import spark_session

    spark = spark_session()
    pricing = load_pricing()
    aggregate(read_scheduled(spark, [str(path)]), pricing)  # warm-up
    started = time.perf_counter()
    agg = aggregate(read_scheduled(spark, [str(path)]), pricing)
    wall = time.perf_counter() - started
    rows = int(agg.shape["messages"].sum())
    spark.stop()
    return {"wall_seconds": round(wall, 2), "rows": rows, "rows_per_second": round(rows / wall)}


def ratios(spark: dict[str, Any], ducks: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Spark's wall time over each reference's: `spark_over_duckdb` against the first (the
    fast one), `spark_over_<name>` against the others."""
    first = next(iter(ducks))
    return {
        ("spark_over_duckdb" if name == first else f"spark_over_{name}"): round(
            spark["wall_seconds"] / duck["wall_seconds"], 2
        )
        for name, duck in ducks.items()
    }


def against(spark: dict[str, Any], ducks: dict[str, dict[str, Any]], label: str) -> dict[str, Any]:
    """The references' runs (the first under `label`, the others under their names) and
    Spark's ratios to them."""
    first = next(iter(ducks))
    runs = {(label if name == first else name): duck for name, duck in ducks.items()}
    return {**runs, **ratios(spark, ducks)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--warm-rows", type=int, default=50_000_000)
    parser.add_argument("--json-rows", type=int, default=10_000_000)
    parser.add_argument("--bill-rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="one-shot runs; the median")
    parser.add_argument("--keep", type=Path, help="keep (and reuse) the generated data here")
    parser.add_argument(
        "--class-archive",
        choices=["auto", "off"],
        default="auto",
        help="SQSDELAY_SPARK_CLASS_ARCHIVE of the runs that measure the default (off: no dump)",
    )
    parser.add_argument(
        "--references",
        default=",".join(REFERENCES),
        help="DuckDB references to run, comma-separated; the first is the one ratios are against",
    )
    parser.add_argument(
        "--after-first",
        action="store_true",
        help="only: a 7-line report right after a first one (issue 63, 1), --repeat pairs",
    )
    args = parser.parse_args()
    refs = args.references.split(",")
    if not refs or not set(refs) <= set(REFERENCES):
        parser.error(f"--references: some of {', '.join(REFERENCES)}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"cores": os.cpu_count(), "master": "local[2]"}
    if args.after_first:
        try:
            results["after_first"] = after_first(work, args.repeat)
        finally:
            if args.keep is None:
                shutil.rmtree(work, ignore_errors=True)
        print(json.dumps(results, indent=2))
        return
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
            writing = spark_report(data["parquet"], work / "report-first", args.class_archive)
            # The timed runs are the later runs of a user who has the archive: the detached
            # dump the first run left must be done (else the first timed run ran beside it,
            # without the archive, 30-35 s where the others took 18-20).
            writing["archive_written_seconds_later"] = archive_written(work / "cache")
            runs: dict[str, list[dict[str, Any]]] = {"spark": [], "json": []}
            runs.update({name: [] for name in refs})
            for _ in range(args.repeat):
                runs["spark"].append(
                    spark_report(data["parquet"], work / "report-parquet", args.class_archive)
                )
                for name in refs:
                    runs[name].append(duckdb_fresh(data["parquet"], name))
                if args.json_rows:
                    runs["json"].append(
                        spark_report(data["json"], work / "report-json", args.class_archive)
                    )
            spark = median_of(runs["spark"])
            ducks = {name: median_of(runs[name]) for name in refs}
            off = spark_report(data["parquet"], work / "report-off", "off")
            results["one_shot_parquet"] = {
                "rows": args.rows,
                "spark_cost_report": spark,
                **against(spark, ducks, "duckdb_same_aggregation"),
                "first_run_writing_class_archive": writing,
                "class_archive_off": {**off, **ratios(off, ducks)},
            }
        if args.rows and args.bill_rows:
            bill = work / f"bill-{args.bill_rows}.parquet"
            if not bill.exists():
                results["generate_bill_seconds"] = generate_bill(
                    args.bill_rows, data["parquet"], bill
                )
            with_bill: dict[str, list[dict[str, Any]]] = {"spark": []}
            with_bill.update({name: [] for name in refs})
            for _ in range(args.repeat):
                out = work / "report-bill"
                with_bill["spark"].append(
                    spark_report(data["parquet"], out, args.class_archive, bill)
                )
                for name in refs:
                    with_bill[name].append(duckdb_bill_fresh(data["parquet"], bill, name))
            spark = median_of(with_bill["spark"])
            ducks = {name: median_of(with_bill[name]) for name in refs}
            results["one_shot_with_bill"] = {
                "rows": args.rows,
                "bill_rows": args.bill_rows,
                "spark_cost_report": spark,
                **against(spark, ducks, "duckdb_same_join_and_sums"),
            }
        if args.warm_rows:
            spark = spark_warm(data["warm"])
            ducks = {name: duckdb_warm(data["warm"], name) for name in refs}
            results["warm_parquet"] = {
                "rows": args.warm_rows,
                "spark_aggregation": spark,
                **against(spark, ducks, "duckdb_same_aggregation"),
            }
        if args.json_rows:
            if args.rows:
                spark = median_of(runs["json"])
            else:
                spark = spark_report(data["json"], work / "report-json", args.class_archive)
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
