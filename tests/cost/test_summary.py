"""The cost report's summary (cost/summary.py), what it lays out from the priced rows: the
ways to run the workload cheapest first, durations as people read them, and a summary
refused with what to give. What the requests cost, the tiers and the free tiers are
cost/money.py's (test_money.py); the whole report on real event logs is test_cost_report.py's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from sqsdelay.cost import summary
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.errors import InvalidInput

PRICES = load_pricing()


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0 s"), (42, "42 s"), (90, "1.5 min"), (5400, "1.5 h"), (86_400 * 365, "365 d")],
)
def test_a_duration_is_shown_in_the_largest_unit_that_keeps_it_at_least_one(
    seconds: float, shown: str
) -> None:
    assert summary.human(seconds) == shown


def test_the_options_are_cheapest_first_and_only_a_worker_pays_for_its_idle_polls() -> None:
    totals = {"batched_cost": 10.0, "parked_cost": 8.0, "exact_cost": 30.0, "scheduler_cost": 9}
    options = summary._options(totals, 2.0, {"parked": 0.0, "scheduler": 0.0})
    assert [(o["model"], o["cost"]) for o in options] == [
        ("scheduler", 9.0),  # no worker, no polling
        ("parked", 10.0),
        ("batched", 12.0),
        ("exact", 32.0),
    ]
    assert options[0]["title"] == summary.OPTIONS["scheduler"]
    # the Scheduler invocations inside the free tier, when it is applied, are not paid
    free = summary._options(totals, 2.0, {"parked": 5.0, "scheduler": 8.5})
    assert [(o["model"], o["cost"]) for o in free][:2] == [("scheduler", 0.5), ("parked", 5.0)]


def _agg(**kinds: int) -> Any:
    shape = pd.DataFrame({"kind": list(kinds), "messages": list(kinds.values())})
    return SimpleNamespace(shape=shape)


def test_a_free_tier_it_does_not_know_is_refused_before_anything_is_read() -> None:
    with pytest.raises(
        InvalidInput, match="--free-tier takes sqs or scheduler, not \\['lambda'\\]"
    ):
        summary.build(
            None,  # type: ignore[arg-type]
            PRICES,
            batch_fill=10,
            cycle_seconds=900,
            source="x",
            free_tier=frozenset({"lambda", "sqs"}),
        )


def test_an_input_without_a_scheduled_message_says_what_it_held_and_where_to_point() -> None:
    with pytest.raises(InvalidInput) as info:
        summary.build(
            _agg(other=3, malformed=2), PRICES, batch_fill=10, cycle_seconds=900, source="app.log"
        )
    message = str(info.value)
    assert "no delay.scheduled records in app.log" in message
    assert "other events: 3, malformed lines: 2" in message and "SQSDELAY_LOG_FILE" in message
