"""Many destinations: the tables name the top ones by cost and sum the rest, so that only a
few rows reach the driver; the money is the same, and the FOCUS rows (written by Spark)
name every destination. Real local SparkSession."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sqsdelay.cost.fold import others
from sqsdelay.cost.inputs import read_scheduled
from sqsdelay.cost.job import aggregate
from sqsdelay.cost.options import ReportRequest
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.cost.run import run_report

pytestmark = pytest.mark.spark
PRICING = load_pricing()
NAMES = [f"d{i:02d}" for i in range(1, 13)]
ACCOUNT = "arn:aws:sqs:us-east-1:123456789012"


@pytest.fixture
def events(tmp_path: Path) -> Path:
    """Destination dNN gets NN two-hour delays in March, the first on 1 March (the same idle
    polling for all), the last (from d02 on) ending in April."""

    def sent(n: int, i: int) -> str:
        if n == 0:
            return "2026-03-01T00:00:00Z"
        return "2026-03-31T23:00:00Z" if n == i - 1 else f"2026-03-{1 + 2 * n:02d}T12:00:00Z"

    lines = [
        json.dumps(
            {
                "event": "delay.scheduled",
                "message_id": f"{name}-{n}",
                "destination": name,
                "delay_seconds": 7200,
                "size_bytes": 100,
                "timestamp": sent(n, i),
            }
        )
        for i, name in enumerate(NAMES, start=1)
        for n in range(i)
    ]  # fmt: skip
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines))
    return path


def cur2(rows: list[tuple[str, str, float]]) -> pd.DataFrame:
    """CUR 2.0 lines: (queue, month, list cost)."""
    return pd.DataFrame(
        [
            {
                "line_item_product_code": "AWSQueueService",
                "line_item_resource_id": f"{ACCOUNT}:{queue}",
                "line_item_line_item_type": "Usage",
                "line_item_usage_type": "USE1-Requests-FIFO-Tier1",
                "line_item_usage_start_date": f"{month}-10T00:00:00Z",
                "line_item_usage_amount": 1000.0,
                "line_item_unblended_cost": cost,
                "line_item_currency_code": "USD",
                "pricing_public_on_demand_cost": cost,
            }
            for queue, month, cost in rows
        ]
    )


def focus(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "estimate-focus.csv").sort_values(["ChargePeriodStart", "ResourceId"])


def test_folded_destinations_keep_the_money_and_few_rows_reach_the_driver(
    spark: Any, events: Path, tmp_path: Path
) -> None:
    agg = aggregate(read_scheduled(spark, [str(events)]), PRICING, top=3)
    # Spark's queries of the fold start from the grouped rows, checkpointed: not from the
    # input's query, planned again under each (half a folded report's CPU, cost/job.py)
    plan = agg.focus._jdf.queryExecution().analyzed().toString()
    assert "LogicalRDD" in plan and "events.jsonl" not in plan and "_sent" not in plan
    agg.release()
    assert agg.folded == 9
    named = set(agg.destinations["destination"])
    assert named == {"d12", "d11", "d10", others(9)}
    # (top + 1) destinations x 2 months x 1 route: the per-destination rows that reach pandas;
    # idle polling in March only (the window ends with the last send)
    assert len(agg.destinations) == 8 and len(agg.idle) == 4

    full = run_report(
        ReportRequest(inputs=[str(events)], output=str(tmp_path / "all"), pricing=PRICING, top=100),
        spark=spark,
    )
    top = run_report(
        ReportRequest(inputs=[str(events)], output=str(tmp_path / "top"), pricing=PRICING, top=3),
        spark=spark,
    )
    a, b = full.summary, top.summary
    assert (a["destinations"], b["destinations"]) == (12, 12)
    assert (a["destinations_folded"], b["destinations_folded"]) == (0, 9)
    for key in ("monthly_estimated_cost", "models", "options", "messages"):
        assert a[key] == b[key], key
    by_destination = top.tables["by_destination"]
    assert set(by_destination.index) == {"d12", "d11", "d10", others(9)}
    for column in ("batched_cost", "idle_poll_requests", "delay_queue_cost"):
        assert by_destination[column].sum() == pytest.approx(
            full.tables["by_destination"][column].sum()
        ), column
    assert any("the other 9 are summed" in line for line in top.assumptions)
    idle = full.tables["by_destination"]["idle_poll_requests"]
    rest = idle.drop(["d12", "d11", "d10"]).sum()
    folded_idle = agg.idle.xs(others(9), level="destination")["idle_poll_requests"].sum()
    assert folded_idle == pytest.approx(rest) and rest > 0
    # FOCUS: every destination by name, the same rows whatever the tables show
    rows = focus(tmp_path / "top")
    assert {q for q in rows["ResourceId"] if q.endswith("-delay.fifo")} == {
        f"{n}-delay.fifo" for n in NAMES
    }
    pd.testing.assert_frame_equal(
        rows.reset_index(drop=True), focus(tmp_path / "all").reset_index(drop=True)
    )


def test_a_destination_large_in_the_bill_is_named_and_the_rest_reconciled_as_one(
    spark: Any, events: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """d01 has the smallest estimate but the largest bill: it is named. The destination
    queue d05's lines (not split) and the folded delay queues are summed as the others.
    The cluster's way (grouped rows cached, not a local checkpoint: cost/job.py `kept`),
    also on Spark 3.5 (make spark35): EMR's fold."""
    from sqsdelay.cost import job

    monkeypatch.setattr(job, "CHECKPOINT_ON_LOCAL_MASTER", False)
    bill = tmp_path / "cur.parquet"
    cur2(
        [("d01-delay.fifo", "2026-03", 50.0), ("d02-delay.fifo", "2026-03", 0.01),
         ("d12-delay.fifo", "2026-03", 0.02), ("d05", "2026-03", 3.0)]
    ).to_parquet(bill)  # fmt: skip
    out = tmp_path / "r"
    # in the suite's session (the CLI's own run: test_cost_report_processes.py)
    run_report(
        ReportRequest(
            inputs=[str(events)], output=str(out), pricing=PRICING, bills=[str(bill)], top=3
        ),
        spark=spark,
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["destinations_folded"] == 9
    table = {(r["destination"], r["month"]): r for r in summary["reconciliation"]}
    assert {d for d, _ in table} == {"d01", "d12", "d11", others(9)}
    assert table[("d01", "2026-03")]["list_usd"] == 50.0
    assert table[("d12", "2026-03")]["list_usd"] == 0.02
    assert table[(others(9), "2026-03")]["list_usd"] == 0.01  # d02's line
    notes = " ".join(summary["bill_notes"])
    assert "Largest variance: d01 in 2026-03" in notes
    # d05 is a destination queue: folded into the others, and left out as not splittable
    assert "(3.00 USD billed)" in notes
    # written by Spark (folded): every delay queue by name
    queues = set(pd.read_csv(out / "estimate-focus.csv")["ResourceId"])
    assert {f"{n}-delay.fifo" for n in NAMES} <= queues
