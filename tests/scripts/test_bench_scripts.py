"""The benchmarks, each with tiny parameters (seconds, not minutes): their figures mean
nothing here, only that every phase still runs and prints its JSON. Both emulators: the
embedded moto server and fauxqs (`make test` installs it as `make bench-deps` does), each
in its own process by benchkit.py, which every benchmark imports. One of them holds a figure
to a bar: a burst whose receives come back short against the same burst with full ones."""

from __future__ import annotations

import importlib
import json
import pstats
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.scripts.smoke import SCRIPTS, run_script

pytestmark = pytest.mark.slow


def test_bench_sender() -> None:
    out = run_script("bench_sender.py", "--messages", "10", "--emulator", "both")
    assert set(out) == {"moto", "fauxqs"}
    assert all(run["messages"] == 10 and run["delay-queue_speedup"] > 0 for run in out.values())


def test_bench_dramatiq() -> None:
    out = run_script("bench_dramatiq.py", "--messages", "5", "--imports", "1")
    assert out["messages"] == 5 and out["import_s"] and out["enqueue_ms_median"]


def test_bench_taskiq() -> None:
    out = run_script(
        "bench_taskiq.py", "--messages", "5", "--large-messages", "2", "--imports", "1"
    )
    assert out["messages"] == 5 and all(t > 0 for t in out["import_s"].values())
    assert set(out["kiq_ms_median"]) == {
        "taskiq_aio_sqs_within",
        "sqsdelay_within",
        "sqsdelay_beyond",
        "sqsdelay_beyond_registry",
    }
    large = out["large"]["kiq_ms_median"]  # 1.1 MB bodies, through S3 on both routes
    assert set(large) == {"taskiq_aio_sqs_within_large", "sqsdelay_beyond_large"}


def test_profile_worker() -> None:
    out = run_script("profile_worker.py", "--seconds", "6", "--per-queue", "20", "--top", "5")
    assert out["profiled_seconds"] > 0
    assert len(out["top_own_time"]) == 5 and all(t["calls"] > 0 for t in out["top_own_time"])


def test_profiled_times_a_module_by_its_cpu_and_writes_its_stats(tmp_path: Path) -> None:
    """What BENCH_PROFILE runs the benchmarks' worker under (benchkit.start_worker)."""
    out = tmp_path / "help.prof"
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "profiled.py"), str(out), "-m", "sqsdelay", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    stats = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    assert any(k[0].endswith("sqsdelay/cli/app.py") for k in stats)


def test_bench_worker() -> None:
    out = run_script(
        "bench_worker.py",
        *("--queues", "2", "--per-queue", "10", "--seconds", "2", "--lateness-messages", "5"),
        *("--parking-messages", "3", "--parking-wait-time-seconds", "1"),
        # the preload must fit in half a burst cycle, on moto too, beside the whole suite
        *("--burst-messages", "60", "--burst-cycle", "8", "--burst-lead", "30"),
        *("--emulator", "both"),
    )
    assert set(out) == {"moto", "fauxqs"}


def test_bench_fleet() -> None:
    out = run_script(
        "bench_fleet.py",
        *("--destinations", "4", "--active", "2", "--messages", "6", "--cycle", "2"),
        *("--before-seconds", "2", "--fifo-messages", "6", "--fifo-cycle", "2"),
        *("--wait-time-seconds", "1", "--discovery-interval", "2"),
    )
    assert out["destinations"] == 4 and out["fleet"]["messages"] == 6
    assert set(out["fifo"]) == {"clean", "faults", "standard_faults"}


def test_soak() -> None:
    out = run_script(
        "soak.py",
        *("--minutes", "0.25", "--rate", "2", "--cycle", "2", "--longest-cycles", "3"),
        *("--kill-every", "10"),
        *("--clock-step", "5", "--warm-up", "2", "--drain-seconds", "10"),
    )
    # a kill every 10 s leaves some batches out of sight for the visibility timeout (60 s),
    # longer than this drain: only that it runs, kills and steps the clock is checked here
    assert out["kills"] >= 1 and out["clock_steps_seen"] == 1 and out["early"] == 0


