"""Turning the small cost aggregate into tables, a JSON summary and a self-contained HTML
report with charts. Pure pandas on a few thousand rows at most; no Spark here."""

from __future__ import annotations

import html
import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqsdelay.cost_job import BAND_ORDER
from sqsdelay.errors import InvalidInput
from sqsdelay.pricing import Pricing, idle_polls_per_month, tiered_cost

MODELS = ["reference", "exact", "batched", "scheduler"]
MODEL_TITLES = {
    "reference": "Reference formula (C = N/900, O = 2C)",
    "exact": "Exact, unbatched (first send + k × receive/send/delete)",
    "batched": "Batched (this worker)",
    "scheduler": "EventBridge Scheduler (one schedule per message)",
}


@dataclass
class Report:
    tables: dict[str, Any]
    summary: dict[str, Any]
    assumptions: list[str] = field(default_factory=list)


def _costs(df: Any, p: Pricing) -> Any:
    """Add request and cost columns per model (first-tier list prices)."""
    df = df.copy()
    df["reference_requests"] = df["reference_ops"]
    df["reference_cost"] = df["reference_ops"] * p.fifo_price
    for model in ("exact", "batched"):
        df[f"{model}_requests"] = df[f"{model}_fifo"] + df[f"{model}_standard"]
        df[f"{model}_cost"] = (
            df[f"{model}_fifo"] * p.fifo_price + df[f"{model}_standard"] * p.standard_price
        )
    df["scheduler_requests"] = df["scheduler_invocations"] + df["scheduler_standard"]
    df["scheduler_cost"] = (
        df["scheduler_invocations"] * p.scheduler_price
        + df["scheduler_standard"] * p.standard_price
    )
    return df


SUMS = ["messages", "delayed_messages", "delay_seconds", "cycles"] + [
    f"{m}_{x}" for m in MODELS for x in ("requests", "cost")
]


