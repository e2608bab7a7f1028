"""Metrics as CloudWatch embedded metric format (EMF) documents: what one flush of a
`metrics.Tally` becomes, one JSON object per line, which CloudWatch Logs turns into metrics
with no agent and no API call.

Powertools for AWS Lambda builds each object (`AmazonCloudWatchEMFProvider`, which also
works outside Lambda). One object per destination (dimension `Destination`, and no dimension
for the totals the alarms use), one per API (`Service`, `Api`) and one for the clock offset.
An object holds at most 100 values of a metric, so hand-over lateness is split across as
many objects as it needs. `EmfWriter` writes a flush's objects as lines.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
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
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.aws.emf")  # the name its `metrics.failed` event always had

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


class EmfWriter:
    """Flushes a runtime's tally as EMF lines to `write` (stdout by default: CloudWatch Logs
    reads the worker's and the Lambda handler's output, and these lines, as it reads their
    logs). `enabled`: SQSDELAY_METRICS=emf."""

    def __init__(
        self,
        namespace: str,
        *,
        enabled: bool,
        write: Callable[[str], object] | None = None,
        clock: Callable[[], float],
    ) -> None:
        self.namespace = namespace
        self.enabled = enabled
        self._write = write or _stdout
        self._clock = clock

    def flush(
        self, tally: Tally, offset_ms: int | None, backlog: tuple[int, int] | None = None
    ) -> int:
        """Write what `tally` counted since the last flush (and the worker's backlog); how
        many objects were written."""
        taken = tally.take()
        if not self.enabled or not (taken or offset_ms is not None or backlog is not None):
            return 0
        now_ms = int(self._clock() * 1000)
        try:
            lines = [
                json.dumps(o, separators=(",", ":"))
                for o in objects(taken, self.namespace, now_ms, offset_ms, backlog)
            ]
        except Exception:  # metrics must never fail a batch or an invocation
            log.exception("metrics.failed")
            return 0
        if lines:  # one write: the lines are not interleaved with another thread's output
            self._write("\n".join(lines) + "\n")
        return len(lines)


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
