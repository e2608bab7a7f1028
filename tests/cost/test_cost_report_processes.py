"""The cost report as separate processes: the `sqsdelay` commands, `spark-submit`, the
class-data archive of a second start, and a JVM started after a report stopped its own. Kept
apart from test_cost_report.py so that the two files' slowest tests (about 100 s each here)
run on both pytest workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sqsdelay.cost.run import run_report
from sqsdelay.settings import Settings
from tests.cost.test_cost_report import INPUT_COUNTS, PRICING, write_event_log

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
    run_report(inputs=[str(event_log)], output=str(embedded), pricing=PRICING, spark=spark)
    for name in ("by_destination", "by_month", "by_band", "models"):
        pd.testing.assert_frame_equal(
            pd.read_csv(out / f"{name}.csv"), pd.read_csv(embedded / f"{name}.csv")
        )


def test_class_data_archive_options_and_a_failed_dump(tmp_path: Path) -> None:
    from sqsdelay.cost import classarchive

    archive = tmp_path / "spark.jsa"
    assert classarchive.use_option(archive) == ""  # none yet: start without sharing
    assert classarchive.use_option(None) == ""
    classlist = classarchive.classlist_for(archive)
    assert classarchive.record_option(classlist) == f"-XX:DumpLoadedClassList={classlist}"
    classlist.write_text("java/lang/Object id: 0\n")
    # A dump that fails (here: no such Java) leaves nothing behind, and no archive.
    assert not classarchive.dump(archive, classlist, str(tmp_path / "no-java"), "x.jar")
    assert list(tmp_path.iterdir()) == []
    archive.write_bytes(b"x")
    assert classarchive.use_option(archive).startswith(f"-XX:SharedArchiveFile={archive} ")


@pytest.mark.slow
def test_cost_report_cli_starts_the_second_time_from_the_class_archive(
    spark: Any, event_log: Path, tmp_path: Path
) -> None:
    """The command as a user runs it, with the default class-data archive (auto): the first
    run writes an archive into the user cache directory, the second starts from it."""
    import os

    from sqsdelay.cost.classarchive import runtime_of

    cache = tmp_path / "cache" / "sqsdelay"
    env = {k: v for k, v in os.environ.items() if k != "SQSDELAY_SPARK_CLASS_ARCHIVE"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")

    def report(name: str, *settings: str) -> str:
        args = ["cost-report", "--input", str(event_log), "--output", str(tmp_path / name)]
        done = subprocess.run(
            [sys.executable, "-m", "sqsdelay", *settings, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "[cds]" not in done.stdout + done.stderr  # the dump stays quiet
        return done.stdout

    # the cycle is the worker's setting, not a flag of its own
    printed = report("first", "--max-native-delay-seconds", "300")
    # rich wraps the long path at 80 columns
    assert "Batched (this worker)" in printed and "report.html" in printed.replace("\n", "")
    assert json.loads((tmp_path / "first" / "summary.json").read_text())["cycle_seconds"] == 300
    # Written from the first run's class list once its JVM had exited; nothing else left.
    (archive,) = cache.iterdir()
    assert archive.suffix == ".jsa" and archive.stat().st_size > 10_000_000
    written = archive.stat().st_mtime_ns
    # It fits the driver's JVM and class path: Spark's classes come from it (-Xshare:on
    # refuses to start with an archive it cannot map).
    java, classpath = runtime_of(spark)
    options = [f"-XX:SharedArchiveFile={archive}", "-Xshare:on", "-Xlog:class+load=info"]
    shared = subprocess.run(
        [java, *options, "-cp", classpath, "org.apache.spark.deploy.SparkSubmit", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shared.returncode == 0, shared.stderr[-2000:]
    assert "org.apache.spark.deploy.SparkSubmit source: shared objects file" in shared.stdout
    report("second")
    assert (tmp_path / "second" / "report.html").exists()
    assert list(cache.iterdir()) == [archive] and archive.stat().st_mtime_ns == written


RELAUNCH = """
import sys
from pyspark import SparkContext
from sqsdelay.cost.session import spark_session
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.cost.run import run_report

run_report(inputs=[sys.argv[1]], output=sys.argv[2], pricing=load_pricing(), fast_start=True)
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


def test_class_archive_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqsdelay.cost.classarchive import class_archive_file

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    auto = class_archive_file(Settings(spark_class_archive="auto").spark_class_archive)
    assert auto is not None and auto.parent == tmp_path / "sqsdelay"
    assert auto == class_archive_file("auto")  # stable for one Java and pyspark
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "another-jdk"))
    assert class_archive_file("auto") != auto  # another Java, another archive
    assert class_archive_file(Settings(spark_class_archive="off").spark_class_archive) is None
    mine = Settings(spark_class_archive=tmp_path / "x.jsa").spark_class_archive
    assert class_archive_file(mine) == tmp_path / "x.jsa"
    monkeypatch.setenv("SQSDELAY_SPARK_CLASS_ARCHIVE", "off")
    assert Settings().spark_class_archive == "off"
    monkeypatch.setenv("SQSDELAY_SPARK_CLASS_ARCHIVE", str(tmp_path / "y.jsa"))
    assert Settings().spark_class_archive == tmp_path / "y.jsa"
