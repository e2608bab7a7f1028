"""Requests turned into money (cost/money.py): one message's estimate, the volume tiers and
the free tiers, which requests a month's estimate bills, the registry's request units, each
model's bill, the route a message took, and how money is rounded and written."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.cost.money import (
    FREE_TIERS,
    MODELS,
    Billed,
    amount,
    billed,
    billed_invocations,
    check_free_tiers,
    estimate,
    estimated_requests,
    free_invocations_cost,
    model_costs,
    money,
    monthly_estimate,
    places,
    priced,
    registry_cost,
    round_money,
    route_requests,
    tiered_cost,
    unit_money,
)
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.cost.request_counts import NEVER, PythonOps, Requests, quantities
from sqsdelay.errors import InvalidInput

PRICES = load_pricing()
FREE = PRICES.scheduler_free_invocations_per_month


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


# The shipped tiers: FIFO 0.50, 0.40, 0.35 and standard 0.40, 0.30, 0.24 per million, the
# first up to 100 billion requests a month, the second up to 200 billion.
BOUNDS = [100e9, 200e9]
VOLUME = st.integers(0, 300 * 10**9)


@given(VOLUME, VOLUME, st.integers(0, 10**9), st.integers(0, 10**9), st.sampled_from([0, None]))
def test_a_months_cost_through_the_tiers_never_falls_when_requests_are_added(
    fifo: int, standard: int, more_fifo: int, more_standard: int, free: int | None
) -> None:
    before = tiered_cost(fifo, standard, PRICES, free=free)
    after = tiered_cost(fifo + more_fifo, standard + more_standard, PRICES, free=free)
    assert after >= before - 1e-9 * before
    assert before >= 0


@given(st.sampled_from([0, *BOUNDS]), st.integers(-3, 3), st.sampled_from(["fifo", "standard"]))
def test_one_more_request_costs_the_price_of_the_tier_it_falls_in(
    bound: float, offset: int, kind: str
) -> None:
    """Request n + 1 of a month, FIFO or standard alone and no free tier, costs its tier's
    price: the tier's own up to its limit, included; the next one's from one above."""
    n = max(0, int(bound) + offset)
    tier = next(
        t for t in PRICES.sqs_tiers if t.up_to_requests is None or n + 1 <= t.up_to_requests
    )
    price = (tier.fifo_per_million if kind == "fifo" else tier.standard_per_million) / 1e6

    def cost(requests: int) -> float:
        counts = (requests, 0) if kind == "fifo" else (0, requests)
        return tiered_cost(*counts, PRICES, free=0)

    assert cost(n + 1) - cost(n) == pytest.approx(price, rel=1e-3)


def test_the_tier_limits_are_exact() -> None:
    """The first 100 billion requests at the first tier's price, not one more."""
    assert tiered_cost(100e9, 0, PRICES, free=0) == 100e9 * 0.5e-6
    assert tiered_cost(200e9, 0, PRICES, free=0) == 100e9 * 0.5e-6 + 100e9 * 0.4e-6
    above = tiered_cost(100e9 + 1, 0, PRICES, free=0) - tiered_cost(100e9, 0, PRICES, free=0)
    assert above == pytest.approx(0.4e-6, rel=1e-3)
    # standard after FIFO fills the first tier's volume: the second tier's standard price
    mixed = tiered_cost(100e9, 1_000, PRICES, free=0) - tiered_cost(100e9, 0, PRICES, free=0)
    assert mixed == pytest.approx(1_000 * 0.3e-6, rel=1e-6)


@given(st.integers(0, 3 * 10**6), st.integers(0, 3 * 10**6))
def test_the_sqs_free_tier_takes_fifo_first_and_costs_nothing_within_it(
    fifo: int, standard: int
) -> None:
    free = min(PRICES.free_requests_per_month, fifo + standard)
    cost = tiered_cost(fifo, standard, PRICES)
    if fifo + standard == free:
        assert cost == 0
    billable_fifo = max(0, fifo - free)
    billable_standard = standard - max(0, free - fifo)
    assert cost == pytest.approx(billable_fifo * 0.5e-6 + billable_standard * 0.4e-6, abs=1e-12)


def test_money_shows_cents_or_four_places_below_a_cent_in_tables_and_figures_alike() -> None:
    shown = [places(x) for x in (0, 0.01, -0.01, 0.0099, -0.004, 1e-9, 12.3)]
    assert shown == [2, 2, 2, 4, 4, 4, 2]
    assert [amount(x) for x in (0, 1234.567, 0.004567, -0.004567, 0.01)] == [
        "0.00",
        "1,234.57",
        "0.0046",
        "-0.0046",
        "0.01",
    ]


@given(st.floats(-1e12, 1e12, allow_nan=False))
def test_a_tables_figure_is_the_rounded_figure_written_out(x: float) -> None:
    """`amount` writes what `round_money` keeps: the report's files and its pages agree."""
    assert float(amount(x).replace(",", "")) == round_money(x)


def test_only_the_free_tiers_the_report_knows_are_taken() -> None:
    assert FREE_TIERS == ("sqs", "scheduler")
    check_free_tiers(frozenset({"sqs", "scheduler"}))
    check_free_tiers(frozenset())
    with pytest.raises(
        InvalidInput, match="--free-tier takes sqs or scheduler, not \\['lambda'\\]"
    ):
        check_free_tiers(frozenset({"lambda", "sqs"}))


def test_the_schedulers_free_tier_counts_only_when_asked_and_never_below_zero() -> None:
    invocations = pd.Series([FREE - 1, FREE + 5, 3 * FREE])
    assert list(billed_invocations(invocations, PRICES, frozenset())) == list(invocations)
    paid = billed_invocations(invocations, PRICES, frozenset({"scheduler"}))
    assert list(paid) == [0, 5, 2 * FREE]
    saved = free_invocations_cost(invocations, PRICES, frozenset({"scheduler"}))
    assert saved == pytest.approx((FREE - 1 + FREE + FREE) * 1e-6)
    assert free_invocations_cost(invocations, PRICES, frozenset({"sqs"})) == 0


def test_the_estimate_bills_the_route_the_destinations_forwards_and_the_idle_polls() -> None:
    route = Billed(fifo=1.0, standard=2.0, invocations=3.0)
    got = estimated_requests(route, destination_fifo=10.0, delay_polls=100.0, staging_polls=1e3)
    assert (got.fifo, got.standard, got.invocations) == (111.0, 1002.0, 3.0)


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
        got = monthly_estimate(by_month, PRICES, free_tier)
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
        monthly_estimate(by_month, PRICES, frozenset({"scheduler"}))[0]
        < monthly_estimate(by_month, PRICES, frozenset())[0]
    )
