"""Requests into money, the whole rule in one place (issue 60 §2): what each model's requests
cost at first-tier list prices (`Billed`, `model_costs`, `priced`), which requests the
estimate bills (`estimated_requests`: the route each message took, a FIFO destination's
forwards, the idle polls), how a month's requests meet the volume tiers and the free tiers
(`tiered_cost`, `month_cost`, `monthly_estimate`), the registry, one message's estimate, and
how money is rounded and written (`round_money`, `amount`, `money`). The same formulas price
a number, a pandas column or a Spark column.

How many requests a message makes is `cost/request_counts.py`'s; the prices are
`cost/pricing.py`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from sqsdelay.cost.pricing import Pricing, load_pricing, park_break_even_seconds
from sqsdelay.cost.request_counts import PythonOps, Quantities, Requests, requests
from sqsdelay.errors import InvalidInput

MODELS = ["reference", "exact", "batched", "parked", "scheduler"]


def places(x: float) -> int:
    """How many decimals money shows: cents, or 4 below one cent (so that a small cost does
    not read as nothing)."""
    return 4 if 0 < abs(x) < 0.01 else 2


def round_money(x: float) -> float:
    """Money as the report's figures hold it: rounded to `places` (no float noise shown as
    money). NaN stays NaN."""
    if x != x:  # NaN
        return x
    return round(x, places(x))


def amount(x: float) -> str:
    """A figure of money as a table shows it, without its currency: `places` decimals and
    thousands separators (1,234.57; 0.0046)."""
    return f"{x:,.{places(x)}f}"


def money(x: float, currency: str) -> str:
    """Money in a sentence: two decimals with thousands separators, and its currency."""
    return f"{x:,.2f} {currency}"


def unit_money(x: float, currency: str, unit: str) -> str:
    """A unit cost too small for cents, as a cost per million units."""
    return (
        money(x, currency) if abs(x) >= 0.01 else f"{money(x * 1e6, currency)} per million {unit}"
    )


@dataclass(frozen=True)
class Billed:
    """One model's requests: FIFO, standard and Scheduler invocations."""

    fifo: Any
    standard: Any
    invocations: Any = 0

    @property
    def requests(self) -> Any:
        return self.fifo + self.standard + self.invocations

    def cost(self, p: Pricing) -> Any:
        """At first-tier list prices."""
        return (
            self.fifo * p.fifo_price
            + self.standard * p.standard_price
            + self.invocations * p.scheduler_price
        )


@dataclass(frozen=True)
class ModelCost:
    requests: Any
    cost: Any


def billed(r: Requests) -> dict[str, Billed]:
    """Each model's requests. A FIFO destination's own FIFO requests (its forwards) count
    beside the delay queue's; the parked worker forwards as the batched one does."""
    return {
        "reference": Billed(r.reference_ops, 0),
        "exact": Billed(r.exact_fifo + r.exact_destination_fifo, r.exact_standard),
        "batched": Billed(r.batched_fifo + r.batched_destination_fifo, r.batched_standard),
        "parked": Billed(
            r.parked_fifo + r.batched_destination_fifo, r.parked_standard, r.parked_invocations
        ),
        "scheduler": Billed(r.scheduler_fifo, r.scheduler_standard, r.scheduler_invocations),
    }


def model_costs(r: Requests, p: Pricing) -> dict[str, ModelCost]:
    """Each model's requests and cost at first-tier list prices."""
    return {m: ModelCost(b.requests, b.cost(p)) for m, b in billed(r).items()}


def route_requests(r: Requests, parked: Any, where: Callable[[Any, Any, Any], Any]) -> Billed:
    """The requests of the route each message took: parked ones as the parked model prices
    them (a Scheduler invocation and one pass), the others as the batched worker. `where`
    is the frame's if-then-else (pandas or Spark); `fifo` is the delay queue's alone."""
    return Billed(
        fifo=where(parked, r.parked_fifo, r.batched_fifo),
        standard=where(parked, r.parked_standard, r.batched_standard),
        invocations=where(parked, r.parked_invocations, 0.0),
    )


