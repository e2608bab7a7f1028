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

from sqsdelay.cost.bands import BAND_ORDER
from sqsdelay.cost.pricing import (
    REGISTRY_READ_UNITS_PER_HOP,
    REGISTRY_WRITE_UNITS,
    Pricing,
    Quantities,
    Requests,
    idle_polls_per_month,
    registry_cost,
    tiered_cost,
)
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
    for model in ("exact", "batched"):
        df[f"{model}_requests"] = df[f"{model}_fifo"] + df[f"{model}_standard"]
        df[f"{model}_cost"] = (
            df[f"{model}_fifo"] * p.fifo_price + df[f"{model}_standard"] * p.standard_price
        )
    df["parked_requests"] = df["parked_fifo"] + df["parked_standard"] + df["parked_invocations"]
    df["parked_cost"] = (
        df["parked_fifo"] * p.fifo_price
        + df["parked_standard"] * p.standard_price
        + df["parked_invocations"] * p.scheduler_price
    )
    df["registry_cost"] = registry_cost(df["registry_writes"], df["registry_reads"], p)
    df["parked_registry_cost"] = registry_cost(
        df["registry_writes"], df["parked_registry_reads"], p
    )
    df["scheduler_requests"] = df["scheduler_invocations"] + df["scheduler_standard"]
    df["scheduler_cost"] = (
        df["scheduler_invocations"] * p.scheduler_price
        + df["scheduler_standard"] * p.standard_price
    )
    return df


SUMS = [
    "messages",
    "delayed_messages",
    "delay_seconds",
    "cycles",
    "registry_cost",
    "parked_registry_cost",
] + [f"{m}_{x}" for m in MODELS for x in ("requests", "cost")]


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
    rows = priced(scheduled, pricing, cycle_seconds=cycle_seconds, batch_fill=batch_fill)
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
    idle_cost = idle_requests * pricing.fifo_price
    models.append(
        {
            "model": "idle_polling",
            "title": "Idle long polling (one per delay queue)",
            "requests": idle_requests,
            "cost": idle_cost,
        }
    )
    delayed = int(totals["delayed_messages"])
    monthly = {m: float(c) for m, c in by_month["billed_cost"].items()}
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
        "monthly_billed_cost": monthly,
        "months_in_free_tier": sum(1 for c in monthly.values() if c == 0),
        "free_requests_per_month": pricing.free_requests_per_month,
        "average_monthly_cost": float(by_month["billed_cost"].mean()),
        "cost_per_delayed_message": float(totals["batched_cost"]) / delayed if delayed else 0.0,
        "registry_cost": float(totals["registry_cost"]),
        "registry_cost_per_delayed_message": (
            float(totals["registry_cost"]) / delayed if delayed else 0.0
        ),
        "options": _options(totals, idle_cost),
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
        f"The registry (SQSDELAY_REGISTRY=dynamodb) adds, per delayed message, "
        f"{REGISTRY_WRITE_UNITS} DynamoDB write request units and "
        f"{REGISTRY_READ_UNITS_PER_HOP} read units per worker pass, at on-demand prices "
        f"({pricing.dynamodb_write_per_million} and {pricing.dynamodb_read_per_million} "
        f"{pricing.currency} per million): the registry column, on top of the batched worker.",
    ]
    tables = {
        "by_destination": by_destination,
        "by_month": by_month,
        "by_band": by_band,
        "delay_histogram": histogram,
        "models": _models_frame(models),
    }
    return Report(tables, summary, assumptions)


