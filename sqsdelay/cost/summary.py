"""The cost report's summary: the small aggregate, priced by `cost/money.py` (what requests
cost, which meet the tiers and the free tiers, how money is rounded), laid out in tables and
a JSON-ready summary (models, the options cheapest first, the months, the cost of running).
Pure pandas on a few thousand rows at most; rendering is `render/`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqsdelay.core import tags
from sqsdelay.core.queue_trios import Role
from sqsdelay.cost import focus as focus_rows
from sqsdelay.cost.bands import BAND_ORDER
from sqsdelay.cost.job import Aggregate
from sqsdelay.cost.money import (
    MODELS,
    Billed,
    check_free_tiers,
    free_invocations_cost,
    monthly_estimate,
    priced,
    round_money,
)
from sqsdelay.cost.operating_cost import Running, running_costs
from sqsdelay.cost.pricing import Pricing
from sqsdelay.cost.reconcile import reconcile
from sqsdelay.cost.request_counts import REGISTRY_READ_UNITS_PER_HOP, REGISTRY_WRITE_UNITS
from sqsdelay.errors import InvalidInput

MODEL_TITLES = {
    "reference": "Reference formula (C = N/900, O = 2C)",
    "exact": "Exact, unbatched (first send + k × receive/send/delete)",
    "batched": "Batched (this worker)",
    "parked": "Batched, parking long delays in EventBridge Scheduler",
    "scheduler": "EventBridge Scheduler (one schedule per message)",
}


# What a team can actually run (the reference formula is an estimate, not a way to run it).
OPTIONS = {
    "batched": "the batched worker",
    "exact": "an unbatched worker",
    "parked": "the batched worker with SQSDELAY_PARKING=scheduler",
    "scheduler": "EventBridge Scheduler",
}


@dataclass
class Report:
    tables: dict[str, Any]
    summary: dict[str, Any]
    assumptions: list[str] = field(default_factory=list)
    focus: Any = None  # the FOCUS rows, when few enough to be written here (`cost.focus`)


SUMS = [
    "messages",
    "delayed_messages",
    "delay_seconds",
    "cycles",
    "registry_cost",
    "parked_registry_cost",
    "batched_fifo",
    "parked_invocations",
    "scheduler_invocations",
    "estimated_fifo",
    "estimated_destination_fifo",
    "estimated_standard",
    "estimated_staging",
    "estimated_invocations",
] + [f"{m}_{x}" for m in MODELS for x in ("requests", "cost")]


PRICED_KINDS = ("scheduled", "carried_over")


def build(
    agg: Aggregate,
    pricing: Pricing,
    *,
    batch_fill: int,
    cycle_seconds: int,
    source: str,
    free_tier: frozenset[str] = frozenset(),
    registry_table: str | None = None,
    running: Running | None = None,
) -> Report:
    import pandas as pd

    check_free_tiers(free_tier)
    shape = agg.shape
    counts = {k: round(float(n)) for k, n in shape.groupby("kind")["messages"].sum().items()}
    scheduled = shape[shape["kind"].isin(PRICED_KINDS)]
    if scheduled.empty:
        raise InvalidInput(
            f"no delay.scheduled records in {source} (other events: {counts.get('other', 0)}, "
            f"malformed lines: {counts.get('malformed', 0)}); point --input at the sender's "
            "event log (SQSDELAY_LOG_FILE) or a CSV/Parquet file with the same columns"
        )
    rows = priced(scheduled, pricing, cycle_seconds=cycle_seconds, batch_fill=batch_fill)
    per_destination = priced(
        agg.destinations, pricing, cycle_seconds=cycle_seconds, batch_fill=batch_fill
    )
    start, end = agg.start, agg.end
    by_dest_month, by_month, by_destination = _by_destination_and_month(
        agg, per_destination, pricing, free_tier
    )
    by_band = (
        rows.groupby("band")[SUMS].sum().reindex([b for b in BAND_ORDER if b in set(rows["band"])])
    )
    histogram = _histogram(rows)
    totals = rows[SUMS].sum()
    models: list[dict[str, Any]] = [
        {
            "model": m,
            "title": MODEL_TITLES[m],
            "requests": float(totals[f"{m}_requests"]),
            "cost": float(totals[f"{m}_cost"]),
        }
        for m in MODELS
    ]
    idle_requests = float(
        by_month["idle_poll_requests"].sum() + by_month["staging_poll_requests"].sum()
    )
    idle_cost = float(by_month["idle_poll_cost"].sum())
    models.append(
        {
            "model": "idle_polling",
            "title": "Idle long polling (one per delay queue and staging queue)",
            "requests": idle_requests,
            "cost": idle_cost,
        }
    )
    delayed = round(float(totals["delayed_messages"]))
    monthly = {str(m): round_money(float(c)) for m, c in by_month["estimated_cost"].items()}
    free_invocations = {
        model: free_invocations_cost(by_month[f"{model}_invocations"], pricing, free_tier)
        for model in ("parked", "scheduler")
    }
    reconciliation, bill_notes = reconcile(by_dest_month, rows, agg.bill, pricing)
    destinations = len(by_destination) - (1 if agg.folded else 0) + agg.folded
    running_inputs = running or Running()
    running_cost = running_costs(
        running_inputs,
        pricing.running,
        window_seconds=(end - start).total_seconds(),
        destinations=destinations,
        event_lines=sum(counts.get(k, 0) for k in ("scheduled", "requeued", "other")),
        worker_batches=float(totals["batched_fifo"]) / 3,  # a receive, a send, a delete
        registry_item_seconds=float(rows["routed_delay"].sum())
        + float(totals["delayed_messages"]) * running_inputs.registry_ttl_days * 86_400,
        registry=registry_table is not None,
    )
    summary = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": source,
        "currency": pricing.currency,
        "prices": {
            "region": pricing.region,
            "effective_date": pricing.effective_date.isoformat(),
            "sources": pricing.sources,
        },
        "window": {
            "start": start.isoformat(timespec="seconds"),
            "end": end.isoformat(timespec="seconds"),
        },
        "free_tier": sorted(free_tier),
        "input": {
            "scheduled": int(counts.get("scheduled", 0)),
            "requeued": int(counts.get("requeued", 0)),
            "carried_over": int(counts.get("carried_over", 0)),
            "other_events": int(counts.get("other", 0)),
            "malformed": int(counts.get("malformed", 0)),
        },
        "messages": round(float(totals["messages"])),
        "delayed_messages": delayed,
        "destinations": destinations,
        # beyond the top destinations by cost, one row per month: "(other N destinations)"
        "destinations_folded": agg.folded,
        "months": list(by_month.index),
        "batch_fill": batch_fill,
        "cycle_seconds": cycle_seconds,
        "models": [{**m, "cost": round_money(m["cost"])} for m in models],
        "monthly_estimated_cost": monthly,
        "average_monthly_estimated_cost": round_money(float(by_month["estimated_cost"].mean())),
        "cost_per_delayed_message": (float(totals["batched_cost"]) / delayed if delayed else 0.0),
        "registry_cost": round_money(float(totals["registry_cost"])),
        "registry_cost_per_delayed_message": (
            float(totals["registry_cost"]) / delayed if delayed else 0.0
        ),
        "options": _options(totals, idle_cost, free_invocations),
        "reconciliation": reconciliation,
        "bill_notes": bill_notes,
        # for the window, not per destination: the inputs say how sqsdelay runs
        "cost_of_running": {k: round_money(v) for k, v in running_cost.items()},
        "running_inputs": running_inputs.model_dump(),
    }
    assumptions = _assumptions(
        pricing,
        free_tier,
        counts,
        cycle_seconds=cycle_seconds,
        batch_fill=batch_fill,
        start=start,
        end=end,
    )
    tables = {
        "by_destination": by_destination,
        "by_month": by_month,
        "by_band": by_band,
        "delay_histogram": histogram,
        "models": _models_frame(models),
    }
    if reconciliation:
        tables["reconciliation"] = pd.DataFrame(reconciliation).set_index("destination")
    focus = None
    if not agg.folded:  # few destinations: the FOCUS rows are made here (else Spark wrote them)
        focus = _focus(by_dest_month, rows, pricing, registry_table)
    else:
        assumptions.append(
            f"The tables name the {destinations - agg.folded:,} destinations with the largest "
            f"estimate (or bill); the other {agg.folded:,} are summed in one row a month. "
            "estimate-focus.csv has every destination by name (--top-destinations N)."
        )
    return Report(tables, summary, assumptions, focus)


def _by_destination_and_month(
    agg: Aggregate, per_destination: Any, pricing: Pricing, free_tier: frozenset[str]
) -> tuple[Any, Any, Any]:
    """The priced rows summed per destination and month, with each destination's idle
    polling and its delay queue's own requests; then per month and per destination."""
    by_dest_month = per_destination.groupby(["destination", "month"])[SUMS].sum()
    by_dest_month = by_dest_month.join(agg.idle, how="outer").fillna(0.0)
    # the delay queue's idle long polls (FIFO) and a FIFO destination's staging queue's
    by_dest_month["idle_poll_cost"] = Billed(
        by_dest_month["idle_poll_requests"], by_dest_month["staging_poll_requests"]
    ).cost(pricing)
    # The delay queue's own requests (FIFO), and a FIFO destination's staging queue's
    # (standard), each with its long polls.
    by_dest_month["delay_queue_requests"] = (
        by_dest_month["estimated_fifo"] + by_dest_month["idle_poll_requests"]
    )
    by_dest_month["staging_requests"] = (
        by_dest_month["estimated_staging"] + by_dest_month["staging_poll_requests"]
    )
    # Like for like with the bill's lines of the destination's delay-queue component: the
    # queues whose role is booked to it (`tags.queue_component`, as the installer tags them).
    queues: dict[Role, Billed] = {
        "delay": Billed(fifo=by_dest_month["delay_queue_requests"], standard=0.0),
        "staging": Billed(fifo=0.0, standard=by_dest_month["staging_requests"]),
    }
    by_dest_month["delay_queue_cost"] = queues["delay"].cost(pricing)
    booked = [r for r in queues if tags.queue_component(r) == tags.queue_component("delay")]
    by_dest_month["delays_requests"] = sum(queues[r].requests for r in booked)
    by_dest_month["delays_cost"] = sum(queues[r].cost(pricing) for r in booked)
    by_month = by_dest_month.groupby(level="month").sum()
    by_month["estimated_cost"] = monthly_estimate(by_month, pricing, free_tier)
    by_destination = by_dest_month.groupby(level="destination").sum()
    by_destination = by_destination.sort_values("batched_cost", ascending=False)
    return by_dest_month, by_month, by_destination


