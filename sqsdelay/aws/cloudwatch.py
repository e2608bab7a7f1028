"""Reading the workers' metrics back from CloudWatch for `sqsdelay inspect` (GetMetricData):
per destination, the due windows of the last complete cycle and the hand-over lateness of
the last hour."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sqsdelay.aws.clients import error_code, sync_service
from sqsdelay.core.metrics import LATENESS, WINDOWS
from sqsdelay.settings import Settings

# GetMetricData takes at most 500 queries per call.
MAX_QUERIES = 500
LATENESS_STATS = {"p50": "p50", "p99": "p99", "max": "Maximum", "count": "SampleCount"}
HOUR = timedelta(hours=1)


@dataclass
class DestinationMetrics:
    destination: str
    due: dict[str, int] = field(default_factory=dict)  # window name → messages, last cycle
    lateness_ms: dict[str, float] = field(default_factory=dict)  # p50, p99, max, count

    @property
    def empty(self) -> bool:
        return not self.due and not self.lateness_ms


@dataclass
class MetricsReport:
    destinations: list[DestinationMetrics]
    cycle_end: datetime
    cycle_seconds: int
    error: str | None = None  # why nothing could be read


def cycle_period(cycle_seconds: int) -> int:
    """The due windows' period: one cycle, rounded up to whole minutes (CloudWatch's periods)."""
    return math.ceil(cycle_seconds / 60) * 60


def _query(ident: str, namespace: str, name: str, destination: str, period: int, stat: str) -> Any:
    metric = {
        "Namespace": namespace,
        "MetricName": name,
        "Dimensions": [{"Name": "Destination", "Value": destination}],
    }
    return {"Id": ident, "MetricStat": {"Metric": metric, "Period": period, "Stat": stat}}


def _get(cw: Any, queries: list[dict[str, Any]], start: datetime, end: datetime) -> dict[str, Any]:
    """Values per query id (the newest first), over as many calls and pages as it takes."""
    values: dict[str, Any] = {}
    for i in range(0, len(queries), MAX_QUERIES):
        pages = cw.get_paginator("get_metric_data").paginate(
            MetricDataQueries=queries[i : i + MAX_QUERIES],
            StartTime=start,
            EndTime=end,
            ScanBy="TimestampDescending",
        )
        for page in pages:
            for result in page["MetricDataResults"]:
                values.setdefault(result["Id"], []).extend(result.get("Values", []))
    return values


def read_metrics(
    settings: Settings, destinations: list[str], *, client: Any = None, now: datetime | None = None
) -> MetricsReport:
    """The metrics of `destinations` (physical queue names). A failure to read (no
    cloudwatch:GetMetricData, no network) is reported, not raised: `inspect` still shows
    the queues."""
    cw = client or sync_service(settings, "cloudwatch")
    ns = settings.metrics_namespace
    now = (now or datetime.now(UTC)).replace(second=0, microsecond=0)
    period = cycle_period(settings.max_native_delay_seconds)
    cycle_end = datetime.fromtimestamp(now.timestamp() // period * period, UTC)
    report = MetricsReport([DestinationMetrics(d) for d in destinations], cycle_end, period)
    windows, lateness = [], []
    for i, d in enumerate(destinations):
        windows += [
            _query(f"w{i}_{k}", ns, w, d, period, "Sum") for k, (_, w) in enumerate(WINDOWS)
        ]
        lateness += [
            _query(f"l{i}_{name}", ns, LATENESS, d, 3600, stat)
            for name, stat in LATENESS_STATS.items()
        ]
    try:
        due = _get(cw, windows, cycle_end - timedelta(seconds=period), cycle_end)
        late = _get(cw, lateness, now - HOUR, now)
    except (ClientError, BotoCoreError) as exc:
        report.error = f"{error_code(exc)}: {exc}"[:300]
        return report
    for i, m in enumerate(report.destinations):
        for k, (_, w) in enumerate(WINDOWS):
            if due.get(f"w{i}_{k}"):
                m.due[w] = int(due[f"w{i}_{k}"][0])
        for name in LATENESS_STATS:
            if late.get(f"l{i}_{name}"):
                m.lateness_ms[name] = float(late[f"l{i}_{name}"][0])
    return report
