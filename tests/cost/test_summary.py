"""The cost report's summary (cost/summary.py), the rules it adds to the priced rows: the
ways to run the workload cheapest first, the Scheduler's free tier only when asked, each
month's estimate through the tiers, durations as people read them, and a summary refused
with what to give. The whole report on real event logs is test_cost_report.py's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from sqsdelay.cost import summary
from sqsdelay.cost.money import tiered_cost
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.errors import InvalidInput

PRICES = load_pricing()
FREE = PRICES.scheduler_free_invocations_per_month


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


def test_the_schedulers_free_tier_counts_only_when_asked_and_never_below_zero() -> None:
    invocations = pd.Series([FREE - 1, FREE + 5, 3 * FREE])
    assert list(summary._free_scheduler(invocations, PRICES, frozenset())) == list(invocations)
    billed = summary._free_scheduler(invocations, PRICES, frozenset({"scheduler"}))
    assert list(billed) == [0, 5, 2 * FREE]


def test_each_months_estimate_goes_through_the_tiers_with_the_idle_polls_and_invocations() -> None:
    by_month = pd.DataFrame(
        {
            "estimated_fifo": [1e6, 2e9],
            "estimated_destination_fifo": [0.0, 1e6],
            "idle_poll_requests": [129_600.0, 129_600.0],
            "estimated_standard": [5e5, 3e9],
            "staging_poll_requests": [0.0, 129_600.0],
            "estimated_invocations": [10.0, 2e7],
        },
        index=["2026-01", "2026-02"],
    )
    for free_tier in (frozenset(), frozenset({"sqs", "scheduler"})):
        got = summary._estimated(by_month, PRICES, free_tier)
        free = 1e6 if "sqs" in free_tier else 0
        invocations = by_month["estimated_invocations"]
        if "scheduler" in free_tier:
            invocations = (invocations - FREE).clip(lower=0)
        for i, month in enumerate(by_month.itertuples()):
            fifo = month.estimated_fifo + month.estimated_destination_fifo
            fifo += month.idle_poll_requests
            standard = month.estimated_standard + month.staging_poll_requests
            expected = tiered_cost(fifo, standard, PRICES, free=free)
            expected += invocations.iloc[i] * PRICES.scheduler_price
            assert got[i] == pytest.approx(expected)
    assert (
        summary._estimated(by_month, PRICES, frozenset({"scheduler"}))[0]
        < (summary._estimated(by_month, PRICES, frozenset())[0])
    )


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