def priced(agg: Any, p: Pricing, *, cycle_seconds: int, batch_fill: int) -> Any:
    """The aggregate's summed quantities priced: requests and cost of every model per row
    (first-tier list prices), and the requests of the route each row's messages took."""
    df = agg.copy()
    q = Quantities(**{f.name: df[f.name] for f in fields(Quantities)})
    r = Requests.of(q, cycle_seconds=cycle_seconds, batch_fill=batch_fill)
    for f in fields(Requests):
        df[f.name] = getattr(r, f.name)
    df["delayed_messages"] = df["routed"]
    for model, cost in model_costs(r, p).items():
        df[f"{model}_requests"] = cost.requests
        df[f"{model}_cost"] = cost.cost
    df["registry_cost"] = registry_cost(df["registry_writes"], df["registry_reads"], p)
    df["parked_registry_cost"] = registry_cost(
        df["registry_writes"], df["parked_registry_reads"], p
    )
    route = route_requests(r, df["parked_route"].astype(bool), lambda c, a, b: a.where(c, b))
    df["estimated_fifo"] = route.fifo
    df["estimated_standard"] = route.standard
    df["estimated_invocations"] = route.invocations
    # FIFO requests on a FIFO destination itself (its forwards), beside the delay queue's
    df["estimated_destination_fifo"] = df["batched_destination_fifo"]
    # standard requests on a FIFO destination's staging queue (either route), apart
    df["estimated_staging"] = df["batched_staging"]
    return df


def tiered_cost(
    fifo_requests: float, standard_requests: float, pricing: Pricing, *, free: float | None = None
) -> float:
    """A month's cost through the volume tiers. `free` requests (default: the price list's
    free tier) come first, taken from FIFO, the dearer; the tiers count the month's whole
    volume, free requests included, as AWS's price list does."""
    allowance = pricing.free_requests_per_month if free is None else free
    free = min(float(allowance), fifo_requests + standard_requests)
    billable = {
        "fifo": max(0.0, fifo_requests - free),
        "standard": standard_requests - max(0.0, free - fifo_requests),
    }
    cost, volume, lower = 0.0, free, 0.0
    for tier in pricing.sqs_tiers:
        upper = math.inf if tier.up_to_requests is None else float(tier.up_to_requests)
        for kind, price in (
            ("fifo", tier.fifo_per_million),
            ("standard", tier.standard_per_million),
        ):
            take = min(max(0.0, upper - volume), billable[kind])
            cost += take * price / 1e6
            billable[kind] -= take
            volume += take
        lower = upper
    assert lower == math.inf
    return cost


# The account's free tiers the report can apply (--free-tier). They are the account's, shared
# with everything else in it: the estimate is incremental cost unless asked.
FREE_TIERS = ("sqs", "scheduler")


def check_free_tiers(free_tier: frozenset[str]) -> None:
    """Refuse a free tier not in `FREE_TIERS`, saying what --free-tier takes."""
    unknown = set(free_tier) - set(FREE_TIERS)
    if unknown:
        raise InvalidInput(f"--free-tier takes {' or '.join(FREE_TIERS)}, not {sorted(unknown)}")


def billed_invocations(invocations: Any, pricing: Pricing, free_tier: frozenset[str]) -> Any:
    """A month's Scheduler invocations that are paid (a pandas column, one row a month): all
    of them, or those beyond the free invocations of a month when the Scheduler's free tier
    is applied."""
    if "scheduler" not in free_tier:
        return invocations
    return (invocations - pricing.scheduler_free_invocations_per_month).clip(lower=0)


def free_invocations_cost(invocations: Any, pricing: Pricing, free_tier: frozenset[str]) -> float:
    """What the Scheduler's free tier takes off these monthly invocations (0 unless it is
    applied), at Scheduler's price."""
    free = float((invocations - billed_invocations(invocations, pricing, free_tier)).sum())
    return float(Billed(0.0, 0.0, free).cost(pricing))


