"""A what-if workload (`cost-report --what-if`): the records a spec describes, generated
by Spark in the shape `inputs.read_scheduled` gives.
"""

from __future__ import annotations

from typing import Any

from sqsdelay.cost.inputs import SCHEDULED
from sqsdelay.cost.whatif import Fixed, Histogram, LogNormal, Uniform, WhatIf


def _sample(dist: Any, seed: int) -> Any:
    """A column drawn from a what-if distribution, with native functions only."""
    from pyspark.sql import functions as F

    if isinstance(dist, Fixed):
        return F.lit(dist.value)
    if isinstance(dist, Uniform):
        return F.lit(dist.min) + F.rand(seed) * (dist.max - dist.min)
    if isinstance(dist, LogNormal):
        return F.exp(F.lit(dist.mu) + F.randn(seed) * dist.sigma)
    assert isinstance(dist, Histogram)
    total = sum(w for _, w in dist.buckets)
    u = F.rand(seed) * total
    v = F.rand(seed + 1)
    expr, cumulative, lower = None, 0.0, 0.0
    for upper, weight in dist.buckets:
        cumulative += weight
        value = F.lit(lower) + v * (upper - lower)
        expr = F.when(u < cumulative, value) if expr is None else expr.when(u < cumulative, value)
        lower = upper
    assert expr is not None
    return expr.otherwise(F.lit(lower))


def generate(spark: Any, spec: WhatIf) -> Any:
    """The what-if workload as the same rows `read_scheduled` produces, generated in Spark."""
    from pyspark.sql import functions as F

    per_day = spec.messages_per_day
    start = F.lit(spec.start.isoformat()).cast("timestamp")
    offset = F.floor(F.col("id") / per_day) * 86_400 + F.floor(
        (F.col("id") % per_day) * (86_400 / per_day)
    )
    return spark.range(spec.total_messages).select(
        F.lit(SCHEDULED).alias("kind"),
        (start + F.make_interval(secs=offset)).alias("ts"),
        F.lit(None).cast("string").alias("message_id"),
        F.concat(F.lit("whatif-"), (F.col("id") % spec.destinations).cast("string")).alias(
            "destination"
        ),
        F.ceil(F.greatest(_sample(spec.delay_seconds, spec.seed), F.lit(0.0)))
        .cast("long")
        .alias("delay_seconds"),
        F.ceil(F.greatest(_sample(spec.size_bytes, spec.seed + 7), F.lit(0.0)))
        .cast("long")
        .alias("size_bytes"),
        F.lit(False).alias("parked_route"),  # what-if: it loops; the models compare routes
    )
