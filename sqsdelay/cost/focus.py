"""The estimate as FOCUS 1.2 rows, to sit next to a FOCUS export of the bill.

Columns are FOCUS's own (https://focus.finops.org/focus-specification/v1-2/), with
`x_Estimate` true on every row: these are sqsdelay's estimate, not charges. One row per
destination, usage month and resource: the delay queue's FIFO requests (batched worker
and idle polling), the hand-overs' standard requests on the destination queue (a FIFO
destination's: on its staging queue, with the forwards' receives, deletes and long polls,
and the forwards' FIFO requests on the destination), parked messages' Scheduler
invocations, and, with
the registry on, its DynamoDB request units per month. List prices are the price list's first tier.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Any

from sqsdelay.core import queue_names, tags
from sqsdelay.core.queue_trios import Role, handover_queue
from sqsdelay.cost.pricing import Pricing

COLUMNS = [
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ServiceName",
    "ResourceId",
    "PricingQuantity",
    "PricingUnit",
    "ListUnitPrice",
    "ListCost",
    "BillingCurrency",
    "Tags",
    "x_Estimate",
]
FILE = "estimate-focus.csv"  # next to a FOCUS export of the bill
ORDER = ["ChargePeriodStart", "ServiceName", "ResourceId", "PricingUnit"]
SQS, DYNAMODB = "Amazon Simple Queue Service", "Amazon DynamoDB"
SCHEDULER = "Amazon EventBridge"  # Scheduler bills under EventBridge


@functools.lru_cache(maxsize=4096)  # a month per row: a few distinct ones, many rows
def _period(month: str) -> tuple[str, str]:
    start = datetime.strptime(month, "%Y-%m").replace(tzinfo=UTC)
    end = start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    return start.isoformat().replace("+00:00", "Z"), end.isoformat().replace("+00:00", "Z")


def focus_rows(
    requests: Any, registry_units: Any, pricing: Pricing, registry_table: str | None
) -> Any:
    """`requests`: indexed by (destination, month), columns `fifo` (the delay queue's),
    `destination_fifo` (a FIFO destination's own), `standard` (the hand-overs; a FIFO
    destination's staging queue) and `invocations` (parked messages'); `registry_units`:
    indexed by month, columns `writes` and `reads`, priced only with a `registry_table`
    (SQSDELAY_REGISTRY=dynamodb)."""
    import pandas as pd

    rows: list[tuple[Any, ...]] = []

    def add(month: str, service: str, resource: str, quantity: float, unit: str,
            per_million: float, tagged: str) -> None:  # fmt: skip
        if quantity <= 0:
            return
        start, end = _period(month)
        price = per_million / 1e6
        rows.append((start, end, service, resource, quantity, unit, price, quantity * price,
                     pricing.currency, tagged, True))  # fmt: skip

    tier = pricing.sqs_tiers[0]

    @functools.cache  # per destination, not per row
    def tagged(component: tags.Component, destination: str | None = None) -> str:
        # as the installer tags the resource, and as Spark writes the JSON
        return json.dumps(tags.tags(component, destination), sort_keys=True, separators=(",", ":"))

    @functools.cache
    def queues(destination: str) -> tuple[str, Role, str]:
        role, standard_queue = handover_queue(destination)
        return queue_names.delay_queue_of(destination), role, standard_queue

    has_destination_fifo = "destination_fifo" in requests.columns
    for (destination, month), r in zip(
        requests.index, requests.itertuples(index=False), strict=True
    ):
        queue, role, standard_queue = queues(destination)
        add(month, SQS, queue, float(r.fifo), "Requests", tier.fifo_per_million,
            tagged(tags.queue_component("delay"), destination))  # fmt: skip
        add(month, SQS, standard_queue, float(r.standard), "Requests",
            tier.standard_per_million, tagged(tags.queue_component(role), destination))  # fmt: skip
        add(month, SQS, destination, float(r.destination_fifo if has_destination_fifo else 0.0),
            "Requests", tier.fifo_per_million,
            tagged(tags.queue_component("destination"), destination))  # fmt: skip
        add(month, SCHEDULER, destination, float(r.invocations), "Invocations",
            pricing.scheduler_per_million, tagged("schedule-group", destination))  # fmt: skip
    if registry_table is not None:
        for month, r in registry_units.iterrows():
            add(month, DYNAMODB, registry_table, float(r["writes"]), "Write Request Units",
                pricing.dynamodb_write_per_million, tagged("registry"))  # fmt: skip
            add(month, DYNAMODB, registry_table, float(r["reads"]), "Read Request Units",
                pricing.dynamodb_read_per_million, tagged("registry"))  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(ORDER, ignore_index=True)
