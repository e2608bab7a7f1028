#!/usr/bin/env python3
"""Profile the `sqsdelay worker` process with cProfile on a fauxqs backlog (8 queues x 400
messages, 1 s cycle, 25 s), and print where its time goes as JSON (issue 20, item 4).

    cd scripts && ../.venv/bin/python profile_worker.py [--seconds 25] [--per-queue 400]

The worker runs under profiled.py: functions are timed by the process's CPU clock, not the
wall clock, which on a busy machine charges every function with the time it waited for a
core (issue 63, 4). `--stats FILE` reads a profile made elsewhere instead, e.g. the burst's:

    BENCH_PROFILE=/tmp/burst.prof ../.venv/bin/python bench_worker.py --only burst
    ../.venv/bin/python profile_worker.py --stats /tmp/burst.prof --top 25

A part of PARTS that the profile does not find is an error: the code moved, update PARTS.
"""

from __future__ import annotations

import argparse
import json
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_worker as bw
from benchkit import EmulatorProcess, env_for, wait_started

# (label, file suffix, function): the cumulative time of each, as a share of the process's.
# (botocore's parameter validation is off in the worker's clients: not a part any more.)
PARTS = [
    ("botocore: serialize", "botocore/serialize.py", "serialize_to_request"),
    ("botocore: parse responses", "botocore/parsers.py", "parse"),
    ("botocore: build the user agent", "botocore/useragent.py", "to_string"),
    ("sqsdelay: the step (all of it)", "core/step.py", "handle"),
    ("sqsdelay: per-message log events", "sqsdelay/logs.py", "info"),
    ("sqsdelay: decisions", "core/record_decisions.py", "decide_batch"),
    ("sqsdelay: the lag sampler and liveness touch", "aws/worker.py", "_measure_lag"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=25)
    parser.add_argument("--per-queue", type=int, default=400)
    parser.add_argument("--top", type=int, default=15, help="functions by own time to list")
    parser.add_argument("--stats", type=Path, help="summarise this profile instead of running")
    args = parser.parse_args()
    out = args.stats or profile(args.seconds, args.per_queue)
    print(json.dumps(summary(out, args.top), indent=2))


def profile(seconds: float, per_queue: int) -> Path:
    """The worker on a fauxqs backlog, under cProfile on its CPU clock; its stats file."""
    out = Path(tempfile.mkdtemp()) / "worker.prof"
    emu = EmulatorProcess("fauxqs")
    try:
        names = [f"q{i}" for i in range(8)]
        urls = bw.install(emu.url, "prof-", names, cycle=1)
        bw.preload(emu.url, [urls[f"{n}-delay.fifo"] for n in names], per_queue)
        env = env_for(
            emu.url, "prof-", max_native_delay_seconds=1, wait_time_seconds=1, concurrency=4
        )
        profiled = str(Path(__file__).with_name("profiled.py"))
        command = [sys.executable, profiled, str(out), "-m", "sqsdelay", "worker"]
        with tempfile.NamedTemporaryFile("w") as log:
            proc = subprocess.Popen(
                [*command, *names], env=env, stdout=subprocess.DEVNULL, stderr=log
            )
            wait_started(proc, Path(log.name))  # --seconds count from the worker's start
            time.sleep(seconds)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    finally:
        emu.stop()
    return out


def summary(out: Path, n: int) -> dict[str, Any]:
    """The PARTS' cumulative shares of the profile, and its `n` functions by own time."""
    stats = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.values())
    shares, missing = {}, []
    for label, suffix, function in PARTS:
        cum = max(
            (v[3] for k, v in stats.items() if k[0].endswith(suffix) and k[2] == function),
            default=0.0,
        )
        if not cum:
            missing.append(f"{function} in {suffix}")
        shares[label] = {"seconds": round(cum, 2), "percent": round(100 * cum / total, 1)}
    if missing:
        raise SystemExit(f"not in the profile: {', '.join(missing)}; update PARTS")
    return {
        "profiled_seconds": round(total, 2),
        "cumulative": shares,
        "top_own_time": top(stats, n),
    }


# Waiting, not working: the event loop's and the threads' idle time.
IDLE = ("poll", "select", "sleep", "acquire", "wait", "_run_once")


def top(stats: dict[tuple[str, int, str], tuple[Any, ...]], n: int) -> list[dict[str, Any]]:
    """The functions with the most time of their own (tottime), waits left out."""
    rows = [(k, v) for k, v in stats.items() if not any(w in k[2] for w in IDLE)]
    rows.sort(key=lambda kv: kv[1][2], reverse=True)
    return [
        {
            "function": f"{Path(k[0]).parent.name}/{Path(k[0]).name}:{k[1]}:{k[2]}",
            "own_seconds": round(v[2], 3),
            "cumulative_seconds": round(v[3], 3),
            "calls": v[1],
        }
        for k, v in rows[:n]
    ]


if __name__ == "__main__":
    main()
