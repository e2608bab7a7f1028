"""Turning the small cost aggregate into tables, a JSON summary, a spreadsheet and a
self-contained HTML report with charts. Pure pandas on a few thousand rows at most; no Spark
here."""

from __future__ import annotations

import html
import io
import json
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqsdelay.cost import focus as focus_rows
from sqsdelay.cost.bands import BAND_ORDER
from sqsdelay.cost.job import Aggregate
from sqsdelay.cost.pricing import (
    REGISTRY_READ_UNITS_PER_HOP,
    REGISTRY_WRITE_UNITS,
    Pricing,
    Quantities,
    Requests,
    registry_cost,
    tiered_cost,
)
from sqsdelay.cost.running import Running, running_costs
from sqsdelay.errors import InvalidInput

MODELS = ["reference", "exact", "batched", "parked", "scheduler"]
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


def priced(agg: Any, p: Pricing, *, cycle_seconds: int, batch_fill: int) -> Any:
    """The aggregate's summed quantities priced: requests and cost of every model per row
    (first-tier list prices)."""
    df = agg.copy()
    q = Quantities(**{f.name: df[f.name] for f in fields(Quantities)})
    r = Requests.of(q, cycle_seconds=cycle_seconds, batch_fill=batch_fill)
    for f in fields(Requests):
        df[f.name] = getattr(r, f.name)
    df["delayed_messages"] = df["routed"]
    df["reference_requests"] = df["reference_ops"]
    df["reference_cost"] = df["reference_ops"] * p.fifo_price
    # FIFO requests on a FIFO destination itself (its forwards), beside the delay queue's
    df["estimated_destination_fifo"] = df["batched_destination_fifo"]
    for model in ("exact", "batched"):
        fifo = df[f"{model}_fifo"] + df[f"{model}_destination_fifo"]
        df[f"{model}_requests"] = fifo + df[f"{model}_standard"]
        df[f"{model}_cost"] = fifo * p.fifo_price + df[f"{model}_standard"] * p.standard_price
    parked_fifo = df["parked_fifo"] + df["batched_destination_fifo"]
    df["parked_requests"] = parked_fifo + df["parked_standard"] + df["parked_invocations"]
    df["parked_cost"] = (
        parked_fifo * p.fifo_price
        + df["parked_standard"] * p.standard_price
        + df["parked_invocations"] * p.scheduler_price
    )
    df["registry_cost"] = registry_cost(df["registry_writes"], df["registry_reads"], p)
    df["parked_registry_cost"] = registry_cost(
        df["registry_writes"], df["parked_registry_reads"], p
    )
    # The estimate follows the route each message took: parked ones as the parked model
    # prices them (a Scheduler invocation and one pass), the others as the batched worker.
    parked = df["parked_route"].astype(bool)
    for part in ("fifo", "standard"):
        df[f"estimated_{part}"] = df[f"parked_{part}"].where(parked, df[f"batched_{part}"])
    df["estimated_invocations"] = df["parked_invocations"].where(parked, 0.0)
    df["scheduler_requests"] = (
        df["scheduler_invocations"] + df["scheduler_standard"] + df["scheduler_fifo"]
    )
    df["scheduler_cost"] = (
        df["scheduler_invocations"] * p.scheduler_price
        + df["scheduler_standard"] * p.standard_price
        + df["scheduler_fifo"] * p.fifo_price
    )
    return df


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
    "estimated_invocations",
] + [f"{m}_{x}" for m in MODELS for x in ("requests", "cost")]
PRICED_KINDS = ("scheduled", "carried_over")
FREE_TIERS = ("sqs", "scheduler")


def round_money(x: float) -> float:
    """Cents, or 4 decimals below one cent: no float noise shown as money."""
    if x != x:  # NaN
        return x
    return round(x, 4) if abs(x) < 0.01 else round(x, 2)


