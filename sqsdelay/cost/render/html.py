"""The self-contained HTML report: cards, tables in their view order, charts."""

from __future__ import annotations

import html
from typing import Any

from sqsdelay.cost.money import money, round_money, unit_money
from sqsdelay.cost.render.charts import charts
from sqsdelay.cost.render.text import (
    COUNT,
    MONEY,
    TEXT,
    cell,
    comparison,
    running_lines,
)
from sqsdelay.cost.summary import Report

# Columns of the HTML and spreadsheet tables: (column, heading, kind).
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
        + "".join(f"<td class=n>{cell(row[c], k)}</td>" for c, _, k in cols)
        + "</tr>"
        for i, row in df.iterrows()
    ]
    total = (
        "<tr class=total><td>total</td>"
        + "".join(
            f"<td class=n>{cell(round_money(float(df[c].sum())), k) if k != TEXT else ''}</td>"
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
        f"<tr><td>{html.escape(t)}</td><td class=n>{cell(v, MONEY)}</td></tr>"
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
        f"<td class=n>{cell(m['cost'], MONEY)}</td></tr>"
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
