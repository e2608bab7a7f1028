"""The README's recipe for the environment EMR Serverless runs the cost report with
(`scripts/emr_venv.py`), built and run as EMR runs it: unpacked where the job's working
directory has it, the job started by the archive's own spark-submit (pyspark 3.5.5, the
emr-7.9.0 Spark) with PYSPARK_PYTHON pointing into it. Minutes of packing: `make spark35`
runs it, beside the main suite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.cur_bills import cur2
from tests.support.emr_jobs import confs, job_driver

# Packing Python with pyspark and running the job from it takes minutes (over 300 s, the
# suite's default, on a slow day beside the main suite): the build's own limit is 1,200 s.
pytestmark = [pytest.mark.spark, pytest.mark.emr_env, pytest.mark.timeout(1500)]
ROOT = Path(__file__).resolve().parents[2]
# The Python the suite's venv was made from: pyenv's 3.11 here, a shared-library build, so
# its libpython travels in the archive too.
PYTHON = str(Path(sys.base_prefix) / "bin" / "python3.11")


def test_the_packed_environment_runs_the_cost_job_on_its_own(tmp_path: Path) -> None:
    archive = tmp_path / "sqsdelay-venv.tar.gz"
    prefix = tmp_path / "work" / "environment"
    constraints = ROOT / ".venv-spark35" / "constraints.txt"
    build = [PYTHON, str(ROOT / "scripts" / "emr_venv.py"), "--output", str(archive)]
    build += ["--spec", f"{ROOT}[spark]", "--prefix", str(prefix)]
    build += ["--constraints", str(constraints)]
    build += ["--compress-level", "0"]  # the same archive, stored: packed in a fraction
    # pip reads PIP_NO_COMPILE as its `compile` option: "0" skips the .pyc files, which
    # halves the installs here (an archive without them runs the same, compiling on import).
    quick = {**os.environ, "PIP_NO_COMPILE": "0"}
    done = subprocess.run(build, capture_output=True, text=True, timeout=1200, env=quick)
    assert done.returncode == 0, done.stderr[-3000:]
    prefix.mkdir(parents=True)
    with tarfile.open(archive) as tar:  # as spark.archives=...#environment unpacks it
        tar.extractall(prefix, filter="tar")
    python = prefix / "bin" / "python"
    # Nothing from the machine's Python: a clean environment, the interpreter's prefix and
    # its standard library inside the archive.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    env["JAVA_HOME"] = os.environ.get("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
    env["JAVA_TOOL_OPTIONS"] = os.environ["JAVA_TOOL_OPTIONS"]  # the suite's JIT (conftest)
    probe = (
        "import json, os, sys, pyspark, sqsdelay.cost.run as r; print(json.dumps("
        "[sys.base_prefix, os.__file__, pyspark.__version__, r.__file__, sys.version_info[:2]]))"
    )
    shown = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=env)
    assert shown.returncode == 0, shown.stderr[-2000:]
    base, stdlib, version, run_py, minor = json.loads(shown.stdout)
    assert Path(base) == prefix and Path(stdlib).is_relative_to(prefix), (base, stdlib)
    assert version == "3.5.5" and minor == [3, 11]
    # The job as the template starts it: run.py uploaded next to the archive, spark-submit
    # with the archive's Python for the driver and the workers.
    work = prefix.parent
    shutil.copy(run_py, work / "run.py")
    events = work / "events.jsonl"
    events.write_text(
        "\n".join(
            json.dumps(
                {"event": "delay.scheduled", "destination": "orders", "delay_seconds": 3600,
                 "size_bytes": 100, "timestamp": f"2026-01-0{day}T10:00:00Z"}
            )
            for day in range(1, 6)
        )
    )  # fmt: skip
    submit = [str(prefix / "bin" / "spark-submit"), "--master", "local[2]"]
    submit += ["--conf", "spark.pyspark.python=./environment/bin/python"]
    submit += ["--conf", "spark.pyspark.driver.python=./environment/bin/python"]
    # the template's shuffle width, not Spark's default of 200 (which more than doubles the
    # CPU of a job this small)
    width = confs(job_driver())["spark.sql.shuffle.partitions"]
    submit += ["--conf", f"spark.sql.shuffle.partitions={width}"]
    # and the bill beside them, as a CUR 2.0 export writes it: the bill's readers and the
    # reconciliation on the EMR Spark too, in the same run
    bill = work / "cur.parquet"
    cur2().to_parquet(bill)
    submit += ["run.py", "--input", str(events), "--bill", str(bill)]
    submit += ["--output", str(work / "report")]
    # the archive's bin first, as for its own python3: spark-submit finds its Spark with it
    env["PATH"] = f"{prefix / 'bin'}:{env['PATH']}"
    job = subprocess.run(submit, capture_output=True, text=True, env=env, cwd=work, timeout=600)
    assert job.returncode == 0, job.stderr[-3000:]
    printed = json.loads(job.stdout.strip().splitlines()[-1])
    assert printed["messages"] == 5 and printed["master"] == "local[2]"
    summary = json.loads((work / "report" / "summary.json").read_text())
    assert summary["delayed_messages"] == 5
    listed = {(r["destination"], r["month"]): r["list_usd"] for r in summary["reconciliation"]}
    assert listed[("orders", "2026-01")] == 0.50  # the delay queue's two January lines