def _free_scheduler(invocations: Any, pricing: Pricing, free: frozenset[str]) -> Any:
    """Scheduler invocations billed after the account's free tier (when applied), per month."""
    if "scheduler" not in free:
        return invocations
    return (invocations - pricing.scheduler_free_invocations_per_month).clip(lower=0)


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

    unknown = set(free_tier) - set(FREE_TIERS)
    if unknown:
        raise InvalidInput(f"--free-tier takes {' or '.join(FREE_TIERS)}, not {sorted(unknown)}")
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
    fifo_price = pricing.fifo_price
    by_dest_month = per_destination.groupby(["destination", "month"])[SUMS].sum()
    by_dest_month = by_dest_month.join(agg.idle, how="outer").fillna(0.0)
    # the delay queue's idle long polls (FIFO) and a FIFO destination's staging queue's
    by_dest_month["idle_poll_cost"] = (
        by_dest_month["idle_poll_requests"] * fifo_price
        + by_dest_month["staging_poll_requests"] * pricing.standard_price
    )
    # The delay queue's own requests (FIFO), like for like with its lines in a bill.
    by_dest_month["delay_queue_requests"] = (
        by_dest_month["estimated_fifo"] + by_dest_month["idle_poll_requests"]
    )
    by_dest_month["delay_queue_cost"] = by_dest_month["delay_queue_requests"] * fifo_price
    by_month = by_dest_month.groupby(level="month").sum()
    by_month["estimated_cost"] = _estimated(by_month, pricing, free_tier)
    by_destination = by_dest_month.groupby(level="destination").sum()
    by_destination = by_destination.sort_values("batched_cost", ascending=False)
    by_band = (
        rows.groupby("band")[SUMS].sum().reindex([b for b in BAND_ORDER if b in set(rows["band"])])
    )
    hist = rows.groupby("bucket")["messages"].sum().sort_index()
    histogram = hist.rename("messages").to_frame()
    histogram.index = [f"{human(2 ** int(b))}–{human(2 ** (int(b) + 1))}" for b in hist.index]
    histogram.index.name = "delay"
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
        model: float(
            (
                by_month[f"{model}_invocations"]
                - _free_scheduler(by_month[f"{model}_invocations"], pricing, free_tier)
            ).sum()
        )
        * pricing.scheduler_price
        for model in ("parked", "scheduler")
    }
    reconciliation, bill_notes = _reconcile(by_dest_month, rows, agg.bill, pricing)
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
    sqs_free = (
        f"the account's SQS free tier of {pricing.free_requests_per_month:,} requests a month "
        "is applied (FIFO first)"
        if "sqs" in free_tier
        else "no free tier (incremental cost: the account's free tier is shared with "
        "everything else in it; --free-tier sqs applies it)"
    )
    assumptions = [
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
        focus = focus_rows.focus_rows(requests, units, pricing, registry_table)
    else:
        assumptions.append(
            f"The tables name the {destinations - agg.folded:,} destinations with the largest "
            f"estimate (or bill); the other {agg.folded:,} are summed in one row a month. "
            "estimate-focus.csv has every destination by name (--top-destinations N)."
        )
    return Report(tables, summary, assumptions, focus)


def _estimated(by_month: Any, pricing: Pricing, free_tier: frozenset[str]) -> Any:
    """Each usage month's estimate, for the route each message took: the FIFO and standard
    requests and the idle polls through the volume tiers, and parked messages' Scheduler
    invocations; the account's free tiers only when asked."""
    fifo = (
        by_month["estimated_fifo"]
        + by_month["estimated_destination_fifo"]
        + by_month["idle_poll_requests"]
    )
    standard = by_month["estimated_standard"] + by_month["staging_poll_requests"]
    invocations = by_month["estimated_invocations"]
    scheduler = _free_scheduler(invocations, pricing, free_tier) * pricing.scheduler_price
    free = pricing.free_requests_per_month if "sqs" in free_tier else 0
    return [
        tiered_cost(float(fifo[m]), float(standard[m]), pricing, free=free) + float(scheduler[m])
        for m in by_month.index
    ]


def _reconcile(
    by_dest_month: Any, rows: Any, bill: Any, pricing: Pricing
) -> tuple[list[dict[str, Any]], list[str]]:
    """Per destination and month: the estimate of the delay queue's requests next to the
    bill's lines of that queue (at public prices, and as paid). The registry's and the
    schedule group's lines get rows of their own."""
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
    estimated = by_dest_month[["delay_queue_cost", "delay_queue_requests"]].rename(
        columns={"delay_queue_cost": "estimated_usd", "delay_queue_requests": "estimated"}
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
            # SQS requests (the delay queue's), where both sides count them
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


def comparison(summary: dict[str, Any]) -> str:
    """One sentence: which way is cheapest for this workload, and by how much."""
    best, second, *_ = summary["options"]
    cur = summary["currency"]
    if second["cost"] <= 0:
        return f"Every option costs {money(0, cur)} for this workload."
    saving = second["cost"] - best["cost"]
    return (
        f"For this workload {best['title']} is the cheapest at {money(best['cost'], cur)}: "
        f"{money(saving, cur)} ({saving / second['cost']:.0%}) less than the next cheapest, "
        f"{second['title']} ({money(second['cost'], cur)}), list prices, idle polling included."
    )


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


def reconciliation_table(summary: dict[str, Any]) -> Any:
    """The reconciliation as a terminal table (rich), for the CLI and the demo."""
    from rich.table import Table

    table = Table(title=f"estimate next to the bill ({summary['currency']})")
    columns = ("estimated", "bill at list", "billed", "variance", "requests est.", "billed")
    for col in ("destination", "month", *columns):
        table.add_column(col, justify="left" if col in ("destination", "month") else "right")
    for r in summary["reconciliation"]:
        amounts = (r["estimated_usd"], r["list_usd"], r["billed_usd"], r["variance_usd"])
        requests = (r["estimated_requests"], r["billed_requests"])
        table.add_row(
            r["destination"],
            r["month"],
            *(_cell(x, MONEY) for x in amounts),
            *(f"{n:,}" for n in requests),
        )
    return table


def money(x: float, currency: str) -> str:
    """The report's one money format: two decimals with thousands separators."""
    return f"{x:,.2f} {currency}"


def unit_money(x: float, currency: str, unit: str) -> str:
    """A unit cost too small for cents, as a cost per million units."""
    return (
        money(x, currency) if abs(x) >= 0.01 else f"{money(x * 1e6, currency)} per million {unit}"
    )


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg") :]


def charts(report: Report) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import FuncFormatter

    cur = report.summary["currency"]
    thousands = FuncFormatter(lambda v, _: f"{v:,.0f}" if abs(v) >= 10 or v == 0 else f"{v:,.2f}")
    out = {}
    month = report.tables["by_month"]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    style: Any
    for model, style in (
        ("reference", "--"),
        ("exact", ":"),
        ("batched", "-"),
        ("parked", (0, (5, 1, 1, 1))),
        ("scheduler", "-."),
    ):
        ax.plot(
            month.index,
            month[f"{model}_cost"],
            linestyle=style,
            marker="o",
            label=MODEL_TITLES[model],
        )
    ax.bar(
        month.index, month["estimated_cost"], alpha=0.25, label="Estimated (batched + idle, tiers)"
    )
    ax.set_ylabel(cur)
    ax.yaxis.set_major_formatter(thousands)
    ax.set_title("Estimated cost per usage month")
    ax.tick_params(axis="x", labelrotation=45)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2, frameon=False)
    out["month"] = _svg(fig)
    plt.close(fig)

    dest = report.tables["by_destination"].head(15).iloc[::-1]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(dest) + 1.2))
    ax.barh(dest.index, dest["batched_cost"] + dest["idle_poll_cost"], color="#3b6ea5")
    ax.set_xlabel(cur)
    ax.xaxis.set_major_formatter(thousands)
    ax.set_title("Cost per destination (batched + idle polling, top 15)")
    out["destination"] = _svg(fig)
    plt.close(fig)

    hist = report.tables["delay_histogram"]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(range(len(hist)), hist["messages"], color="#6a994e")
    ax.set_xticks(range(len(hist)), hist.index, rotation=60, fontsize=7, ha="right")
    ax.set_ylabel("messages")
    ax.yaxis.set_major_formatter(thousands)
    ax.set_title("Delay histogram (powers of two)")
    out["histogram"] = _svg(fig)
    plt.close(fig)
    return out


