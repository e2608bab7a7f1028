"""The report's words: the sentence that compares the options, the cost-of-running lines,
and how a table cell is written. Shared by the HTML page, the terminal and the demo; how
money is rounded and written is `cost/money.py`'s (`amount`, `money`)."""

from __future__ import annotations

import html
from typing import Any

from sqsdelay.cost.money import amount, money


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


# How a table cell is written: a count, money, or text (escaped for the page).
COUNT, MONEY, TEXT = "count", "money", "text"


def cell(value: Any, kind: str) -> str:
    if kind == TEXT:
        return html.escape(str(value))
    if value != value:  # NaN: an empty cell
        return ""
    if kind == COUNT:
        return f"{value:,.0f}"
    return amount(value)
