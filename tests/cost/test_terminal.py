"""The summary in the terminal: a long reconciliation shows its largest variances only."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from sqsdelay.cost.render.terminal import TERMINAL_ROWS, reconciliation_table


def summary(rows: int) -> dict[str, Any]:
    return {
        "currency": "USD",
        "reconciliation": [
            {
                "destination": f"q{i:05d}",
                "month": "2026-01",
                "estimated_usd": 1.0,
                "list_usd": 1.0 + (i % 7) * (-1) ** i,  # variances of both signs
                "billed_usd": 1.0,
                "variance_usd": (i % 7) * (-1) ** i,
                "estimated_requests": 10,
                "billed_requests": 10,
            }
            for i in range(rows)
        ],
    }


def shown(rows: int) -> tuple[str, list[str]]:
    console = Console(record=True, width=200)
    console.print(reconciliation_table(summary(rows)))
    text = console.export_text()
    return text, [line.split()[1] for line in text.splitlines() if " q0" in line]


def test_a_short_reconciliation_is_shown_whole() -> None:
    text, names = shown(TERMINAL_ROWS)
    assert names == [f"q{i:05d}" for i in range(TERMINAL_ROWS)]
    assert "estimate next to the bill (USD)" in text and "largest" not in text


def test_a_long_one_shows_its_largest_variances_and_where_the_rest_are() -> None:
    text, names = shown(30_000)
    assert len(names) == TERMINAL_ROWS
    s = summary(30_000)["reconciliation"]
    largest = max(abs(r["variance_usd"]) for r in s)
    assert {abs(r["variance_usd"]) for r in s if r["destination"] in names} == {largest}
    assert f"the {TERMINAL_ROWS} largest variances of 30,000 rows" in text
    assert "reconciliation.csv" in text