# Columns of the HTML and spreadsheet tables: (column, heading, kind).
COUNT, MONEY, TEXT = "count", "money", "text"
VIEW = [
    ("month", "month", TEXT),
    ("messages", "messages", COUNT),
    ("delayed_messages", "delayed", COUNT),
    ("reference_cost", "reference", MONEY),
    ("exact_cost", "exact", MONEY),
    ("batched_cost", "batched", MONEY),
    ("parked_cost", "parked", MONEY),
    ("scheduler_cost", "Scheduler", MONEY),
    ("registry_cost", "registry (added)", MONEY),
    ("idle_poll_cost", "idle polling", MONEY),
    ("estimated_cost", "estimated", MONEY),
    ("estimated_usd", "estimated", MONEY),
    ("list_usd", "bill at list price", MONEY),
    ("billed_usd", "billed", MONEY),
    ("variance_usd", "variance (list − estimated)", MONEY),
    ("estimated_requests", "requests (estimated)", COUNT),
    ("billed_requests", "requests (billed)", COUNT),
]


def view(report: Report, name: str) -> list[tuple[str, str, str]]:
    df = report.tables[name]
    return [c for c in VIEW if c[0] in df.columns] if name != "models" else []


def _cell(value: Any, kind: str) -> str:
    if kind == TEXT:
        return html.escape(str(value))
    if value != value:  # NaN
        return ""
    if kind == COUNT:
        return f"{value:,.0f}"
    return f"{value:,.4f}" if 0 < abs(value) < 0.01 else f"{value:,.2f}"


