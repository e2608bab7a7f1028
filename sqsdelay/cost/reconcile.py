"""The estimate next to the bill: per destination and month, what the estimate says, what
the bill's lines cost at list price and as billed, and notes on what cannot be matched.
"""

from __future__ import annotations

from typing import Any

from sqsdelay.cost.money import money, round_money
from sqsdelay.cost.pricing import Pricing
from sqsdelay.errors import InvalidInput


def reconcile(
    by_dest_month: Any, rows: Any, bill: Any, pricing: Pricing
) -> tuple[list[dict[str, Any]], list[str]]:
    """Per destination and month: the estimate of its delay-queue component's requests
    (the delay queue's, and a FIFO destination's staging queue's) next to the bill's lines
    of those queues (at public prices, and as paid). The registry's and the schedule
    group's lines get rows of their own."""
    if bill is None:
        return [], []
    import pandas as pd

    from sqsdelay.cost import bill as b

    currencies = sorted(set(bill["currency"].dropna()))
    if currencies and currencies != [pricing.currency]:
        raise InvalidInput(
            f"the bill is in {', '.join(currencies)} and the estimate in {pricing.currency}: "
            f"give --currency {currencies[0]} --exchange-rate RATE ({currencies[0]} per "
            f"{pricing.currency} of the price list)"
        )
    notes = []
    queues = bill[bill["component"] == b.DELAY_QUEUE]
    if queues.empty:
        notes.append(
            "The bill has no delay queue lines (names ending in -delay.fifo): check the "
            "export's period and that it includes resource ids."
        )
    estimated = by_dest_month[["delays_cost", "delays_requests"]].rename(
        columns={"delays_cost": "estimated_usd", "delays_requests": "estimated"}
    )
    own = bill[bill["component"].isin([b.DELAY_QUEUE, b.REGISTRY, b.SCHEDULE_GROUP])]
    billed = own.groupby(["destination", "month"])[["list", "billed", "requests"]].sum()
    if (bill["component"] == b.REGISTRY).any():  # the registry's estimate, where it is billed
        registry = rows.groupby("month")["registry_cost"].sum()
        registry.index = pd.MultiIndex.from_tuples(
            [("(registry)", m) for m in registry.index], names=["destination", "month"]
        )
        estimated = pd.concat([estimated, registry.rename("estimated_usd").to_frame()])
    table = billed.join(estimated, how="outer").fillna(0.0).sort_index()
    rows_out = [
        {
            "destination": d,
            "month": m,
            "estimated_usd": round_money(float(r["estimated_usd"])),
            "list_usd": round_money(float(r["list"])),
            "billed_usd": round_money(float(r["billed"])),
            "variance_usd": round_money(float(r["list"] - r["estimated_usd"])),
            # SQS requests (the delay and staging queues'), where both sides count them
            "estimated_requests": round(float(r["estimated"])),
            "billed_requests": round(float(r["requests"])),
        }
        for (d, m), r in table.iterrows()
    ]
    if rows_out:
        worst = max(rows_out, key=lambda r: abs(r["variance_usd"]))
        notes.append(
            f"Largest variance: {worst['destination']} in {worst['month']}, the bill lists "
            f"{money(worst['list_usd'], pricing.currency)} at public prices against an "
            f"estimate of {money(worst['estimated_usd'], pricing.currency)}. The model sees "
            "only sqsdelay's own requests: other consumers or producers of the same queue, "
            "messages missing from the event log, the free tier and discounts (billed) all "
            "show here."
        )
    shared = bill[bill["component"] == b.DESTINATION_QUEUE]
    if not shared.empty:
        paid = money(float(shared["billed"].sum()), pricing.currency)
        notes.append(
            f"The destination queues' lines ({paid} billed) are not split: the hand-overs "
            "land there among the application's own traffic, so they are left out of the "
            "reconciliation."
        )
    loose = bill[bill["component"] == b.UNATTRIBUTED]
    if not loose.empty:
        notes.append(
            f"SQS lines without a resource id (credits, mostly: "
            f"{money(float(loose['billed'].sum()), pricing.currency)}) cannot be booked to a "
            "queue and are left out."
        )
    return rows_out, notes
