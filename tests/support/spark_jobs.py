"""The Spark jobs a block of code runs on a session (its description or call site each)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def spark_jobs(spark: Any) -> Iterator[list[str]]:
    """Yields a list that holds, once the block has run, the jobs it started (by the
    session's status store, which keeps the last 1,000 jobs)."""
    store = spark.sparkContext._jsc.sc().statusStore()

    def jobs() -> dict[int, str]:
        listed = store.jobsList(None)
        return {listed.apply(i).jobId(): listed.apply(i).name() for i in range(listed.size())}

    # the store learns of a job from the listener bus, which may lag the action
    bus = spark.sparkContext._jsc.sc().listenerBus()
    bus.waitUntilEmpty()
    before = jobs()
    started: list[str] = []
    yield started
    bus.waitUntilEmpty()
    after = jobs()
    started.extend(after[k] for k in sorted(set(after) - set(before)))


def collect_action(spark: Any) -> str:
    """The name Spark gives the report's collects (`cost/collect.to_pandas`): `toArrow`
    where the DataFrame has it (Spark 4), else `toPandas` (3.5)."""
    return "toArrow" if hasattr(spark.range(0), "toArrow") else "toPandas"
