"""The price list: SQS's volume tiers, the free tiers, EventBridge Scheduler's and DynamoDB's
prices and the cost of running, as data (`data/pricing.yaml`) validated with pydantic; and the
delay above which the list makes parking cheaper than looping (`park_break_even_seconds`).

How many requests a message makes is `cost/request_counts.py`'s; what they cost,
`cost/money.py`'s. The formulas lived here before (issue 60 §3): their old names still import
from this module for one release, with a `DeprecationWarning` (`MOVED`).
"""

from __future__ import annotations

import importlib
import math
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from sqsdelay import deprecations
from sqsdelay.core import parking
from sqsdelay.cost import request_counts
from sqsdelay.cost.operating_cost import RunningPrices
from sqsdelay.errors import ConfigError


class Tier(BaseModel):
    up_to_requests: int | None = Field(default=None, gt=0)
    standard_per_million: float = Field(ge=0)
    fifo_per_million: float = Field(ge=0)


class Pricing(BaseModel):
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    region: str = Field(min_length=1)
    effective_date: date
    sources: list[str] = Field(min_length=1)
    sqs_tiers: list[Tier] = Field(min_length=1)
    free_requests_per_month: int = Field(ge=0)
    scheduler_free_invocations_per_month: int = Field(default=0, ge=0)
    billing_chunk_bytes: int = Field(gt=0)
    scheduler_per_million: float = Field(ge=0)
    dynamodb_write_per_million: float = Field(ge=0)
    dynamodb_read_per_million: float = Field(ge=0)
    running: RunningPrices = Field(default_factory=RunningPrices)

    @model_validator(mode="after")
    def _tiers_ascend(self) -> Pricing:
        limits = [t.up_to_requests for t in self.sqs_tiers]
        if limits[-1] is not None or any(x is None for x in limits[:-1]):
            raise ValueError("only the last of sqs_tiers may (and must) have up_to_requests: null")
        bounded = [x for x in limits if x is not None]
        if bounded != sorted(set(bounded)):
            raise ValueError("sqs_tiers must be in ascending order of up_to_requests")
        return self

    def converted(self, currency: str | None, rate: float | None) -> Pricing:
        """The prices in another currency: `rate` units of it per unit of the price list's.
        Without a rate, only the price list's own currency is accepted (a label alone would
        show USD figures as euros)."""
        if currency is None or currency == self.currency:
            if rate not in (None, 1.0):
                raise ConfigError(
                    f"--exchange-rate {rate} needs --currency (the report's currency, "
                    f"other than the price list's {self.currency})"
                )
            return self
        if rate is None or not math.isfinite(rate) or rate <= 0:
            raise ConfigError(
                f"the price list is in {self.currency}: a report in {currency} needs "
                f"--exchange-rate ({currency} per {self.currency}, a positive number)"
            )
        tiers = [
            t.model_copy(
                update={
                    "standard_per_million": t.standard_per_million * rate,
                    "fifo_per_million": t.fifo_per_million * rate,
                }
            )
            for t in self.sqs_tiers
        ]
        per_million = ("scheduler_per_million", "dynamodb_write_per_million")
        update: dict[str, Any] = {
            name: getattr(self, name) * rate for name in (*per_million, "dynamodb_read_per_million")
        }
        update["running"] = self.running.scaled(rate)
        return self.model_copy(update={"currency": currency, "sqs_tiers": tiers, **update})

    @property
    def fifo_price(self) -> float:
        """First-tier price per FIFO request (what the reference formula's P is)."""
        return self.sqs_tiers[0].fifo_per_million / 1e6

    @property
    def standard_price(self) -> float:
        return self.sqs_tiers[0].standard_per_million / 1e6

    @property
    def scheduler_price(self) -> float:
        return self.scheduler_per_million / 1e6

    @property
    def write_unit_price(self) -> float:
        return self.dynamodb_write_per_million / 1e6

    @property
    def read_unit_price(self) -> float:
        return self.dynamodb_read_per_million / 1e6


def load_pricing(path: Path | None = None) -> Pricing:
    """The shipped price file, or `path`. A bad file is a ConfigError naming the problem."""
    try:
        if path is None:
            text = resources.files("sqsdelay").joinpath("data/pricing.yaml").read_text()
        else:
            text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
        return Pricing.model_validate(data)
    except OSError as exc:
        raise ConfigError(f"cannot read pricing file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"pricing file {path} is not valid YAML: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'file'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"pricing file {path or 'built-in'} is invalid: {problems}") from None


def park_break_even_seconds(
    pricing: Pricing, *, cycle_seconds: int = 900, batch_fill: int = 10, size_bytes: int = 1024
) -> int:
    """The remaining delay above which parking is cheaper than looping (SQSDELAY_PARKING).

    A batched loop cycle costs (2b + 1)/f FIFO requests (receive and send of b chunks per
    batch of f, and a delete). Parking costs one Scheduler invocation plus Scheduler's own
    SendMessage back to the FIFO queue (`chunks` requests; CreateSchedule is not billed),
    and the message is back one lead (a cycle and the margin) before it is due, so the loop
    still makes the last hop either way. Parking pays once it saves that many cycles."""
    # The chunk counts of a routed message of this size, as every model counts them.
    q = request_counts.quantities(
        cycle_seconds + 1,
        size_bytes,
        ops=request_counts.PythonOps(),
        cycle_seconds=cycle_seconds,
        batch_fill=batch_fill,
        chunk_bytes=pricing.billing_chunk_bytes,
    )
    cycle_cost = (2 * q.batch_chunks + 1) / batch_fill * pricing.fifo_price
    park_cost = pricing.scheduler_price + q.chunks * pricing.fifo_price
    cycles: int = math.ceil(round(float(park_cost / cycle_cost), 9))  # 10.000000000000002 is 10
    return parking.park_after_seconds(cycle_seconds, cycles)


# The formulas' names that this module held before they moved to `cost/request_counts.py`
# (issue 60 §3): `from sqsdelay.cost.pricing import quantities` still works, and warns.
MOVED = {
    name: "sqsdelay.cost.request_counts"
    for name in (
        "AT_SEND",
        "NEVER",
        "REGISTRY_READ_UNITS_PER_HOP",
        "REGISTRY_WRITE_UNITS",
        "SECONDS_PER_MONTH",
        "Ops",
        "PythonOps",
        "Quantities",
        "Requests",
        "idle_polls_per_month",
        "quantities",
        "requests",
    )
}


def __getattr__(name: str) -> Any:
    home = MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    deprecations.warn(f"{__name__}.{name}", f"{home}.{name}")
    return getattr(importlib.import_module(home), name)
