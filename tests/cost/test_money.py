"""Requests turned into money (cost/money.py): one message's estimate, the volume tiers and
free tier, the registry's request units, each model's bill, the route a message took, and
how money is written."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sqsdelay.cost.money import (
    MODELS,
    billed,
    estimate,
    model_costs,
    money,
    priced,
    registry_cost,
    round_money,
    route_requests,
    tiered_cost,
    unit_money,
)
from sqsdelay.cost.pricing import NEVER, PythonOps, Requests, load_pricing, quantities


def test_reference_example_one_year() -> None:
    e = estimate(31_536_000)
    assert e.reference_cycles == 35_040 and e.reference_ops == 70_080
    assert e.reference_cost == pytest.approx(0.03504)


def test_exact_counts_first_send_plus_three_requests_per_pass() -> None:
    assert estimate(31_536_000).exact_requests == 1 + 3 * 35_039
    assert estimate(1925).cycles == 2 and estimate(1925).exact_requests == 7
    assert estimate(901).exact_requests == 4
    direct = estimate(900)
    assert direct.exact_requests == 1 and direct.reference_ops == 0 and direct.cycles == 0


def test_exact_cost_prices_the_hand_over_as_standard() -> None:
    e = estimate(1925)
    assert e.exact_cost == pytest.approx(6 * 0.5e-6 + 1 * 0.4e-6)


def test_tiers_and_free_tier() -> None:
    p = load_pricing()
    assert tiered_cost(1_000_000, 0, p) == 0
    assert tiered_cost(2_000_000, 0, p) == pytest.approx(0.5)
    assert tiered_cost(500_000, 1_500_000, p) == pytest.approx(0.4)
    big = tiered_cost(150e9, 0, p)  # 100 B at 0.50, the rest at 0.40, minus 1 M free
    assert big == pytest.approx((100e9 - 1e6) * 0.5e-6 + 50e9 * 0.4e-6)


def test_a_changed_price_file_changes_the_figures(tmp_path: Path) -> None:
    text = (
        Path("sqsdelay/data/pricing.yaml")
        .read_text()
        .replace("fifo_per_million: 0.50", "fifo_per_million: 1.00")
    )
    path = tmp_path / "p.yaml"
    path.write_text(text)
    assert estimate(31_536_000, pricing=load_pricing(path)).reference_cost == pytest.approx(0.07008)


def test_the_registry_costs_six_writes_and_half_a_read_per_pass() -> None:
    year = estimate(31_536_000)
    assert (year.registry_write_units, year.registry_read_units) == (6, 0.5 * 35_039)
    assert year.registry_cost == pytest.approx(6 * 0.625e-6 + 0.5 * 35_039 * 0.125e-6)
    # Parked at send: one pass, the last.
    assert year.parked_registry_cost == pytest.approx(6 * 0.625e-6 + 0.5 * 0.125e-6)
    direct = estimate(600)  # straight to the destination: no record
    assert (direct.registry_write_units, direct.registry_cost) == (0, 0)


def test_no_free_tier_unless_asked() -> None:
    p = load_pricing()
    assert tiered_cost(2_000_000, 0, p, free=0) == pytest.approx(1.0)
    assert tiered_cost(2_000_000, 0, p) == pytest.approx(0.5)  # the price list's free tier


def test_money_shows_cents_and_what_is_below_a_cent_to_four_places() -> None:
    assert (round_money(12.3456), round_money(0.004567), round_money(-0.004567)) == (
        12.35,
        0.0046,
        -0.0046,
    )
    assert math.isnan(round_money(float("nan")))
    assert money(1_234_567.891, "EUR") == "1,234,567.89 EUR"
    assert unit_money(0.5, "USD", "messages") == "0.50 USD"
    assert unit_money(0.000_001_2, "USD", "messages") == "1.20 USD per million messages"


def _requests(**values: float) -> Requests:
    """A Requests with every field 0 but those given."""
    zero: dict[str, Any] = {f.name: 0.0 for f in dataclasses.fields(Requests)}
    return Requests(**(zero | values))


def test_each_model_bills_its_own_requests_and_a_fifo_destinations_forwards_beside_them() -> None:
    r = _requests(
        reference_ops=1,
        exact_fifo=2,
        exact_standard=3,
        exact_destination_fifo=4,
        batched_fifo=5,
        batched_standard=6,
        batched_destination_fifo=7,
        parked_fifo=8,
        parked_standard=9,
        parked_invocations=10,
        scheduler_fifo=11,
        scheduler_standard=12,
        scheduler_invocations=13,
    )
    got = {m: (b.fifo, b.standard, b.invocations) for m, b in billed(r).items()}
    assert got == {
        "reference": (1, 0, 0),
        "exact": (2 + 4, 3, 0),
        "batched": (5 + 7, 6, 0),
        "parked": (8 + 7, 9, 10),  # the parked worker forwards as the batched one does
        "scheduler": (11, 12, 13),
    }
    assert list(got) == MODELS
    p = load_pricing()
    costs = model_costs(r, p)
    assert costs["parked"].requests == 15 + 9 + 10
    assert costs["parked"].cost == pytest.approx(15 * 0.5e-6 + 9 * 0.4e-6 + 10 * 1e-6)


def test_a_message_takes_the_parked_route_or_the_batched_one_never_both() -> None:
    r = _requests(
        batched_fifo=5, batched_standard=6, parked_fifo=8, parked_standard=9, parked_invocations=1
    )

    def where(c: Any, a: Any, b: Any) -> Any:
        return a if c else b

    parked, looped = route_requests(r, True, where), route_requests(r, False, where)
    assert (parked.fifo, parked.standard, parked.invocations) == (8, 9, 1)
    assert (looped.fifo, looped.standard, looped.invocations) == (5, 6, 0)


def test_the_registry_is_priced_per_request_unit() -> None:
    p = load_pricing()
    assert registry_cost(6, 0.5, p) == pytest.approx(6 * 0.625e-6 + 0.5 * 0.125e-6)
    assert registry_cost(0, 0, p) == 0


def test_a_parked_message_costs_one_invocation_and_one_hop() -> None:
    e = estimate(3 * 86_400, park_after=10_020)
    assert (e.park_after_seconds, e.parked_invocations) == (10_020, 1)
    # Scheduler's send of its chunk, then receive, delete and hand-over in batches of ten
    assert e.parked_requests == pytest.approx(1 + 3 / 10)
    assert e.parked_cost == pytest.approx(1.2 * 0.5e-6 + 0.1 * 0.4e-6 + 1e-6)
    assert e.parked_requests < e.batched_requests


def test_an_aggregate_is_priced_row_by_row_as_each_rows_messages_are() -> None:
    """`priced` on a frame of summed quantities gives each row the figures its quantities
    give one at a time, and each row the route its messages took."""
    p, ops = load_pricing(), PythonOps()
    looped = quantities(86_400, 1024, ops=ops, park_after=NEVER)
    parked = quantities(3 * 86_400, 100_000, ops=ops, park_after=10_020)
    agg = pd.DataFrame([vars(looped), vars(parked)])
    agg["parked_route"] = [0, 1]
    df = priced(agg, p, cycle_seconds=900, batch_fill=10)
    for row, q in enumerate((looped, parked)):
        r = Requests.of(q)
        for model, cost in model_costs(r, p).items():
            assert df[f"{model}_cost"][row] == pytest.approx(cost.cost)
            assert df[f"{model}_requests"][row] == pytest.approx(cost.requests)
    assert list(df["estimated_invocations"]) == [0, 1]
    assert df["estimated_fifo"][0] == pytest.approx(Requests.of(looped).batched_fifo)
    assert df["estimated_fifo"][1] == pytest.approx(Requests.of(parked).parked_fifo)
    assert list(df["delayed_messages"]) == [1, 1]
    assert "parked_route" in agg and "exact_cost" not in agg  # the input is left as it was