def estimated_requests(
    route: Billed, *, destination_fifo: Any, delay_polls: Any, staging_polls: Any
) -> Billed:
    """The requests the estimate bills, for the route each message took (`route_requests`):
    FIFO, the delay queue's with a FIFO destination's own (its forwards) and the delay
    queue's idle long polls; standard, the route's with a FIFO destination's staging queue's
    long polls; and parked messages' Scheduler invocations. Numbers, pandas or Spark columns."""
    return Billed(
        fifo=route.fifo + destination_fifo + delay_polls,
        standard=route.standard + staging_polls,
        invocations=route.invocations,
    )


def monthly_estimate(by_month: Any, pricing: Pricing, free_tier: frozenset[str]) -> list[float]:
    """Each usage month's estimate (a row of `by_month`: the `priced` columns and the idle
    polls summed per month): the month's `estimated_requests`, FIFO and standard through the
    volume tiers (`tiered_cost`), and the paid Scheduler invocations; the account's free
    tiers only when asked."""
    month = estimated_requests(
        Billed(
            by_month["estimated_fifo"],
            by_month["estimated_standard"],
            by_month["estimated_invocations"],
        ),
        destination_fifo=by_month["estimated_destination_fifo"],
        delay_polls=by_month["idle_poll_requests"],
        staging_polls=by_month["staging_poll_requests"],
    )
    paid = billed_invocations(month.invocations, pricing, free_tier)
    scheduler = Billed(0.0, 0.0, paid).cost(pricing)
    free = pricing.free_requests_per_month if "sqs" in free_tier else 0
    return [
        tiered_cost(float(month.fifo[m]), float(month.standard[m]), pricing, free=free)
        + float(scheduler[m])
        for m in by_month.index
    ]


def registry_cost(writes: Any, reads: Any, pricing: Pricing) -> Any:
    """The registry's DynamoDB request units at on-demand prices."""
    return writes * pricing.write_unit_price + reads * pricing.read_unit_price


@dataclass(frozen=True)
class Estimate:
    delay_seconds: int
    size_bytes: int
    batch_fill: int
    reference_cycles: float
    reference_ops: float
    reference_cost: float
    cycles: int
    exact_requests: float
    exact_cost: float
    batched_requests: float
    batched_cost: float
    scheduler_cost: float
    park_after_seconds: int
    parked_requests: float
    parked_invocations: float
    parked_cost: float
    registry_write_units: float
    registry_read_units: float
    registry_cost: float  # added to the batched worker's cost with SQSDELAY_REGISTRY=dynamodb
    parked_registry_cost: float  # ... to the parked worker's


def estimate(
    delay_seconds: int,
    *,
    size_bytes: int = 1024,
    batch_fill: int = 10,
    cycle_seconds: int = 900,
    pricing: Pricing | None = None,
    park_after: int | None = None,
) -> Estimate:
    """Per-message figures at first-tier prices, as in the reference document."""
    p = pricing or load_pricing()
    after = park_after or park_break_even_seconds(
        p, cycle_seconds=cycle_seconds, batch_fill=batch_fill, size_bytes=size_bytes
    )
    r = requests(
        delay_seconds,
        size_bytes,
        ops=PythonOps(),
        cycle_seconds=cycle_seconds,
        batch_fill=batch_fill,
        chunk_bytes=p.billing_chunk_bytes,
        park_after=after,
    )
    models = model_costs(r, p)
    parked = billed(r)["parked"]
    return Estimate(
        delay_seconds=delay_seconds,
        size_bytes=size_bytes,
        batch_fill=batch_fill,
        reference_cycles=delay_seconds / cycle_seconds,
        reference_ops=r.reference_ops,
        reference_cost=models["reference"].cost,
        cycles=r.cycles,
        exact_requests=models["exact"].requests,
        exact_cost=models["exact"].cost,
        batched_requests=models["batched"].requests,
        batched_cost=models["batched"].cost,
        scheduler_cost=models["scheduler"].cost,
        park_after_seconds=after,
        parked_requests=parked.fifo + parked.standard,
        parked_invocations=parked.invocations,
        parked_cost=models["parked"].cost,
        registry_write_units=r.registry_writes,
        registry_read_units=r.registry_reads,
        registry_cost=registry_cost(r.registry_writes, r.registry_reads, p),
        parked_registry_cost=registry_cost(r.registry_writes, r.parked_registry_reads, p),
    )