def test_bench_cost_times_later_runs_once_the_first_run_s_dump_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-shot's timed runs wait for the class-data dump the first run left (its claim,
    `classarchive.claim`), not run beside it without the archive."""
    monkeypatch.syspath_prepend(str(SCRIPTS))
    bench_cost = importlib.import_module("bench_cost")
    assert bench_cost.archive_written(tmp_path) is None  # nothing to wait for
    archive = tmp_path / "sqsdelay" / "spark-0123.jsa"
    lock = archive.with_name(f"{archive.name}.lock")
    lock.parent.mkdir()
    lock.touch()
    failed = threading.Timer(0.5, lock.unlink)  # a dump that failed gives its claim up too
    failed.start()
    with pytest.raises(SystemExit, match="without an archive"):
        bench_cost.archive_written(tmp_path, deadline_s=60)
    lock.touch()

    def dumped() -> None:
        archive.touch()
        lock.unlink()

    done = threading.Timer(1.0, dumped)
    done.start()
    waited = bench_cost.archive_written(tmp_path, deadline_s=60)
    assert waited is not None and waited >= 0.5 and not lock.exists()
    lock.touch()  # a dump that never ends: said, not waited for for ever
    with pytest.raises(SystemExit, match="still runs"):
        bench_cost.archive_written(tmp_path, deadline_s=0.6)


@pytest.mark.timeout(600)  # three JVMs: minutes when the main suite's Spark tests run beside it
def test_bench_cost() -> None:
    out = run_script(
        "bench_cost.py",
        *("--rows", "0", "--warm-rows", "200", "--json-rows", "200", "--bill-rows", "0"),
        *("--repeat", "1", "--class-archive", "off"),
        timeout=600,
    )
    assert out["warm_parquet"]["rows"] == 200 and out["one_shot_json"]["rows"] == 200


@pytest.mark.timeout(600)
def test_profile_cost(tmp_path: Path) -> None:
    """The one-shot profile on a tiny event log: every phase timed, the aggregate's Spark jobs
    and py4j round trips counted (issue 46: at most 200)."""
    log = tmp_path / "events.jsonl"
    record = {"event": "delay.scheduled", "destination": "orders", "size_bytes": 900}
    lines = [{**record, "timestamp": f"2026-03-0{d}T10:00:00Z", "delay_seconds": 3600 * d}
             for d in range(1, 8)]  # fmt: skip
    log.write_text("\n".join(json.dumps(line) for line in lines))
    out = run_script("profile_cost.py", "--input", str(log), "--fast-start", timeout=500)
    phases = {p["phase"] for p in out["phases"]}
    assert {"session start", "aggregation (Spark jobs)", "spreadsheet", "charts"} <= phases
    assert 0 < out["aggregate_py4j_round_trips_without_releases"] <= 200
    assert out["aggregate_spark_jobs"] >= 1


def burst(short_batches: int) -> dict[str, Any]:
    """A burst of 200 messages due within one second on one destination, the worker's
    requests 40 ms from fauxqs, as from SQS in another zone. (The issue's 300 at 20 ms is in
    docs/short-batches.md; beside the rest of `make test` the machine is past its limit and
    every request costs CPU, so the test keeps the burst smaller and the network slower: a
    worker that polls one receive at a time is then seconds late, one that polls in parallel
    is not.)"""
    out = run_script(
        "bench_worker.py",
        *("--only", "burst", "--seconds", "1", "--latency-ms", "40"),
        *("--burst-messages", "200", "--burst-destinations", "1", "--burst-window", "1"),
        *("--burst-cycle", "10", "--burst-lead", "30", "--short-batches", str(short_batches)),
    )
    result: dict[str, Any] = out["burst"]
    assert result["lost"] == result["early"] == 0
    return result


def test_a_burst_with_short_receives_is_polled_by_parallel_receives() -> None:
    """SQS answers a receive with fewer messages than asked while more wait; the emulators
    fill every batch (docs/short-batches.md). A worker that took a short batch for a drained
    queue polled the burst with one loop: p99 5 s against 0.07 s with full batches (issue
    45). What the test holds is that cause, which load does not change: the worker's
    receives of the burst overlap (one loop never has two in flight), as with full batches.
    The lateness is the benchmark's figure (docs/short-batches.md), printed here: as a bar
    it failed on a saturated machine at 3.0 s (3.28 s in CI with 0.32 s full, 2026-11-28),
    where one loop reads 5.9 s."""
    full, short = burst(0), burst(3)
    assert short["receives_shortened"] >= 66  # 200 messages at 1..3 a receive
    print(
        f"p99 full {full['lateness_p99_s']} s, short {short['lateness_p99_s']} s;"
        f" receives in flight at most {short['receives_in_flight_max']}"
    )
    assert short["receives_in_flight_max"] >= 4
