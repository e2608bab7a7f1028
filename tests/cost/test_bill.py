"""The estimate next to the AWS bill: CUR 2.0 (Parquet and gzip CSV) and FOCUS 1.2 exports in
AWS's own column names, with a real local SparkSession. Exact expected sums."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sqsdelay.cost import collect, job
from sqsdelay.cost.bill import Resources, read_bill
from sqsdelay.cost.options import ReportRequest
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.cost.run import run_report
from sqsdelay.errors import InvalidInput
from tests.support.cur_bills import ACCOUNT, cur2, focus
from tests.support.spark_jobs import collect_action, spark_jobs

pytestmark = pytest.mark.spark
PRICING = load_pricing()


EXPECTED = [
    # 10,000 messages of 1,800 s: 1.2 batched FIFO requests each, plus 30 days of idle
    # polls (129,600), at 0.50 USD per million: 0.0708. The bill: two lines of 1,000.
    {"destination": "orders", "month": "2026-01", "estimated_usd": 0.07, "list_usd": 0.50,
     "billed_usd": 0.47, "variance_usd": 0.43, "estimated_requests": 141_600,
     "billed_requests": 2_000},
    {"destination": "orders", "month": "2026-02", "estimated_usd": 0.0, "list_usd": 0.50,
     "billed_usd": 0.45, "variance_usd": 0.50, "estimated_requests": 0,
     "billed_requests": 1_000},
    # The registry: 6 write units and half a read unit per message: 0.038125. Not requests.
    {"destination": "(registry)", "month": "2026-01", "estimated_usd": 0.04, "list_usd": 0.05,
     "billed_usd": 0.05, "variance_usd": 0.01, "estimated_requests": 0,
     "billed_requests": 0},
]  # fmt: skip


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10,000 messages to orders, 1,800 s each, from 1 to 31 January."""
    path = tmp_path_factory.mktemp("events") / "events.parquet"
    times = pd.date_range("2026-01-01", "2026-01-31", periods=10_000, tz="UTC").floor("us")
    pd.DataFrame(
        {
            "event": "delay.scheduled",
            "timestamp": times,
            "destination": "orders",
            "delay_seconds": 1800,
            "size_bytes": 100,
        }
    ).to_parquet(path, coerce_timestamps="us")  # Spark reads no nanoseconds
    return path


def report(spark: Any, events: Path, tmp_path: Path, bills: list[str], **kw: Any) -> Any:
    return run_report(
        ReportRequest(
            inputs=[str(events)],
            output=str(tmp_path / "report"),
            pricing=kw.pop("pricing", PRICING),
            bills=bills,
            registry_table="sqsdelay-scheduled",
            schedule_group="sqsdelay",
            **kw,
        ),
        spark=spark,
    )


def rows(report: Any) -> list[dict[str, Any]]:
    return sorted(report.summary["reconciliation"], key=lambda r: (r["month"], r["destination"]))


def expected() -> list[dict[str, Any]]:
    return sorted(EXPECTED, key=lambda r: (r["month"], r["destination"]))


