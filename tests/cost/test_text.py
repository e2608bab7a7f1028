"""The report's words (cost/render/text.py): a table cell as a count, money or text, the
sentence that compares the options, and the cost-of-running lines. Money in a cell is
`cost/money.py`'s figure (`amount`), not a rounding of its own."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.cost.money import amount, round_money
from sqsdelay.cost.render.text import (
    COUNT,
    MONEY,
    RUNNING_TITLES,
    TEXT,
    cell,
    comparison,
    running_lines,
)


def test_a_cell_is_a_count_money_or_escaped_text_and_nan_is_empty() -> None:
    assert cell(1234.5, COUNT) == "1,234"  # 1,234.5 to even
    assert cell(1235.5, COUNT) == "1,236"
    assert cell("<b>&", TEXT) == "&lt;b&gt;&amp;"
    assert cell(float("nan"), COUNT) == cell(float("nan"), MONEY) == ""
    figures = (0.0, 1234.567, 0.004567, -0.004567, 0.00999)
    assert [cell(x, MONEY) for x in figures] == [amount(x) for x in figures]
    assert cell(0.004567, MONEY) == "0.0046"  # below a cent: four places, not "0.00"


@given(st.floats(-1e12, 1e12, allow_nan=False))
def test_a_money_cell_shows_the_figure_the_files_hold(x: float) -> None:
    """The page's cell and the CSV's rounded figure (`round_money`) are the same number."""
    assert float(cell(x, MONEY).replace(",", "")) == round_money(x)


def summary(*costs: float) -> dict[str, object]:
    options = [{"model": f"m{i}", "title": f"way {i}", "cost": c} for i, c in enumerate(costs)]
    return {"options": options, "currency": "EUR"}


def test_the_comparison_names_the_cheapest_and_what_it_saves_over_the_next() -> None:
    sentence = comparison(summary(7.5, 10.0, 30.0))
    assert sentence.startswith("For this workload way 0 is the cheapest at 7.50 EUR: ")
    assert "2.50 EUR (25%) less than the next cheapest, way 1 (10.00 EUR)" in sentence
    assert comparison(summary(0.0, 0.0)) == "Every option costs 0.00 EUR for this workload."


def test_the_cost_of_running_is_listed_by_title_in_the_summarys_order() -> None:
    got = running_lines({"cost_of_running": {"kms": 0.25, "logs_ingestion": 1.5}})
    assert got == [(RUNNING_TITLES["kms"], 0.25), (RUNNING_TITLES["logs_ingestion"], 1.5)]
