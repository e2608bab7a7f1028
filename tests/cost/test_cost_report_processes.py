"""The cost report as separate processes: the `sqsdelay` commands, `spark-submit`, and a JVM
started after a report stopped its own (the class-data archive of a second start:
test_class_archive.py). Its spark-submit test compares with an embedded run on the suite's
session, so `make test` runs it on the worker that holds that session (tests/conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sqsdelay.cost.options import ReportRequest
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.cost.run import run_report
from tests.support.cost_events import INPUT_COUNTS, write_event_log

pytestmark = pytest.mark.spark


@pytest.fixture
def event_log(tmp_path: Path) -> Path:
    return write_event_log(tmp_path)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sqsdelay", *args], capture_output=True, text=True, timeout=300
    )


def test_cost_estimate_prints_the_reference_numbers() -> None:
    result = cli("cost-estimate", "--delay", "31536000")
    assert result.returncode == 0
    for text in (
        "35,040 cycles",
        "70,080 operations",
        "0.03504 USD",
        "105,118 requests",
        "why they differ",
        # One invocation, Scheduler's send and one batched hop (0.2 + 0.1): 1.3 requests.
        "threshold 10,020 s, parked): 1.3 requests + 1 Scheduler invocation(s), 0.0000016 USD",
        # The registry: 6 write units, half a read unit on each of the 35,039 passes.
        "added: 6 write + 17,519.5 read request units, 0.0021937 USD (parked: 0.0000038 USD)",
    ):
        assert text in result.stdout


def test_cost_report_cli_refuses_a_missing_input_before_spark_starts(tmp_path: Path) -> None:
    """Exit 2 with one line; no JVM started, so no Java stack trace on stderr either (the
    refusal of an input without records, after Spark read it: test_cost_report.py)."""
    nope = tmp_path / "nope.jsonl"
    bad = cli("cost-report", "--input", str(nope), "--output", str(tmp_path / "r2"))
    assert (bad.returncode, bad.stderr) == (2, f"sqsdelay: error: input not found: {nope}\n")


@pytest.mark.slow
def test_the_job_runs_unchanged_under_spark_submit(
    spark: Any, event_log: Path, tmp_path: Path
) -> None:
    """The cluster path, as README shows it: spark-submit supplies the master (local[2]
    here), the job does not override it, and the numbers equal the embedded run's."""
    import os

    import pandas as pd

    import sqsdelay.cost.run

    submit = Path(sys.executable).parent / "spark-submit"
    out = tmp_path / "submitted"
    done = subprocess.run(
        [
            str(submit),
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            # a cluster's setting, supplied the same way: Spark's default of 200 tasks per
            # shuffle more than doubles this tiny job's CPU (71 s against 28 s)
            "--conf",
            "spark.sql.shuffle.partitions=4",
            sqsdelay.cost.run.__file__,
            "--input",
            str(event_log),
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["master"] == "local[2]"  # the master came from spark-submit
    summary = json.loads((out / "summary.json").read_text())
    assert summary["input"] == INPUT_COUNTS
    embedded = tmp_path / "embedded"
    run_report(
        ReportRequest(inputs=[str(event_log)], output=str(embedded), pricing=load_pricing()),
        spark=spark,
    )
    for name in ("by_destination", "by_month", "by_band", "models"):
        pd.testing.assert_frame_equal(
            pd.read_csv(out / f"{name}.csv"), pd.read_csv(embedded / f"{name}.csv")
        )


RELAUNCH = """
import sys
from pyspark import SparkContext
from sqsdelay.cost.session import spark_session
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.cost.options import ReportRequest
from sqsdelay.cost.run import run_report

request = ReportRequest(inputs=[sys.argv[1]], output=sys.argv[2], pricing=load_pricing())
run_report(request, fast_start=True)
assert SparkContext._gateway is None, "the report's own JVM is still up"
print(spark_session(fast_start=True).range(3).count())
"""


@pytest.mark.slow
def test_a_report_stops_the_jvm_it_started_and_a_later_session_starts_a_new_one(
    event_log: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", RELAUNCH, str(event_log), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "3" and (tmp_path / "out" / "report.html").exists()