def test_cur2_parquet_and_gzip_csv_reconcile_to_the_cent(
    spark: Any, events: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parquet = tmp_path / "cur.parquet"
    cur2().to_parquet(parquet)
    csv = tmp_path / "cur.csv.gz"
    with gzip.open(csv, "wt") as f:
        cur2().to_csv(f, index=False)
    collected: list[str] = []

    def counted(df: Any) -> Any:
        collected.append(",".join(df.columns))
        return collect.to_pandas(df)

    monkeypatch.setattr(job, "to_pandas", counted)
    for bill in (parquet, csv):
        collected.clear()
        with spark_jobs(spark) as jobs:
            done = report(spark, events, tmp_path, [str(bill)])
        # Besides the files' schemas and headers and the adaptive plan's stages: the input's
        # pass (a checkpoint), its collect, and the bill's pass with its collect; none to
        # count the input, or to find its destinations again. Both collects are named at
        # cost/collect.py, and a limit's collect takes a job a try: they are counted here.
        skip = ("parquet at", "csv at", "$anonfun")
        actions = {name.split(" at ")[0] for name in jobs if not name.startswith(skip)}
        assert actions == {"localCheckpoint", collect_action(spark)}, jobs
        assert len(collected) == 2 and "billed" in collected[1], collected
        assert rows(done) == expected(), bill.name
        notes = " ".join(done.summary["bill_notes"])
        assert "Largest variance: orders in 2026-02" in notes
        assert "destination queues' lines (0.90 USD billed) are not split" in notes
        assert "without a resource id (credits, mostly: -0.40 USD)" in notes  # tax left out
    out = tmp_path / "report"
    table = pd.read_csv(out / "reconciliation.csv")
    assert table["list_usd"].sum() == pytest.approx(1.05)
    book = pd.read_excel(out / "report.xlsx", sheet_name="reconciliation", index_col=0)
    assert book.loc["total", "billed_usd"] == pytest.approx(0.97)
    page = (out / "report.html").read_text()
    assert "Estimate next to the bill" in page and "(registry)" in page
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reconciliation"] == done.summary["reconciliation"]
    focus = pd.read_csv(out / "estimate-focus.csv")
    registry = focus[focus["ServiceName"] == "Amazon DynamoDB"]
    assert set(registry["ResourceId"]) == {"sqsdelay-scheduled"}
    assert registry["ListCost"].sum() == pytest.approx(0.038125)  # as in EXPECTED


def test_an_export_folder_as_aws_writes_it_and_inputs_that_only_spark_can_find(
    spark: Any, events: Path, tmp_path: Path
) -> None:
    """CUR 2.0 writes `<export>/data/BILLING_PERIOD=YYYY-MM/<export>-00001.snappy.parquet`
    beside JSON manifests under `metadata/`: the folder is read as Parquet, manifests aside.
    A `file:` URI and a brace glob are Spark's to read, not refused as missing files."""
    export = tmp_path / "exports" / "sqs-cur2"
    bill = cur2()
    for period, lines in bill.groupby(bill["bill_billing_period_start_date"].str[:7]):
        part = export / "data" / f"BILLING_PERIOD={period}"
        part.mkdir(parents=True)
        lines.to_parquet(part / "sqs-cur2-00001.snappy.parquet", compression="snappy")
        manifest = export / "metadata" / f"BILLING_PERIOD={period}"
        manifest.mkdir(parents=True)
        (manifest / "sqs-cur2-Manifest.json").write_text('{"dataFiles": []}')
    glob = str(events.parent / "{events,absent}.parquet")
    for inputs in ([f"file:{events}"], [glob]):
        done = run_report(
            ReportRequest(
                inputs=inputs,
                output=str(tmp_path / "report"),
                pricing=PRICING,
                bills=[str(tmp_path / "exports")],
                registry_table="sqsdelay-scheduled",
                schedule_group="sqsdelay",
            ),
            spark=spark,
        )
        assert rows(done) == expected(), inputs


def test_a_bill_folder_with_no_data_files_says_so(tmp_path: Path) -> None:
    from sqsdelay.cost.bill import bill_format

    (tmp_path / "empty" / "metadata").mkdir(parents=True)
    with pytest.raises(InvalidInput, match=r"no \.parquet or \.csv"):
        bill_format([str(tmp_path / "empty")])
    csvs = tmp_path / "csv" / "BILLING_PERIOD=2026-01"
    csvs.mkdir(parents=True)
    (csvs / "cur-00001.csv.gz").write_bytes(b"")
    assert bill_format([str(tmp_path / "csv")]) == "csv"
    assert bill_format(["s3://bucket/exports/sqs-cur2/"]) == "parquet"  # CUR 2.0's default


def test_a_bill_file_whose_name_says_no_format_is_read_as_the_format_given(
    spark: Any, events: Path, tmp_path: Path
) -> None:
    """`--bill cur_export --bill-format parquet`: Spark applies the folders' file filter to a
    file named outright too, so these were read as nothing ("Unable to infer schema")."""
    cur2().to_parquet(tmp_path / "cur_export")
    with gzip.open(tmp_path / "bill.gz", "wt") as f:
        cur2().to_csv(f, index=False)
    cur2().to_csv(tmp_path / "BILL.CSV", index=False)
    done = report(spark, events, tmp_path, [str(tmp_path / "cur_export")], bill_format="parquet")
    assert rows(done) == expected()
    known = spark.createDataFrame([("orders",)], ["destination"])
    for name, fmt in (("bill.gz", "csv"), ("BILL.CSV", "csv"), ("BILL.CSV", "auto")):
        booked = read_bill(spark, [str(tmp_path / name)], Resources(known), fmt).collect()
        assert sum(r["lines"] for r in booked) == 5, (name, fmt)  # orders' four, the credit


def test_an_input_folder_is_read_as_a_bill_folder_is(
    spark: Any, events: Path, tmp_path: Path
) -> None:
    """`--input DIR` of Parquet files (with Spark's `_SUCCESS` beside them) needed --format."""
    folder = tmp_path / "events" / "day=2026-01-01"
    folder.mkdir(parents=True)
    (folder / "part-00000.parquet").write_bytes(events.read_bytes())
    (folder / "_SUCCESS").write_bytes(b"")
    cur2().to_parquet(tmp_path / "cur.parquet")
    done = run_report(
        ReportRequest(
            inputs=[str(tmp_path / "events")],
            output=str(tmp_path / "report"),
            pricing=PRICING,
            bills=[str(tmp_path / "cur.parquet")],
            registry_table="sqsdelay-scheduled",
            schedule_group="sqsdelay",
        ),
        spark=spark,
    )
    assert rows(done) == expected()


def test_focus_gives_the_same_reconciliation(spark: Any, events: Path, tmp_path: Path) -> None:
    bill = tmp_path / "focus.parquet"
    focus().to_parquet(bill)
    assert rows(report(spark, events, tmp_path, [str(bill)])) == expected()


def test_a_bill_without_delay_queues_still_gives_the_estimate(
    spark: Any, events: Path, tmp_path: Path
) -> None:
    bill = tmp_path / "cur.parquet"
    cur2()[lambda d: ~d["line_item_resource_id"].str.contains("orders")].to_parquet(bill)
    done = report(spark, events, tmp_path, [str(bill)])
    assert "The bill has no delay queue lines" in " ".join(done.summary["bill_notes"])
    assert done.summary["monthly_estimated_cost"]["2026-01"] > 0


def test_a_bill_with_missing_columns_names_them(spark: Any, events: Path, tmp_path: Path) -> None:
    bill = tmp_path / "cur.parquet"
    cur2().drop(columns=["pricing_public_on_demand_cost"]).to_parquet(bill)
    with pytest.raises(InvalidInput, match=r"CUR 2\.0 export but lacks pricing_public_on_demand"):
        report(spark, events, tmp_path, [str(bill)])
    other = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(other)
    with pytest.raises(InvalidInput, match="not an AWS Data Exports bill"):
        report(spark, events, tmp_path, [str(other)])


def test_a_bill_in_another_currency_needs_a_rate(spark: Any, events: Path, tmp_path: Path) -> None:
    bill = tmp_path / "cur.parquet"
    cur2("EUR").to_parquet(bill)
    with pytest.raises(InvalidInput, match="give --currency EUR --exchange-rate"):
        report(spark, events, tmp_path, [str(bill)])
    euros = PRICING.converted("EUR", 2.0)
    done = report(spark, events, tmp_path, [str(bill)], pricing=euros)
    january = next(r for r in rows(done) if r["destination"] == "orders")
    assert january["estimated_usd"] == pytest.approx(0.14)  # 0.0708 x 2


@pytest.mark.slow
def test_the_cli_reads_firehose_objects_and_a_bill_in_euros(
    spark: Any, events: Path, tmp_path: Path
) -> None:
    """Every option the README gives for the bill, as a user types them: a Firehose object
    of subscription envelopes, a CUR 2.0 bill in EUR with its rate, a window, the free tier.
    The command line runs in this process, on the suite's session (a report leaves a
    caller's session running): a subprocess started a JVM of its own, 60 CPU-s of the
    suite; the command as a process is test_class_archive's and test_wheel's."""
    from typer.testing import CliRunner

    from sqsdelay.cli import app
    from tests.support.cost_events import envelopes

    frame = pd.read_parquet(events)
    frame["timestamp"] = frame["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lines = [json.dumps(r) for r in frame.to_dict("records")]
    firehose = tmp_path / "sqsdelay-events-1-2026-02-01"
    firehose.write_bytes(b"".join(gzip.compress(d.encode()) for d in envelopes(lines, 500)))
    bill = tmp_path / "cur.parquet"
    cur2("EUR").to_parquet(bill)
    env = {"SQSDELAY_REGISTRY": "dynamodb", "SQSDELAY_REGISTRY_TABLE": "sqsdelay-scheduled"}

    def cost_report(*args: str) -> Any:
        command = ["cost-report", "--input", str(firehose)]
        command += ["--format", "cwl-subscription", "--bill", str(bill), *args]
        return CliRunner().invoke(app, command, env=env)

    out = tmp_path / "out"
    running = tmp_path / "running.yaml"
    running.write_text("worker: lambda\nlambda_memory_mb: 512\n")
    done = cost_report(
        *("--output", str(out), "--currency", "EUR", "--exchange-rate", "0.9"),
        *("--since", "2026-01-01", "--until", "2026-03-01"),
        *("--free-tier", "sqs", "--free-tier", "scheduler", "--running", str(running)),
    )
    assert done.exit_code == 0, f"{done.exception!r} {done.stderr[-3000:]}"
    assert "cost of running (estimated, for the window): CloudWatch Logs" in done.stdout
    assert "estimate next to the bill (EUR)" in done.stdout and "orders" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["currency"] == "EUR" and summary["free_tier"] == ["scheduler", "sqs"]
    assert summary["running_inputs"]["lambda_memory_mb"] == 512
    assert summary["cost_of_running"]["worker_compute"] > 0  # Lambda: per batch
    assert summary["input"]["scheduled"] == 10_000
    assert summary["window"]["end"].startswith("2026-03-01")
    listed = {(r["destination"], r["month"]): r["list_usd"] for r in summary["reconciliation"]}
    assert listed[("orders", "2026-01")] == 0.50 and listed[("orders", "2026-02")] == 0.50
    assert listed[("(registry)", "2026-01")] == 0.05  # the table SQSDELAY_REGISTRY_TABLE names
    # the free tier covers the whole estimate of this small workload
    assert summary["monthly_estimated_cost"] == {"2026-01": 0.0, "2026-02": 0.0}
    # a bill in EUR without the rate: test_a_bill_in_another_currency_needs_a_rate


def test_active_cost_allocation_tags_book_lines_the_names_cannot(
    spark: Any, events: Path, tmp_path: Path
) -> None:
    """A queue outside the naming rule (an application's own name for its destination),
    tagged by `install` and the templates: booked by its tags in CUR 2.0 (a map with
    `user_` keys) and in FOCUS (a JSON object with `user:` keys)."""
    tag = {"user_sqsdelay_component": "destination-queue", "user_sqsdelay_destination": "orders"}
    line = {
        **cur2().iloc[3].to_dict(),
        "identity_line_item_id": "li-tagged",
        "line_item_resource_id": f"{ACCOUNT}:orders-legacy",
        "pricing_public_on_demand_cost": 2.0,
        "line_item_unblended_cost": 2.0,
        "line_item_net_unblended_cost": 1.8,
    }
    cur = pd.concat([cur2(), pd.DataFrame([line])], ignore_index=True)
    cur["resource_tags"] = [
        list(tag.items()) if r.endswith("legacy") else [] for r in cur["line_item_resource_id"]
    ]
    bill = tmp_path / "cur.parquet"
    table = pa.Table.from_pandas(cur, preserve_index=False)
    index = table.schema.get_field_index("resource_tags")
    as_map = pa.array(cur["resource_tags"], type=pa.map_(pa.string(), pa.string()))
    pq.write_table(table.set_column(index, "resource_tags", as_map), bill)  # as CUR 2.0 has it
    notes = " ".join(report(spark, events, tmp_path, [str(bill)]).summary["bill_notes"])
    # the destination queue's lines: 1.00 list (0.90 paid) by name, 2.00 (1.80 paid) by tags
    assert "destination queues' lines (2.70 USD billed) are not split" in notes
    f = focus()
    f = pd.concat([f, f.iloc[[3]].assign(ResourceId=f"{ACCOUNT}:orders-legacy", ListCost=2.0,
                                         BilledCost=1.8)], ignore_index=True)  # fmt: skip
    f["Tags"] = [
        json.dumps({k.replace("user_", "user:").replace("_", ":"): v for k, v in tag.items()})
        if str(r).endswith("legacy")
        else "{}"
        for r in f["ResourceId"]
    ]
    bill = tmp_path / "focus.parquet"
    f.to_parquet(bill)
    notes = " ".join(report(spark, events, tmp_path, [str(bill)]).summary["bill_notes"])
    assert "destination queues' lines (2.70 USD billed) are not split" in notes


def test_the_demos_bill_of_counted_calls_reconciles_request_for_request(
    spark: Any, events: Path, tmp_path: Path
) -> None:
    """`make demo` ends with this: the calls its worker and clients counted, as CUR 2.0."""
    from collections import Counter
    from datetime import UTC, datetime

    from sqsdelay.dev.demo_bill import cur_lines, write_bill

    calls = Counter(
        {
            ("ReceiveMessage", "orders-delay.fifo"): 1_500,
            ("SendMessageBatch", "orders-delay.fifo"): 500,
            ("SendMessage", "orders"): 70,  # a hand-over: the destination's line
            ("BatchGetItem", ""): 9,  # DynamoDB: no queue, not on the demo's bill
            ("GetSchedule", "sqsdelay"): 4,  # Scheduler: its group, not a queue
        }
    )
    lines = cur_lines(calls, datetime(2026, 1, 5, tzinfo=UTC), PRICING, "us-east-1")
    assert [(x["line_item_operation"], x["pricing_public_on_demand_cost"]) for x in lines] == [
        ("ReceiveMessage", 1_500 * 0.5e-6),
        ("SendMessage", 70 * 0.4e-6),
        ("SendMessageBatch", 500 * 0.5e-6),
    ]
    bill = write_bill(tmp_path / "bill.parquet", lines)
    [row] = [r for r in report(spark, events, tmp_path, [str(bill)]).summary["reconciliation"]]
    assert (row["destination"], row["month"], row["billed_requests"]) == (
        "orders",
        "2026-01",
        2_000,
    )
    assert row["list_usd"] == 0.001


def test_a_fifo_destinations_delay_and_staging_queues_are_booked_to_it(
    spark: Any, tmp_path: Path
) -> None:
    """Untagged lines of `shop-delay-fifo.fifo` and `shop-fifo-staging` are the delays of
    the FIFO destination `shop.fifo`; `shop.fifo` itself is its destination queue."""
    lines = cur2().iloc[[0, 0, 3]].reset_index(drop=True)
    lines["line_item_resource_id"] = [
        f"{ACCOUNT}:shop-delay-fifo.fifo", f"{ACCOUNT}:shop-fifo-staging", f"{ACCOUNT}:shop.fifo"
    ]  # fmt: skip
    path = tmp_path / "cur.csv"
    lines.to_csv(path, index=False)
    known = spark.createDataFrame([("shop.fifo",)], ["destination"])
    booked = read_bill(spark, [str(path)], Resources(known)).collect()
    got = sorted((r["component"], r["destination"], round(r["list"], 2)) for r in booked)
    assert got == [("delay-queue", "shop.fifo", 0.6), ("destination-queue", "shop.fifo", 1.0)]


def test_a_fifo_destinations_staging_queue_reconciles_with_its_bill_lines(
    spark: Any, tmp_path: Path
) -> None:
    """The bill books `shop-fifo-staging` to the delay-queue component of `shop.fifo` (by
    name, and by the tag `install` gives it); the estimate counts its standard requests
    there too, so a bill that matches the model shows no variance, folded or not. FOCUS tags
    the staging queue as the installer does."""
    from sqsdelay.aws.installer import queue_tags
    from sqsdelay.core.queue_trios import QueueSpec
    from sqsdelay.settings import Settings

    # 1,000 messages of 60 s (the sender's send into staging: 1 request, and the forward's
    # receive and delete, a tenth each) and 1,000 of 1,800 s (first send 1 and one batched
    # pass 0.2, FIFO; the hand-over, receive and delete a tenth each, standard), sent from
    # 1 to 21 January: 20 days of long polls on each queue, 86,400.
    times = pd.date_range("2026-01-01", "2026-01-21", periods=2_000, tz="UTC").floor("us")
    events = tmp_path / "events.parquet"
    pd.DataFrame(
        {
            "event": "delay.scheduled",
            "timestamp": times,
            "destination": "shop.fifo",
            "delay_seconds": [60, 1800] * 1_000,
            "size_bytes": 100,
        }
    ).to_parquet(events, coerce_timestamps="us")
    delay_queue, staging = 1_200 + 86_400, 1_200 + 300 + 86_400
    lines = cur2().iloc[[0, 3, 3]].reset_index(drop=True)
    lines["line_item_resource_id"] = [
        f"{ACCOUNT}:shop-delay-fifo.fifo", f"{ACCOUNT}:shop-fifo-staging", f"{ACCOUNT}:shop.fifo"
    ]  # fmt: skip
    lines["line_item_usage_amount"] = [delay_queue, staging, 100.0]
    public = [delay_queue * 0.5e-6, staging * 0.4e-6, 0.00005]
    for column in ("pricing_public_on_demand_cost", "line_item_unblended_cost"):
        lines[column] = public
    lines["line_item_net_unblended_cost"] = public
    bill = tmp_path / "cur.parquet"
    lines.to_parquet(bill)
    for top, name in ((200, "shop.fifo"), (0, "(other 1 destinations)")):
        out = tmp_path / f"top{top}"
        done = run_report(
            ReportRequest(
                inputs=[str(events)], output=str(out), pricing=PRICING, bills=[str(bill)], top=top
            ),
            spark=spark,
        )
        [row] = done.summary["reconciliation"]
        assert (row["destination"], row["month"]) == (name, "2026-01")
        assert row["estimated_requests"] == row["billed_requests"] == delay_queue + staging
        assert row["list_usd"] == row["estimated_usd"] == 0.08  # 0.0438 + 0.03516
        assert row["variance_usd"] == 0.0
        focus = pd.read_csv(out / "estimate-focus.csv").set_index("ResourceId")
        installed = Settings(max_native_delay_seconds=900)
        for role, queue in (("delay", "shop-delay-fifo.fifo"), ("staging", "shop-fifo-staging"),
                            ("destination", "shop.fifo")):  # fmt: skip
            tagged = queue_tags(QueueSpec(role, queue, "shop.fifo"), installed)
            assert json.loads(focus.loc[queue, "Tags"]) == tagged, (top, queue)
        assert focus.loc["shop-fifo-staging", "PricingQuantity"] == pytest.approx(staging)