def _histogram(rows: Any) -> Any:
    """Messages per power-of-two delay bucket, labelled in human units."""
    hist = rows.groupby("bucket")["messages"].sum().sort_index()
    histogram = hist.rename("messages").to_frame()
    histogram.index = [f"{human(2 ** int(b))}–{human(2 ** (int(b) + 1))}" for b in hist.index]
    histogram.index.name = "delay"
    return histogram


def _focus(by_dest_month: Any, rows: Any, pricing: Pricing, registry_table: str | None) -> Any:
    """The FOCUS rows of the estimate, per destination and month."""
    import pandas as pd

    requests = pd.DataFrame(
        {
            "fifo": by_dest_month["delay_queue_requests"],
            "destination_fifo": by_dest_month["estimated_destination_fifo"],
            "standard": by_dest_month["estimated_standard"]
            + by_dest_month["staging_poll_requests"],
            "invocations": by_dest_month["estimated_invocations"],
        }
    ).fillna(0.0)
    units = rows.groupby("month")[["registry_writes", "registry_reads"]].sum()
    units.columns = ["writes", "reads"]
    return focus_rows.focus_rows(requests, units, pricing, registry_table)


def _assumptions(
    pricing: Pricing,
    free_tier: frozenset[str],
    counts: dict[str, int],
    *,
    cycle_seconds: int,
    batch_fill: int,
    start: datetime,
    end: datetime,
) -> list[str]:
    """What the estimate assumes, in words, for the page and summary.json."""
    sqs_free = (
        f"the account's SQS free tier of {pricing.free_requests_per_month:,} requests a month "
        "is applied (FIFO first)"
        if "sqs" in free_tier
        else "no free tier (incremental cost: the account's free tier is shared with "
        "everything else in it; --free-tier sqs applies it)"
    )
    return [
        f"Prices: {pricing.region}, effective {pricing.effective_date.isoformat()}, from "
        f"{', '.join(pricing.sources)}. Per million requests (first tier): FIFO "
        f"{pricing.sqs_tiers[0].fifo_per_million:g} {pricing.currency}, standard "
        f"{pricing.sqs_tiers[0].standard_per_million:g}, EventBridge Scheduler "
        f"{pricing.scheduler_per_million:g} (the first "
        f"{pricing.scheduler_free_invocations_per_month:,} invocations a month free, "
        f"{'applied' if 'scheduler' in free_tier else 'not applied; --free-tier scheduler'}).",
        f"Estimated monthly cost: the batched worker and idle polling, volume tiers, {sqs_free}.",
        "Usage months: a message's first send is booked to the month it was sent; its worker "
        "passes and hand-over are spread over the calendar months (UTC) of its delay by the "
        "share of the delay in each, as AWS bills them when they happen. Months after the "
        "input's window hold the rest of the window's messages' hops (a projection).",
        f"Messages still looping from before the window ({int(counts.get('carried_over', 0)):,}"
        "): found by the worker's delay.requeued events without a delay.scheduled in the "
        "window, priced from their first requeue in it.",
        f"A delay above {cycle_seconds} s goes through the FIFO delay queue: k = ceil(N / "
        f"{cycle_seconds}) − 1 worker passes, each a receive, a send and a delete, plus the "
        "first send; the last send is the hand-over to the standard destination.",
        f"Batched: the worker's receive, send and delete calls carry {batch_fill} messages on "
        "average; each call is billed per started "
        f"{pricing.billing_chunk_bytes // 1024} KiB of its payload.",
        "The reference formula (NServiceBus documentation) counts two FIFO operations per "
        "900 s and ignores the first send, deletes, the hand-over and payload size.",
        f"Idle polling: one 20 s long poll at a time per delay queue, from the destination's "
        f"first message in the window ({start:%Y-%m-%d %H:%M} UTC at the earliest) to the "
        f"window's end ({end:%Y-%m-%d %H:%M} UTC), prorated by month.",
        "EventBridge Scheduler: one one-time schedule per delayed message, which sends the "
        "message to the destination when due (one standard send).",
        f"The registry (SQSDELAY_REGISTRY=dynamodb) adds, per delayed message, "
        f"{REGISTRY_WRITE_UNITS} DynamoDB write request units and "
        f"{REGISTRY_READ_UNITS_PER_HOP} read units per worker pass, at on-demand prices "
        f"({pricing.dynamodb_write_per_million:g} and {pricing.dynamodb_read_per_million:g} "
        f"{pricing.currency} per million): the registry column, on top of the batched worker.",
        "Cost of running (for the window, not in the per-destination estimate): CloudWatch "
        "Logs ingestion of the input's event lines and one EMF line per destination a "
        "minute, KMS requests when the queues use a customer key (one per queue, sender and "
        "worker every data key reuse period), the registry's storage and point-in-time "
        "backups (its records, until 14 days after due), and the worker's compute (Fargate "
        "task size and count, or Lambda memory and time per batch); inputs in summary.json "
        "`running_inputs` (defaults from infra/, --running FILE).",
    ]


def _options(
    totals: Any, idle_cost: float, free_invocations: dict[str, float]
) -> list[dict[str, Any]]:
    """The ways to run this workload, cheapest first, at list price (a worker polls too),
    less the Scheduler invocations inside its free tier when that is applied."""
    costs = {
        "batched": float(totals["batched_cost"]) + idle_cost,
        "parked": float(totals["parked_cost"]) + idle_cost - free_invocations["parked"],
        "exact": float(totals["exact_cost"]) + idle_cost,
        "scheduler": float(totals["scheduler_cost"]) - free_invocations["scheduler"],
    }
    return [
        {"model": m, "title": OPTIONS[m], "cost": round_money(c)}
        for m, c in sorted(costs.items(), key=lambda kv: kv[1])
    ]


def human(seconds: float) -> str:
    """A duration in the largest unit that keeps it at least 1: 90 -> '1.5 min'."""
    value, unit = seconds, "s"
    for name, size in (("d", 86_400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            value, unit = seconds / size, name
            break
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"


def _models_frame(models: list[dict[str, Any]]) -> Any:
    import pandas as pd

    return pd.DataFrame(models).set_index("model")
