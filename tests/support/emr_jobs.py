"""infra/cost-report.yaml's EMR Serverless job as the template renders it: its spark-submit
driver and the --conf settings in it."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.support import cfn

PARAMS = {"EventsBucket": "events", "ReportBucket": "reports"}


def job_driver(params: dict[str, str] | None = None) -> dict[str, Any]:
    r = cfn.Renderer(cfn.load("cost-report.yaml"), {**PARAMS, **(params or {})})
    text = r.value(r.template["Outputs"]["StartJobRun"]["Value"])
    return json.loads(text.split("--job-driver '", 1)[1].rsplit("'", 1)[0])["sparkSubmit"]  # type: ignore[no-any-return]


def confs(driver: dict[str, Any]) -> dict[str, str]:
    return dict(re.findall(r"--conf (\S+?)=(\S+)", driver["sparkSubmitParameters"]))