def _options(totals: Any, idle_cost: float) -> list[dict[str, Any]]:
    """The ways to run this workload, cheapest first, at list price (a worker polls too)."""
    costs = {
        "batched": float(totals["batched_cost"]) + idle_cost,
        "parked": float(totals["parked_cost"]) + idle_cost,
        "exact": float(totals["exact_cost"]) + idle_cost,
        "scheduler": float(totals["scheduler_cost"]),
    }
    return [
        {"model": m, "title": OPTIONS[m], "cost": c}
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
    ax.bar(month.index, month["billed_cost"], alpha=0.25, label="Billed (batched + idle, tiers)")
    ax.set_ylabel(cur)
    ax.yaxis.set_major_formatter(thousands)
    ax.set_title("Cost per month")
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
COUNT, MONEY = "count", "money"
VIEW = [
    ("messages", "messages", COUNT),
    ("delayed_messages", "delayed", COUNT),
    ("reference_cost", "reference", MONEY),
    ("exact_cost", "exact", MONEY),
    ("batched_cost", "batched", MONEY),
    ("parked_cost", "parked", MONEY),
    ("scheduler_cost", "Scheduler", MONEY),
    ("registry_cost", "registry (added)", MONEY),
    ("idle_poll_cost", "idle polling", MONEY),
    ("billed_cost", "billed", MONEY),
]


def view(report: Report, name: str) -> list[tuple[str, str, str]]:
    df = report.tables[name]
    return [c for c in VIEW if c[0] in df.columns] if name != "models" else []


def _cell(value: Any, kind: str) -> str:
    if value != value:  # NaN
        return ""
    return f"{value:,.0f}" if kind == COUNT else f"{value:,.2f}"


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
        + "".join(f"<td class=n>{_cell(df[c].sum(), k)}</td>" for c, _, k in cols)
        + "</tr>"
    )
    return (
        f"<table><thead><tr><th>{html.escape(label)}</th>{head}</tr></thead>"
        f"<tbody>{''.join(body)}{total}</tbody></table>"
    )


def _cards(s: dict[str, Any]) -> str:
    cur = s["currency"]
    free = s["months_in_free_tier"]
    if free == len(s["months"]):
        note = (
            f"every month is within the free tier of {s['free_requests_per_month']:,} "
            "requests, so nothing is billed"
        )
    elif free:
        note = (
            f"{free} of {len(s['months'])} months within the free tier of "
            f"{s['free_requests_per_month']:,} requests (billed 0)"
        )
    else:
        note = "batched worker, idle polling, volume tiers and free tier"
    inputs = s["input"]
    per_message = unit_money(s["cost_per_delayed_message"], cur, "delayed messages")
    return f"""<div class=cards>
<div class=card>Average monthly bill<b>{money(s["average_monthly_cost"], cur)}</b>{note}</div>
<div class=card>Cost per delayed message<b>{per_message}</b>batched, list price</div>
<div class=card>Input<b>{inputs["scheduled"]:,}</b>records; {inputs["other_events"]:,} other
events and {inputs["malformed"]:,} malformed lines skipped</div>
</div>"""


def render_html(report: Report) -> str:
    s = report.summary
    cur = s["currency"]
    pics = charts(report)
    models = "".join(
        f"<tr><td>{html.escape(m['title'])}</td><td class=n>{m['requests']:,.0f}</td>"
        f"<td class=n>{m['cost']:,.2f}</td></tr>"
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
<h1>Delayed delivery cost report</h1>
<p class=muted>{html.escape(s["source"])} · {s["messages"]:,} messages ({s["delayed_messages"]:,}
through delay queues) · {s["destinations"]:,} destinations · {len(s["months"])} months ·
generated {s["generated_at"]}</p>
{_cards(s)}
<p class=lead>{html.escape(comparison(s))}</p>
<h2>Models side by side</h2>
<table><thead><tr><th>model</th><th class=n>requests</th>
<th class=n>cost ({cur}, list price)</th></tr></thead><tbody>{models}</tbody></table>
<h2>Per month</h2>{pics["month"]}{html_table(report, "by_month", "month")}
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

    formats = {COUNT: "#,##0", MONEY: "#,##0.00"}
    with pd.ExcelWriter(path, engine="openpyxl") as writer:
        for name, df in report.tables.items():
            df.to_excel(writer, sheet_name=name)
            sheet = writer.sheets[name]
            columns = list(df.columns)
            total_row = len(df) + 2
            sheet.cell(row=total_row, column=1, value="total")
            for column, _, kind in view(report, name):
                col = columns.index(column) + 2
                sheet.cell(row=total_row, column=col, value=float(df[column].sum()))
                for row in range(2, total_row + 1):
                    sheet.cell(row=row, column=col).number_format = formats[kind]
            sheet.column_dimensions["A"].width = 24
    return path


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
    book = write_xlsx(report, out_dir / "report.xlsx")
    return [*written, summary, page, book]
