"""Checks an object against the CloudWatch embedded metric format specification
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html)
and reads metrics back out of EMF lines."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

# The specification's units (MetricDefinition.Unit).
UNITS = {
    "Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes",
    "Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count",
    "Bytes/Second", "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second",
    "Terabytes/Second", "Bits/Second", "Kilobits/Second", "Megabits/Second", "Gigabits/Second",
    "Terabits/Second", "Count/Second", "None",
}  # fmt: skip


def check(obj: dict[str, Any]) -> None:
    """Raise AssertionError where `obj` breaks the specification."""
    meta = obj["_aws"]
    assert isinstance(meta["Timestamp"], int) and meta["Timestamp"] > 0
    directives = meta["CloudWatchMetrics"]
    assert isinstance(directives, list) and directives
    for directive in directives:
        assert isinstance(directive["Namespace"], str) and 1 <= len(directive["Namespace"]) <= 255
        assert not directive["Namespace"].startswith("AWS/")
        for dimension_set in directive["Dimensions"]:
            assert len(dimension_set) <= 30
            for key in dimension_set:
                assert isinstance(obj[key], str) and 1 <= len(obj[key]) <= 1024, key
        metrics = directive["Metrics"]
        assert 1 <= len(metrics) <= 100
        for metric in metrics:
            assert 1 <= len(metric["Name"]) <= 1024
            assert metric.get("Unit", "None") in UNITS
            value = obj[metric["Name"]]
            values = value if isinstance(value, list) else [value]
            assert 1 <= len(values) <= 100, metric["Name"]
            assert all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def parse(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Every EMF object among `lines`, each checked."""
    objects = []
    for line in lines:
        if line.strip():
            obj = json.loads(line)
            check(obj)
            objects.append(obj)
    return objects


def values(objects: Iterable[dict[str, Any]], **dimensions: str) -> defaultdict[str, list[float]]:
    """Every value of each metric published with exactly `dimensions` (as one of its sets)."""
    found: defaultdict[str, list[float]] = defaultdict(list)
    for obj in objects:
        for directive in obj["_aws"]["CloudWatchMetrics"]:
            if any(set(s) == set(dimensions) for s in directive["Dimensions"]) and all(
                obj.get(k) == v for k, v in dimensions.items()
            ):
                for metric in directive["Metrics"]:
                    value = obj[metric["Name"]]
                    found[metric["Name"]] += value if isinstance(value, list) else [value]
    return found


def units(objects: Iterable[dict[str, Any]]) -> dict[str, str]:
    return {
        m["Name"]: m["Unit"]
        for obj in objects
        for d in obj["_aws"]["CloudWatchMetrics"]
        for m in d["Metrics"]
    }


def metric_data(objects: Iterable[dict[str, Any]], timestamp: Any = None) -> list[dict[str, Any]]:
    """What CloudWatch Logs would extract from `objects`, as PutMetricData entries (one per
    metric and dimension set; `timestamp` overrides the objects' own)."""
    import datetime as dt

    data = []
    for obj in objects:
        when = timestamp or dt.datetime.fromtimestamp(obj["_aws"]["Timestamp"] / 1000, dt.UTC)
        for directive in obj["_aws"]["CloudWatchMetrics"]:
            for dimension_set in directive["Dimensions"]:
                for metric in directive["Metrics"]:
                    value = obj[metric["Name"]]
                    data.append(
                        {
                            "MetricName": metric["Name"],
                            "Dimensions": [{"Name": k, "Value": obj[k]} for k in dimension_set],
                            "Values": value if isinstance(value, list) else [value],
                            "Unit": metric["Unit"],
                            "Timestamp": when,
                        }
                    )
    return data
