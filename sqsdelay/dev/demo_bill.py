"""A CUR 2.0-shaped bill of the SQS requests the demo really made, so that its cost report
ends with the estimate next to a bill. Each line is one (queue, API) of the calls the
worker and the demo's own clients counted (`sqsdelay.aws.clients.observe`), priced at the
price list's first tier, as AWS would list them (no free tier, no discount)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqsdelay.cost.pricing import Pricing

ACCOUNT = "123456789012"


def cur_lines(
    calls: Counter[tuple[str, str]], start: datetime, pricing: Pricing, region: str
) -> list[dict[str, Any]]:
    """One CUR 2.0 line per (API, queue) with a queue; calls without one (DynamoDB,
    Scheduler) are left out: the demo's bill has SQS lines only."""
    import botocore.session

    sqs = set(botocore.session.get_session().get_service_model("sqs").operation_names)
    tier = pricing.sqs_tiers[0]
    lines: list[dict[str, Any]] = []
    for (api, queue), n in sorted(calls.items()):
        if not queue or api not in sqs:  # Scheduler's calls name their group instead
            continue
        fifo = queue.endswith(".fifo")
        per_million = tier.fifo_per_million if fifo else tier.standard_per_million
        cost = n * per_million / 1e6
        lines.append(
            {
                "identity_line_item_id": f"demo-{len(lines)}",
                "bill_billing_period_start_date": start.strftime("%Y-%m-01T00:00:00Z"),
                "line_item_usage_start_date": start,
                "line_item_usage_end_date": start + timedelta(hours=1),
                "line_item_product_code": "AWSQueueService",
                "line_item_resource_id": f"arn:aws:sqs:{region}:{ACCOUNT}:{queue}",
                "line_item_line_item_type": "Usage",
                "line_item_usage_type": "Requests-FIFO-Tier1" if fifo else "Requests-Tier1",
                "line_item_operation": api,
                "line_item_usage_amount": float(n),
                "line_item_unblended_cost": cost,
                "line_item_currency_code": pricing.currency,
                "pricing_public_on_demand_cost": cost,
            }
        )
    return lines


def write_bill(path: Path, lines: list[dict[str, Any]]) -> Path:
    import pandas as pd

    frame = pd.DataFrame(lines)
    for column in ("line_item_usage_start_date", "line_item_usage_end_date"):
        frame[column] = pd.to_datetime(frame[column], utc=True).dt.floor("us")
    frame.to_parquet(path, coerce_timestamps="us")  # Spark reads no nanoseconds
    return path
