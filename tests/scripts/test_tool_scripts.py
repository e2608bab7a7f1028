"""Every script under scripts/ gets a run in `make test` with tiny parameters (seconds, not
minutes), so that a change that breaks one fails the suite. The benchmarks are in
test_bench_scripts.py (a file of their own, so that the two halves go to two workers)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.scripts.smoke import SCRIPTS, run_script

# Where each script's run is: a test of this folder, or another file that runs it itself.
RUN_BY = {
    "simulate_parking.py": "test_tool_scripts.py",
    "moto_ddb_race.py": "test_tool_scripts.py",
    "moto_fifo_race.py": "test_tool_scripts.py",
    "create_queues.py": "test_tool_scripts.py",
    "render_report.py": "test_tool_scripts.py",
    "timing_tests_in_a_row.sh": "test_tool_scripts.py",
    "aws_smoke.py": "test_tool_scripts.py",
    "bench_bulk_cancel.py": "test_tool_scripts.py",
    "bench_sender.py": "test_bench_scripts.py",
    "bench_dramatiq.py": "test_bench_scripts.py",
    "bench_taskiq.py": "test_bench_scripts.py",
    "bench_worker.py": "test_bench_scripts.py",
    "bench_fleet.py": "test_bench_scripts.py",
    "bench_cost.py": "test_bench_scripts.py",
    "profile_cost.py": "test_bench_scripts.py",
    "bench_guard.py": "test_bench_guard.py",
    "bench_console.py": "test_bench_console.py",
    "bench_console_signin.py": "test_bench_console.py",
    "profile_worker.py": "test_bench_scripts.py",
    "profiled.py": "test_bench_scripts.py",
    "traced.py": "test_bench_otel.py",  # bench_worker.py --otel sdk wraps the worker in it
    "soak.py": "test_bench_scripts.py",
    "benchkit.py": "test_bench_scripts.py",  # a library: every benchmark imports it
    "emr_venv.py": "tests/cost/test_emr_venv.py",  # builds the whole EMR venv (make spark35)
}


def test_every_script_has_a_run() -> None:
    scripts = {p.name for p in SCRIPTS.iterdir() if p.suffix in (".py", ".sh")}
    assert scripts == set(RUN_BY), "give the new script a run in tests/scripts"
    root = SCRIPTS.parent
    for name, where in RUN_BY.items():
        test = root / where if "/" in where else Path(__file__).parent / where
        assert name in test.read_text(), f"{where} does not run {name}"


def test_simulate_parking() -> None:
    out = run_script("simulate_parking.py", "--seed", "1")
    assert out["park_after_seconds"] > 0 and out["runs"]


def test_moto_races() -> None:
    ddb = run_script("moto_ddb_race.py", "--items", "10", "--serialised")
    assert ddb["items_with_more_than_one_winner"] == 0  # the emulator's remedy holds
    fifo = run_script("moto_fifo_race.py", "--trials", "1")
    assert isinstance(fifo, dict) and fifo


def test_bench_bulk_cancel() -> None:
    """Its counts are the figures docs/operator-controls.md quotes: one Query for a small
    tag, one UpdateItem per tagged message, untagged ones untouched."""
    seeded = run_script("bench_bulk_cancel.py", "--messages", "5")  # as the figures are made
    assert seeded["cancel"]["dynamodb_requests"] == {"Query": 1, "UpdateItem": 5}
    assert seeded["cancel"]["cancelled"] == 5 and seeded["dry_run"]["matched"] == 5
    out = run_script("bench_bulk_cancel.py", "--messages", "5", "--send")
    assert out["dry_run"]["matched"] == 5
    assert out["dry_run"]["dynamodb_requests"] == {"Query": 1}
    cancel = out["cancel"]
    assert (cancel["cancelled"], cancel["too-late"], cancel["unknown"]) == (5, 0, 0)
    assert cancel["dynamodb_requests"] == {"Query": 1, "UpdateItem": 5}
    # per tagged send: PutItem, BatchWriteItem (its tag), UpdateItem (sent); untagged: two
    assert out["send_both"]["dynamodb_requests"] == {
        "BatchWriteItem": 5,
        "PutItem": 10,
        "UpdateItem": 10,
    }


def test_aws_smoke_dry_run() -> None:
    """The real-account smoke test's dry run: the four stacks deployed into the emulator's
    CloudFormation, a short and a parked delay through each worker's stand-in, all torn down."""
    out = run_script(
        "aws_smoke.py", "--dry-run", "--cycles", "3,16", "--tolerance", "3", "--grace", "2"
    )
    assert out["ok"] and out["recursive_loop"] == "Allow" and not out["not_torn_down"]
    assert sorted((m["worker"], m["delay_seconds"]) for m in out["messages"]) == [
        ("ecs", 3), ("ecs", 16), ("lambda", 3), ("lambda", 16)
    ]  # fmt: skip
    assert all(m["copies"] == 1 for m in out["messages"])
    # 16 s is past the park threshold at a 1 s cycle (11 s): each worker parks one, and the
    # emulator's Scheduler sends both back
    assert out["parked_by_workers"] == 2 and out["schedules_fired"] == 2
    operations = [(c["service"], c["operation"]) for c in out["calls"]]
    assert operations.count(("cloudformation", "CreateStack")) == 5
    assert operations.count(("cloudformation", "DeleteStack")) == 5
    assert operations.count(("sqs", "DeleteQueue")) == 5  # the queues the stacks retain
    stacks = {c["StackName"] for c in out["calls"] if "StackName" in c}
    assert all(s.startswith(out["prefix"]) for s in stacks) and len(stacks) == 5


def test_create_queues(moto_url: str, prefix: str, sqs: Any) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "create_queues.py", "orders", "--prefix", prefix),
            *("--delay-seconds", "5", "--endpoint-url", moto_url, "--region", "us-east-1"),
        ],
        cwd=SCRIPTS,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    urls = done.stdout.split()
    assert [u.rsplit("/", 1)[-1] for u in urls] == [
        f"{prefix}orders",
        f"{prefix}orders-delay.fifo",
        f"{prefix}error",
    ]
    attrs = sqs.get_queue_attributes(QueueUrl=urls[1], AttributeNames=["All"])["Attributes"]
    assert attrs["DelaySeconds"] == "5" and attrs["FifoQueue"] == "true"


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="Chromium is not installed (apt install chromium)"
)
def test_render_report(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text("<html><body><h1>sqsdelay</h1></body></html>")
    out = run_script("render_report.py", str(page), str(tmp_path / "page.png"), "--size", "400,300")
    assert out["ok"] and out["bytes"] > 0


def test_timing_tests_in_a_row_selects_the_timing_tests(tmp_path: Path) -> None:
    """Its pattern still names tests: a rename would leave it running none."""
    done = subprocess.run(
        ["bash", "scripts/timing_tests_in_a_row.sh", "1", str(tmp_path)],
        cwd=SCRIPTS.parent,
        env={**os.environ, "PYTEST_ADDOPTS": "--collect-only -q"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    collected = (tmp_path / "run1.log").read_text()  # "tests/...py: N" per file
    counts = [int(line.rsplit(": ", 1)[1]) for line in collected.splitlines() if ".py: " in line]
    assert len(counts) >= 5 and sum(counts) >= 20, collected[-2000:]
