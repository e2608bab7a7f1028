"""The benchmarks, each with tiny parameters (seconds, not minutes): their figures mean
nothing here, only that every phase still runs and prints its JSON. Both emulators: the
embedded moto server and fauxqs (`make test` installs it as `make bench-deps` does), each
in its own process by benchkit.py, which every benchmark imports."""

from __future__ import annotations

import pytest

from tests.scripts.smoke import run_script

pytestmark = pytest.mark.slow


def test_bench_sender() -> None:
    out = run_script("bench_sender.py", "--messages", "10", "--emulator", "both")
    assert set(out) == {"moto", "fauxqs"}
    assert all(run["messages"] == 10 and run["delay-queue_speedup"] > 0 for run in out.values())


def test_bench_dramatiq() -> None:
    out = run_script("bench_dramatiq.py", "--messages", "5", "--imports", "1")
    assert out["messages"] == 5 and out["import_s"] and out["enqueue_ms_median"]


def test_profile_worker() -> None:
    out = run_script("profile_worker.py", "--seconds", "6", "--per-queue", "20")
    assert out["profiled_seconds"] > 0


def test_bench_worker() -> None:
    out = run_script(
        "bench_worker.py",
        *("--queues", "2", "--per-queue", "10", "--seconds", "2", "--lateness-messages", "5"),
        *("--parking-messages", "3", "--parking-wait-time-seconds", "1"),
        *("--burst-messages", "200", "--burst-cycle", "4"),
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


@pytest.mark.timeout(600)  # three JVMs: minutes when the main suite's Spark tests run beside it
def test_bench_cost() -> None:
    out = run_script(
        "bench_cost.py",
        *("--rows", "0", "--warm-rows", "200", "--json-rows", "200", "--bill-rows", "0"),
        *("--repeat", "1", "--class-archive", "off"),
        timeout=600,
    )
    assert out["warm_parquet"]["rows"] == 200 and out["one_shot_json"]["rows"] == 200
