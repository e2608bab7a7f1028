"""Metrics as CloudWatch embedded metric format (EMF) documents: what one flush of a
`metrics.Tally` becomes, one JSON object per line, which CloudWatch Logs turns into metrics
with no agent and no API call.

Powertools for AWS Lambda builds each object (`AmazonCloudWatchEMFProvider`, which also
works outside Lambda). One object per destination (dimension `Destination`, and no dimension
for the totals the alarms use), one per API (`Service`, `Api`) and one for the clock offset.
An object holds at most 100 values of a metric, so hand-over lateness is split across as
many objects as it needs. `aws/emf.py` writes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
    AmazonCloudWatchEMFProvider,
)

from sqsdelay.core.metrics import (
    BACKLOG_DUE,
    BACKLOG_VISIBLE,
    CLOCK_OFFSET,
    LATENESS,
    REQUESTS,
    THROTTLED,
    UNITS,
    Tally,
)

# The EMF specification's limit per object, for metrics and for values of one metric.
MAX_VALUES = 100


def _object(
    namespace: str,
    dimensions: dict[str, str],
    values: dict[str, list[int]],
    timestamp_ms: int,
    *,
    totals: bool = False,
) -> dict[str, Any]:
    provider = AmazonCloudWatchEMFProvider(namespace=namespace)
    # POWERTOOLS_SERVICE_NAME (set in many Lambdas) would add a `service` dimension that the
    # dashboard and alarms do not query.
    provider.service = ""
    provider.set_timestamp(timestamp_ms)
    for name, value in dimensions.items():
        provider.add_dimension(name, value)
    metrics = {
        name: {"Unit": UNITS[name], "Value": [float(v) for v in vs]} for name, vs in values.items()
    }
    emf: dict[str, Any] = dict(provider.serialize_metric_set(metrics=metrics))
    if totals:  # also published without dimensions: what the alarms watch
        emf["_aws"]["CloudWatchMetrics"][0]["Dimensions"].append([])
    return emf


def objects(
    tally: Tally,
    namespace: str,
    timestamp_ms: int,
    offset_ms: int | None,
    backlog: tuple[int, int] | None = None,
) -> Iterator[dict[str, Any]]:
    """The EMF objects of one flush; nothing for a quiet period but the worker's backlog
    (visible, due), which is written every time: scaling in needs its zeros."""
    for destination in tally.destinations():
        counts = {m: [n] for (d, m), n in sorted(tally.counts.items()) if d == destination}
        late = tally.lateness.get(destination, [])
        chunks = [late[i : i + MAX_VALUES] for i in range(0, len(late), MAX_VALUES)] or [[]]
        for i, chunk in enumerate(chunks):
            values = {**(counts if i == 0 else {}), **({LATENESS: chunk} if chunk else {})}
            dims = {"Destination": destination}
            yield _object(namespace, dims, values, timestamp_ms, totals=True)
    for service, api in sorted(set(tally.calls) | set(tally.throttled)):
        values = {REQUESTS[service]: [tally.calls[(service, api)]]} if service in REQUESTS else {}
        if tally.throttled[(service, api)] and service in THROTTLED:
            values[THROTTLED[service]] = [tally.throttled[(service, api)]]
        if values:
            dims = {"Service": service, "Api": api}
            yield _object(namespace, dims, values, timestamp_ms, totals=True)
    if offset_ms is not None:
        yield _object(namespace, {}, {CLOCK_OFFSET: [offset_ms]}, timestamp_ms)
    if backlog is not None:
        visible, due = backlog
        values = {BACKLOG_VISIBLE: [visible], BACKLOG_DUE: [due]}
        yield _object(namespace, {}, values, timestamp_ms)