def build(
    agg: Any, pricing: Pricing, *, batch_fill: int, cycle_seconds: int, source: str
) -> Report:
    counts = agg.groupby("kind")["messages"].sum().to_dict()
    scheduled = agg[agg["kind"] == "scheduled"]
    if scheduled.empty:
        raise InvalidInput(
            f"no delay.scheduled records in {source} (other events: {counts.get('other', 0)}, "
            f"malformed lines: {counts.get('malformed', 0)}); point --input at the sender's "
            "event log (SQSDELAY_LOG_FILE) or a CSV/Parquet file with the same columns"
        )
    rows = _costs(scheduled, pricing)
    idle = idle_polls_per_month()
    by_month = rows.groupby("month")[SUMS].sum()
    active = rows.groupby("month")["destination"].nunique()
    by_month["idle_poll_requests"] = active * idle
    by_month["idle_poll_cost"] = by_month["idle_poll_requests"] * pricing.fifo_price
    fifo = rows.groupby("month")["batched_fifo"].sum() + by_month["idle_poll_requests"]
    standard = rows.groupby("month")["batched_standard"].sum()
    by_month["billed_cost"] = [
        tiered_cost(float(fifo[m]), float(standard[m]), pricing) for m in by_month.index
    ]
    by_destination = rows.groupby("destination")[SUMS].sum()
    months_active = rows.groupby("destination")["month"].nunique()
    by_destination["idle_poll_requests"] = months_active * idle
    by_destination["idle_poll_cost"] = by_destination["idle_poll_requests"] * pricing.fifo_price
    by_destination = by_destination.sort_values("batched_cost", ascending=False)
    by_band = (
        rows.groupby("band")[SUMS].sum().reindex([b for b in BAND_ORDER if b in set(rows["band"])])
    )
    hist = rows.groupby("bucket")["messages"].sum().sort_index()
    histogram = hist.rename("messages").to_frame()
    histogram.index = [f"{human(2 ** int(b))}–{human(2 ** (int(b) + 1))}" for b in hist.index]
    histogram.index.name = "delay"
    totals = rows[SUMS].sum()
    models = [
        {
            "model": m,
            "title": MODEL_TITLES[m],
            "requests": float(totals[f"{m}_requests"]),
            "cost": float(totals[f"{m}_cost"]),
        }
        for m in MODELS
    ]
    idle_requests = float(by_month["idle_poll_requests"].sum())
    models.append(
        {
            "model": "idle_polling",
            "title": "Idle long polling (one per delay queue)",
            "requests": idle_requests,
            "cost": idle_requests * pricing.fifo_price,
        }
    )
    delayed = int(totals["delayed_messages"])
    summary = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": source,
        "currency": pricing.currency,
        "input": {
            "scheduled": int(counts.get("scheduled", 0)),
            "other_events": int(counts.get("other", 0)),
            "malformed": int(counts.get("malformed", 0)),
        },
        "messages": int(totals["messages"]),
        "delayed_messages": delayed,
        "destinations": len(by_destination),
        "months": list(by_month.index),
        "batch_fill": batch_fill,
        "cycle_seconds": cycle_seconds,
        "models": models,
        "monthly_billed_cost": {m: float(c) for m, c in by_month["billed_cost"].items()},
        "average_monthly_cost": float(by_month["billed_cost"].mean()),
        "cost_per_delayed_message": float(totals["batched_cost"]) / delayed if delayed else 0.0,
    }
    assumptions = [
        f"Prices per million requests (first tier): FIFO {pricing.sqs_tiers[0].fifo_per_million}"
        f" {pricing.currency}, standard {pricing.sqs_tiers[0].standard_per_million}, EventBridge "
        f"Scheduler {pricing.scheduler_per_million}. Monthly bills apply the volume tiers and "
        f"the free tier of {pricing.free_requests_per_month:,} requests (FIFO first).",
        f"A delay above {cycle_seconds} s goes through the FIFO delay queue: k = ceil(N / "
        f"{cycle_seconds}) − 1 worker passes, each a receive, a send and a delete, plus the "
        "first send; the last send is the hand-over to the standard destination.",
        f"Batched: the worker's receive, send and delete calls carry {batch_fill} messages on "
        "average; each call is billed per started "
        f"{pricing.billing_chunk_bytes // 1024} KiB of its payload.",
        "The reference formula (NServiceBus documentation) counts two FIFO operations per "
        "900 s and ignores the first send, deletes, the hand-over and payload size.",
        f"Idle polling: one 20 s long poll at a time per delay queue, {idle:,} requests per "
        "destination per month in which it had traffic.",
        "EventBridge Scheduler: one one-time schedule per delayed message, which sends the "
        "message to the destination when due (one standard send).",
    ]
    tables = {
        "by_destination": by_destination,
        "by_month": by_month,
        "by_band": by_band,
        "delay_histogram": histogram,
        "models": _models_frame(models),
    }
    return Report(tables, summary, assumptions)


def human(seconds: float) -> str:
    """A duration in the largest unit that keeps it at least 1: 90 -> '1.5 min'."""
    for unit, size in (("d", 86_400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def _models_frame(models: list[dict[str, Any]]) -> Any:
    import pandas as pd

    return pd.DataFrame(models).set_index("model")


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg") :]


def charts(report: Report) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    out = {}
    month = report.tables["by_month"]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for model, style in (
        ("reference", "--"),
        ("exact", ":"),
        ("batched", "-"),
        ("scheduler", "-."),
    ):
        ax.plot(month.index, month[f"{model}_cost"], style, marker="o", label=MODEL_TITLES[model])
    ax.bar(month.index, month["billed_cost"], alpha=0.25, label="Billed (batched + idle, tiers)")
    ax.set_ylabel(report.summary["currency"])
    ax.set_title("Cost per month")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    out["month"] = _svg(fig)
    plt.close(fig)

    dest = report.tables["by_destination"].head(15).iloc[::-1]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(dest) + 1.2))
    ax.barh(dest.index, dest["batched_cost"] + dest["idle_poll_cost"], color="#3b6ea5")
    ax.set_xlabel(report.summary["currency"])
    ax.set_title("Cost per destination (batched + idle polling, top 15)")
    out["destination"] = _svg(fig)
    plt.close(fig)

    hist = report.tables["delay_histogram"]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(range(len(hist)), hist["messages"], color="#6a994e")
    ax.set_xticks(range(len(hist)), hist.index, rotation=60, fontsize=7, ha="right")
    ax.set_ylabel("messages")
    ax.set_title("Delay histogram (powers of two)")
    out["histogram"] = _svg(fig)
    plt.close(fig)
    return out


