"""What-if workloads: a small YAML/JSON spec, validated with pydantic, that the cost job turns
into generated `delay.scheduled` rows inside Spark."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from sqsdelay.errors import ConfigError


class Fixed(BaseModel):
    kind: Literal["fixed"]
    value: float = Field(ge=0)


class Uniform(BaseModel):
    kind: Literal["uniform"]
    min: float = Field(ge=0)
    max: float = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if self.max < self.min:
            raise ValueError("max must not be below min")
        return self


class LogNormal(BaseModel):
    """exp(N(mu, sigma)): e.g. mu=ln(3600) is a median of one hour."""

    kind: Literal["lognormal"]
    mu: float
    sigma: float = Field(ge=0)


class Histogram(BaseModel):
    """Buckets of [upper bound, weight]; a value is uniform inside its bucket."""

    kind: Literal["histogram"]
    buckets: list[tuple[float, float]] = Field(min_length=1)

    @model_validator(mode="after")
    def _valid(self) -> Histogram:
        uppers = [u for u, _ in self.buckets]
        if uppers != sorted(uppers) or any(u < 0 for u in uppers):
            raise ValueError("bucket upper bounds must be ascending and non-negative")
        if any(w < 0 for _, w in self.buckets) or sum(w for _, w in self.buckets) <= 0:
            raise ValueError("bucket weights must be non-negative and not all zero")
        return self


Distribution = Annotated[Fixed | Uniform | LogNormal | Histogram, Field(discriminator="kind")]


class WhatIf(BaseModel):
    messages_per_day: int = Field(gt=0, le=10**9)
    months: int = Field(default=1, ge=1, le=120)
    start: date = date(2026, 1, 1)
    destinations: int = Field(default=1, ge=1, le=100_000)
    delay_seconds: Distribution
    size_bytes: Distribution = Fixed(kind="fixed", value=1024)
    seed: int = 0

    @property
    def days(self) -> int:
        """Calendar days from `start` to the same day `months` months later."""
        month = self.start.month - 1 + self.months
        end = date(self.start.year + month // 12, month % 12 + 1, min(self.start.day, 28))
        return (end - self.start).days

    @property
    def total_messages(self) -> int:
        return self.messages_per_day * self.days


def load_what_if(path: Path) -> WhatIf:
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        return WhatIf.model_validate(data)
    except OSError as exc:
        raise ConfigError(f"cannot read what-if spec {path}: {exc.strerror}") from None
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"what-if spec {path} is not valid YAML/JSON: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"what-if spec {path} is invalid: {problems}") from None
