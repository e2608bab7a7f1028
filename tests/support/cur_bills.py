"""A small AWS bill for the cost tests: the same lines as a CUR 2.0 export and as a FOCUS 1.2
export."""

from __future__ import annotations

import pandas as pd

ACCOUNT = "arn:aws:sqs:us-east-1:123456789012"


TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table"


# (start, product, resource, type, usage type, public, unblended, net): a delay queue in two
# months, its destination queue, an unrelated queue, a credit and a tax line without a
# resource id, the registry's table and another table.
LINES = [
    ("2026-01-10", "AWSQueueService", f"{ACCOUNT}:orders-delay.fifo", "Usage",
     "USE1-Requests-FIFO-Tier1", 0.30, 0.30, 0.27),
    ("2026-01-20", "AWSQueueService", f"{ACCOUNT}:orders-delay.fifo", "Usage",
     "USE1-Requests-FIFO-Tier1", 0.20, 0.20, None),
    ("2026-02-05", "AWSQueueService", f"{ACCOUNT}:orders-delay.fifo", "Usage",
     "USE1-Requests-FIFO-Tier1", 0.50, 0.50, 0.45),
    ("2026-01-10", "AWSQueueService", f"{ACCOUNT}:orders", "Usage",
     "USE1-Requests-Tier1", 1.00, 1.00, 0.90),
    ("2026-01-10", "AWSQueueService", f"{ACCOUNT}:payroll", "Usage",
     "USE1-Requests-Tier1", 5.00, 5.00, 5.00),
    ("2026-01-31", "AWSQueueService", "", "Credit", "USE1-Requests-Tier1", 0.0, -0.40, -0.40),
    ("2026-01-31", "AWSQueueService", "", "Tax", "USE1-Requests-Tier1", 0.0, 0.10, 0.10),
    ("2026-01-15", "AmazonDynamoDB", f"{TABLE}/sqsdelay-scheduled", "Usage",
     "USE1-WriteRequestUnits", 0.05, 0.05, 0.05),
    ("2026-01-15", "AmazonDynamoDB", f"{TABLE}/other", "Usage",
     "USE1-WriteRequestUnits", 9.00, 9.00, 9.00),
]  # fmt: skip


def cur2(currency: str = "USD") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "identity_line_item_id": f"li-{i}",
                "bill_billing_period_start_date": f"{start[:7]}-01T00:00:00Z",
                "line_item_usage_start_date": f"{start}T00:00:00Z",
                "line_item_usage_end_date": f"{start}T01:00:00Z",
                "line_item_product_code": product,
                "line_item_resource_id": resource,
                "line_item_line_item_type": kind,
                "line_item_usage_type": usage,
                "line_item_operation": "SendMessage",
                "line_item_usage_amount": 1000.0,
                "line_item_unblended_cost": paid,
                "line_item_net_unblended_cost": net,
                "line_item_currency_code": currency,
                "pricing_public_on_demand_cost": public,
            }
            for i, (start, product, resource, kind, usage, public, paid, net) in enumerate(LINES)
        ]
    )


def focus(currency: str = "USD") -> pd.DataFrame:
    category = {"Usage": "Usage", "Credit": "Credit", "Tax": "Tax"}
    return pd.DataFrame(
        [
            {
                "ChargePeriodStart": f"{start}T00:00:00Z",
                "ChargePeriodEnd": f"{start}T01:00:00Z",
                "ChargeCategory": category[kind],
                "ServiceName": "Amazon Simple Queue Service",
                "ResourceId": resource or None,
                "ListCost": public,
                "BilledCost": paid if net is None else net,
                "EffectiveCost": paid if net is None else net,
                "BillingCurrency": currency,
                "ConsumedQuantity": 1000.0,
                "x_ServiceCode": product,
                "x_UsageType": usage,
            }
            for start, product, resource, kind, usage, public, paid, net in LINES
        ]
    )
