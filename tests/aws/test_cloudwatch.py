"""Reading the metrics back (GetMetricData), with botocore's Stubber: the limits and the
failures the emulator cannot produce."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.stub import Stubber

from sqsdelay.aws.cloudwatch import MAX_QUERIES, read_metrics
from sqsdelay.settings import Settings

NOW = datetime(2026, 11, 23, 10, 7, 41, tzinfo=UTC)


def client() -> Any:
    return boto3.client(
        "cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


def test_many_destinations_take_several_calls_of_at_most_500_queries() -> None:
    cw = client()
    destinations = [f"q{i}" for i in range(130)]  # 520 queries of each kind
    sizes: list[int] = []

    def answer(params: dict[str, Any], **_: Any) -> None:
        sizes.append(len(params["MetricDataQueries"]))

    cw.meta.events.register("provide-client-params.cloudwatch.GetMetricData", answer)
    with Stubber(cw) as stub:
        for _ in range(4):
            stub.add_response("get_metric_data", {"MetricDataResults": []})
        report = read_metrics(Settings(), destinations, client=cw, now=NOW)
        stub.assert_no_pending_responses()
    assert sizes == [MAX_QUERIES, 20, MAX_QUERIES, 20]
    assert report.error is None and all(m.empty for m in report.destinations)
    # The last complete 900 s cycle before 10:07:41 ended at 10:00.
    assert report.cycle_end == datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def test_a_denied_read_is_reported_not_raised() -> None:
    cw = client()
    with Stubber(cw) as stub:
        stub.add_client_error("get_metric_data", "AccessDenied", "not authorized", 403)
        report = read_metrics(Settings(), ["orders"], client=cw, now=NOW)
    assert report.error is not None and report.error.startswith("AccessDenied")