def html_table(report: Report, name: str, label: str) -> str:
    """A table with formatted numbers and a totals row; the index becomes the first column."""
    df = report.tables[name]
    cols = view(report, name)
    cur = report.summary["currency"]
    head = "".join(
        f"<th class=n>{html.escape(h)}{f' ({cur})' if k == MONEY else ''}</th>" for _, h, k in cols
    )
    body = [
        f"<tr><td>{html.escape(str(i))}</td>"
        + "".join(f"<td class=n>{_cell(row[c], k)}</td>" for c, _, k in cols)
        + "</tr>"
        for i, row in df.iterrows()
    ]
    total = (
        "<tr class=total><td>total</td>"
        + "".join(
            f"<td class=n>{_cell(round_money(float(df[c].sum())), k) if k != TEXT else ''}</td>"
            for c, _, k in cols
        )
        + "</tr>"
    )
    return (
        f"<table><thead><tr><th>{html.escape(label)}</th>{head}</tr></thead>"
        f"<tbody>{''.join(body)}{total}</tbody></table>"
    )


def _cards(s: dict[str, Any]) -> str:
    cur = s["currency"]
    free = ", ".join(s["free_tier"]) or "none"
    inputs = s["input"]
    per_message = unit_money(s["cost_per_delayed_message"], cur, "delayed messages")
    average = money(s["average_monthly_estimated_cost"], cur)
    return f"""<div class=cards>
<div class=card>Average monthly estimate<b>{average}</b>batched worker, idle polling, volume
tiers; free tier: {html.escape(free)}</div>
<div class=card>Estimated cost per delayed message<b>{per_message}</b>batched, list price</div>
<div class=card>Input<b>{inputs["scheduled"]:,}</b>records, {inputs["carried_over"]:,} messages
carried over; {inputs["other_events"]:,} other events and {inputs["malformed"]:,} malformed
lines skipped</div>
</div>"""


RUNNING_TITLES = {
    "logs_ingestion": "CloudWatch Logs ingestion (events and EMF lines)",
    "kms": "KMS requests (customer key)",
    "registry_storage": "registry storage",
    "registry_backups": "registry point-in-time recovery",
    "worker_compute": "worker compute",
}


def running_lines(summary: dict[str, Any]) -> list[tuple[str, float]]:
    """The cost of running as (title, amount), for the HTML and the CLI."""
    return [(RUNNING_TITLES[k], v) for k, v in summary["cost_of_running"].items()]


