"""The summary in the terminal (rich): the models table, the comparison, the reconciliation
and the notes, for `sqsdelay cost-report` and the demo."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from sqsdelay.cost.money import money, unit_money
from sqsdelay.cost.render.text import MONEY, cell, comparison, running_lines

# A terminal shows the rows that matter; the files have them all (a year of 200 folded
# destinations is tens of thousands of rows: printing them took a minute).
TERMINAL_ROWS = 20


def reconciliation_table(summary: dict[str, Any], limit: int = TERMINAL_ROWS) -> Table:
    """The reconciliation as a terminal table: every row, or the `limit` rows of the
    largest variance (either way) when there are more."""
    rows = every = summary["reconciliation"]
    title, caption = f"estimate next to the bill ({summary['currency']})", None
    if len(every) > limit:
        rows = sorted(every, key=lambda r: -abs(r["variance_usd"]))[:limit]
        title += f": the {limit} largest variances of {len(every):,} rows"
        caption = "every row: reconciliation.csv, report.xlsx, report.html"
    table = Table(title=title, caption=caption)
    columns = ("estimated", "bill at list", "billed", "variance", "requests est.", "billed")
    for col in ("destination", "month", *columns):
        table.add_column(col, justify="left" if col in ("destination", "month") else "right")
    for r in rows:
        amounts = (r["estimated_usd"], r["list_usd"], r["billed_usd"], r["variance_usd"])
        requests = (r["estimated_requests"], r["billed_requests"])
        table.add_row(
            r["destination"],
            r["month"],
            *(cell(x, MONEY) for x in amounts),
            *(f"{n:,}" for n in requests),
        )
    return table


def print_summary(s: dict[str, Any], output: str, out: Console) -> None:
    """What `cost-report` prints when the report is written."""
    table = Table(title=f"{s['messages']:,} messages, {s['delayed_messages']:,} delayed")
    for col in ("model", "requests", f"cost ({s['currency']})"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for m in s["models"]:
        table.add_row(m["title"], f"{m['requests']:,.0f}", f"{m['cost']:,.2f}")
    out.print(table)
    cur = s["currency"]
    out.print(
        f"average monthly estimate {money(s['average_monthly_estimated_cost'], cur)}; per "
        f"delayed message {unit_money(s['cost_per_delayed_message'], cur, 'delayed messages')}"
    )
    out.print(comparison(s))
    if s["reconciliation"]:
        out.print(reconciliation_table(s))
    for note in s["bill_notes"]:
        out.print(note)
    running_cost = ", ".join(f"{t} {money(v, cur)}" for t, v in running_lines(s))
    out.print(f"cost of running (estimated, for the window): {running_cost}")
    out.print(
        f"skipped: {s['input']['other_events']:,} other events, "
        f"{s['input']['malformed']:,} malformed lines"
    )
    out.print(f"report: {output}/report.html")