def _money(x: float, currency: str) -> str:
    if x == 0:
        return f"0 {currency}"
    return f"{x:,.2f} {currency}" if abs(x) >= 0.01 else f"{x:.8f} {currency}"


def render_html(report: Report) -> str:
    s = report.summary
    cur = s["currency"]
    pics = charts(report)
    models = "".join(
        f"<tr><td>{html.escape(m['title'])}</td><td class=n>{m['requests']:,.0f}</td>"
        f"<td class=n>{_money(m['cost'], cur)}</td></tr>"
        for m in s["models"]
    )

    def table(name: str, columns: list[str]) -> str:
        df = report.tables[name][[c for c in columns if c in report.tables[name].columns]]
        return str(df.to_html(float_format=lambda v: f"{v:,.6g}", border=0, classes="t"))

    cols = [
        "messages",
        "delayed_messages",
        "reference_cost",
        "exact_cost",
        "batched_cost",
        "scheduler_cost",
        "idle_poll_cost",
        "billed_cost",
    ]
    inputs = s["input"]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sqsdelay cost report</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2rem auto;max-width:60rem;color:#222}}
h1{{margin-bottom:.2rem}} .muted{{color:#666}}
.cards{{display:flex;gap:1rem;margin:1rem 0}}
.card{{flex:1;border:1px solid #ddd;border-radius:8px;padding:1rem}}
.card b{{display:block;font-size:1.6rem}}
table{{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.85rem}}
td,th{{padding:.25rem .6rem;border-bottom:1px solid #eee;text-align:left}}
td.n,.t td{{text-align:right}} svg{{max-width:100%;height:auto}}
</style></head><body>
<h1>Delayed delivery cost report</h1>
<p class=muted>{html.escape(s["source"])} · {s["messages"]:,} messages ({s["delayed_messages"]:,}
through delay queues) · {s["destinations"]} destinations · {len(s["months"])} months ·
generated {s["generated_at"]}</p>
<div class=cards>
<div class=card>Average monthly cost<b>{_money(s["average_monthly_cost"], cur)}</b>
batched worker, idle polling, tiers and free tier</div>
<div class=card>Cost per delayed message<b>{_money(s["cost_per_delayed_message"], cur)}</b>
batched, list price</div>
<div class=card>Input<b>{inputs["scheduled"]:,}</b>records; {inputs["other_events"]:,} other
events and {inputs["malformed"]:,} malformed lines skipped</div>
</div>
<h2>Models side by side</h2>
<table><tr><th>model</th><th>requests</th><th>cost (list price)</th></tr>{models}</table>
<h2>Per month</h2>{pics["month"]}{table("by_month", cols)}
<h2>Per destination</h2>{pics["destination"]}{table("by_destination", cols)}
<h2>Per delay band</h2>{table("by_band", cols)}
<h2>Delays</h2>{pics["histogram"]}
<h2>Assumptions</h2><ul>{"".join(f"<li>{html.escape(a)}</li>" for a in report.assumptions)}</ul>
</body></html>
"""


def write(report: Report, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, df in report.tables.items():
        path = out_dir / f"{name}.csv"
        df.to_csv(path)
        written.append(path)
    summary = out_dir / "summary.json"
    summary.write_text(json.dumps({**report.summary, "assumptions": report.assumptions}, indent=2))
    page = out_dir / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    return [*written, summary, page]