def _running_html(report: Report) -> str:
    s = report.summary
    inputs = s["running_inputs"]
    worker = (
        f"ECS: {inputs['ecs_tasks']:g} task(s) of {inputs['ecs_cpu_units']} CPU units and "
        f"{inputs['ecs_memory_mb']} MB"
        if inputs["worker"] == "ecs"
        else f"Lambda: {inputs['lambda_memory_mb']} MB, "
        f"{inputs['lambda_seconds_per_invocation']:g} s a batch"
    )
    rows = "".join(
        f"<tr><td>{html.escape(t)}</td><td class=n>{_cell(v, MONEY)}</td></tr>"
        for t, v in running_lines(s)
    )
    return (
        f"<h2>Cost of running (estimated, for the window)</h2><p>{html.escape(worker)}; "
        f"KMS {'on' if inputs['kms'] else 'off'}. Change with --running FILE.</p>"
        f"<table><thead><tr><th>line</th><th class=n>cost ({s['currency']})</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _reconciliation_html(report: Report) -> str:
    s = report.summary
    if "reconciliation" not in report.tables:
        return ""
    notes = "".join(f"<p>{html.escape(n)}</p>" for n in s["bill_notes"])
    return (
        "<h2>Estimate next to the bill</h2>"
        + notes
        + html_table(report, "reconciliation", "destination")
    )


def render_html(report: Report) -> str:
    s = report.summary
    cur = s["currency"]
    pics = charts(report)
    models = "".join(
        f"<tr><td>{html.escape(m['title'])}</td><td class=n>{m['requests']:,.0f}</td>"
        f"<td class=n>{_cell(m['cost'], MONEY)}</td></tr>"
        for m in s["models"]
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sqsdelay cost report</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2rem auto;max-width:62rem;padding:0 1rem;
color:#222}}
h1{{margin-bottom:.2rem}} .muted{{color:#666}} .lead{{font-size:1.05rem}}
.cards{{display:flex;flex-wrap:wrap;gap:1rem;margin:1rem 0}}
.card{{flex:1 1 14rem;border:1px solid #ddd;border-radius:8px;padding:1rem}}
.card b{{display:block;font-size:1.5rem;margin:.2rem 0}}
table{{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.8rem;width:100%;
table-layout:fixed}}
td,th{{padding:.25rem .4rem;border-bottom:1px solid #eee;text-align:left;
overflow-wrap:anywhere}}
th{{vertical-align:bottom}} .n{{text-align:right;font-variant-numeric:tabular-nums}}
tr.total td{{font-weight:600;border-top:2px solid #999}}
svg{{max-width:100%;height:auto}}
</style></head><body>
<h1>Delayed delivery cost estimate</h1>
<p class=muted>{html.escape(s["source"])} · {s["messages"]:,} messages ({s["delayed_messages"]:,}
through delay queues) · {s["destinations"]:,} destinations · {len(s["months"])} months ·
generated {s["generated_at"]}</p>
{_cards(s)}
<p class=lead>{html.escape(comparison(s))}</p>
<p class=muted>Prices: {html.escape(s["prices"]["region"])}, effective
{s["prices"]["effective_date"]} ({", ".join(html.escape(u) for u in s["prices"]["sources"])}).
Window: {s["window"]["start"]} to {s["window"]["end"]}.</p>
{_reconciliation_html(report)}
{_running_html(report)}
<h2>Models side by side</h2>
<table><thead><tr><th>model</th><th class=n>requests</th>
<th class=n>estimated cost ({cur}, list price)</th></tr></thead><tbody>{models}</tbody>
</table>
<h2>Per usage month (estimated)</h2>{pics["month"]}{html_table(report, "by_month", "month")}
<h2>Per destination</h2>{pics["destination"]}
{html_table(report, "by_destination", "destination")}
<h2>Per delay band</h2>{html_table(report, "by_band", "band")}
<h2>Delays</h2>{pics["histogram"]}
<h2>Assumptions</h2><ul>{"".join(f"<li>{html.escape(a)}</li>" for a in report.assumptions)}</ul>
</body></html>
"""


def write_xlsx(report: Report, path: Path) -> Path:
    """One sheet per table, with number formats and a totals row (openpyxl)."""
    import pandas as pd

    formats = {COUNT: "#,##0", MONEY: "#,##0.00##"}
    with pd.ExcelWriter(path, engine="openpyxl") as writer:
        for name, table in report.tables.items():
            df = rounded(table)  # the totals row adds up what the sheet shows
            df.to_excel(writer, sheet_name=name)
            sheet = writer.sheets[name]
            columns = list(df.columns)
            total_row = len(df) + 2
            sheet.cell(row=total_row, column=1, value="total")
            for column, _, kind in view(report, name):
                col = columns.index(column) + 2
                if kind == TEXT:
                    continue
                total = float(df[column].sum())
                sheet.cell(row=total_row, column=col, value=round_money(total))
                for row in range(2, total_row + 1):
                    sheet.cell(row=row, column=col).number_format = formats[kind]
            sheet.column_dimensions["A"].width = 24
    return path


def rounded(df: Any) -> Any:
    """Money columns (`*_cost`, `*_usd`) rounded by `round_money`, for the files."""
    out = df.copy()
    for column in out.columns:
        if str(column).endswith(("_cost", "_usd")):
            out[column] = out[column].map(lambda x: round_money(float(x)))
    return out


def write(report: Report, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, df in report.tables.items():
        path = out_dir / f"{name}.csv"
        rounded(df).to_csv(path)
        written.append(path)
    summary = out_dir / "summary.json"
    summary.write_text(json.dumps({**report.summary, "assumptions": report.assumptions}, indent=2))
    page = out_dir / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    book = write_xlsx(report, out_dir / "report.xlsx")
    written += [summary, page, book]
    if report.focus is not None:  # next to a FOCUS export of the bill
        focus = out_dir / focus_rows.FILE
        report.focus.to_csv(focus, index=False)
        written.append(focus)
    return written
