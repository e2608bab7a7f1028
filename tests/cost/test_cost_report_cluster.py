"""`sqsdelay cost-report --master spark://...` on Spark's own cluster manager: a standalone
master and two workers on 127.0.0.1 (tests/support/standalone.py), whose executors run in
processes and working directories of their own, as on the cluster the EMR templates deploy.
Every other cost test runs in local[...], where the driver and the executors share one JVM;
anything that works only because they do fails here. The report must be local[2]'s (the
suite's session) to the cent."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sqsdelay.cost.options import ReportRequest
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.cost.run import run_report
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.cost_events import INPUT_COUNTS, write_event_log
from tests.support.cur_bills import cur2
from tests.support.standalone import JAVA, leftovers, standalone_cluster

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# The report's files that carry its numbers; report.html and report.xlsx render them (and
# the time the report was made).
TABLES = ("by_destination", "by_month", "by_band", "delay_histogram", "models", "reconciliation")


def test_the_report_on_a_standalone_cluster_is_local_2s_to_the_cent(
    spark: Any, tmp_path: Path
) -> None:
    # The event log and the bill where every host reads them (S3 on EMR): a file:// URI;
    # the report where the command runs (the driver's working directory), by a relative path.
    shared = tmp_path / "shared"
    shared.mkdir()
    events = write_event_log(shared).as_uri()
    cur2().to_parquet(shared / "cur.parquet")
    bill = (shared / "cur.parquet").as_uri()
    driver = tmp_path / "driver"
    driver.mkdir()
    # What a cluster's spark-defaults.conf says, honoured by the report's session: the
    # executors' memory (the workers offer 512 MiB each), and the address the executors
    # reach the driver at (the machine's name for it, not one the report pins).
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.executor.memory 512m\nspark.driver.host localhost\n"
    )
    report = [sys.executable, "-m", "sqsdelay", "cost-report", "--input", events, "--bill", bill]
    root = tmp_path / "cluster"
    try:
        with standalone_cluster(root) as cluster:
            env = {**os.environ, "SPARK_CONF_DIR": str(conf), "SPARK_LOCAL_IP": "127.0.0.1"}
            env["JAVA_TOOL_OPTIONS"] = JAVA  # the cluster's, the suite's session's: C1, serial GC
            done = subprocess.run(
                [*report, "--master", cluster.url, "--output", "report"],
                capture_output=True,
                text=True,
                timeout=300,
                cwd=driver,
                env=env,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            executors = cluster.executor_dirs()
    finally:
        # Nothing of the cluster is left running, the executors' Python workers included.
        wait_for(lambda: not leftovers(root), timeout=30)

    # The work ran on both of the cluster's workers, each executor in its own process and
    # directory, told to reach the driver where spark-defaults.conf put it. A worker may
    # have started more than one: the master replaces an executor that died or registered
    # too late (once seen in CI on a saturated machine), which a cluster is meant to do.
    workers = {d.parent.parent.name for d in executors}
    assert workers == {"worker-0", "worker-1"}, executors
    logs = [(d / "stderr").read_text() for d in executors]
    urls = {m for log in logs for m in re.findall(r"--driver-url\W+spark://\S+?@([^:]+):", log)}
    assert urls == {"localhost"}, urls
    assert sum(log.count("Finished task") for log in logs) > 0

    settings = Settings()
    local = tmp_path / "local"
    run_report(
        ReportRequest(
            inputs=[events],
            bills=[bill],
            output=str(local),
            pricing=load_pricing(),
            cycle_seconds=settings.max_native_delay_seconds,
            registry_table=settings.registry_table_name(),
            schedule_group=settings.schedule_group,
        ),
        spark=spark,
    )
    assert spark.sparkContext.master == "local[2]"
    out = driver / "report"
    on_cluster, on_local = (json.loads((d / "summary.json").read_text()) for d in (out, local))
    assert on_cluster["input"] == INPUT_COUNTS and on_cluster["reconciliation"]
    for summary in (on_cluster, on_local):
        del summary["generated_at"]
    assert on_cluster == on_local
    for name in (*(f"{t}.csv" for t in TABLES), "estimate-focus.csv"):
        assert (out / name).read_text() == (local / name).read_text(), name
    assert (out / "report.html").exists() and (out / "report.xlsx").exists()
