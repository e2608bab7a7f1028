"""infra/cost-report.yaml as EMR Serverless would run it: its capacity fits the sizing of
docs/cost-report-at-scale.md, and its job arguments, with the S3 URIs pointed at local
directories, run the job and leave `latest` plus a dated snapshot."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from sqsdelay.cost import run
from tests.support import cfn
from tests.support.emr_jobs import confs, job_driver

pytestmark = pytest.mark.spark


def worker_gb(memory: str) -> int:
    """EMR Serverless adds the memory overhead (10 %, at least 384 MB) to a worker."""
    gb = int(memory.removesuffix("g"))
    return math.ceil(gb + max(0.384, gb / 10))


def test_the_default_capacity_fits_the_documented_sizing() -> None:
    c = confs(job_driver())
    executors = int(c["spark.executor.instances"])
    vcpu = int(c["spark.driver.cores"]) + executors * int(c["spark.executor.cores"])
    memory = worker_gb(c["spark.driver.memory"]) + executors * worker_gb(c["spark.executor.memory"])
    assert (vcpu, memory) == (18, 68)  # docs/cost-report-at-scale.md: 2 + 4 x 4, 4 + 4 x 16
    defaults = cfn.defaults(cfn.load("cost-report.yaml"))
    assert int(defaults["MaxVcpu"].split()[0]) >= vcpu
    assert int(defaults["MaxMemory"].split()[0]) >= memory
    doc = (cfn.INFRA.parent / "docs" / "cost-report-at-scale.md").read_text()
    for conf in ("spark.executor.memory=14g", "spark.executor.instances=4"):
        assert conf in doc and conf in job_driver()["sparkSubmitParameters"]


def test_the_job_arguments_write_latest_and_a_dated_snapshot(spark: Any, tmp_path: Path) -> None:
    """Firehose objects under YYYY/MM/DD/HH/, as the template's EventsFormat default says."""
    import gzip

    from tests.support.cost_events import RECORDS, envelopes

    hour = tmp_path / "events" / "sqsdelay" / "events" / "2026" / "01" / "31" / "23"
    hour.mkdir(parents=True)
    lines = [json.dumps({"event": "delay.scheduled", **r}) for r in RECORDS]
    hour.joinpath("sqsdelay-1-2026-01-31-23-00-00-abc").write_bytes(
        b"".join(gzip.compress(d.encode()) for d in envelopes(lines))
    )
    args = job_driver()["entryPointArguments"]
    local = [
        a.replace("s3a://events/", (tmp_path / "events").as_uri() + "/").replace(
            "s3a://reports/", (tmp_path / "reports").as_uri() + "/"
        )
        for a in args
    ]
    assert local != args and all("s3a://" not in a for a in local)
    run.main(local)
    reports = tmp_path / "reports" / "sqsdelay" / "reports"
    latest = json.loads((reports / "latest" / "summary.json").read_text())
    assert latest["input"]["scheduled"] == len(RECORDS)
    [snapshot] = list((reports / "runs").iterdir())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d{6}Z", snapshot.name)
    assert json.loads((snapshot / "summary.json").read_text()) == latest
