"""The Spark cost job with a real local SparkSession (session-scoped: one JVM start)."""

from __future__ import annotations

import html
import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sqsdelay.cost.focus import COLUMNS
from sqsdelay.cost.inputs import envelope_texts, read_scheduled
from sqsdelay.cost.job import aggregate
from sqsdelay.cost.money import priced, round_money
from sqsdelay.cost.options import ReportRequest
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.cost.request_counts import PythonOps, requests
from sqsdelay.cost.run import run_report
from sqsdelay.cost.whatif import WhatIf
from sqsdelay.cost.workload import generate
from sqsdelay.errors import InvalidInput
from tests.support.cost_events import INPUT_COUNTS, RECORDS, envelopes, write_event_log
from tests.support.logs import capture_logs, events
from tests.support.spark_jobs import collect_action, spark_jobs

pytestmark = pytest.mark.spark
PRICING = load_pricing()


def expected(field: str) -> float:
    total = 0.0
    for r in RECORDS:
        req = requests(r["delay_seconds"], r["size_bytes"], ops=PythonOps())
        total += getattr(req, field)
    return total


@pytest.fixture
def event_log(tmp_path: Path) -> Path:
    return write_event_log(tmp_path)


def models(agg: Any) -> Any:
    return priced(agg, PRICING, cycle_seconds=900, batch_fill=10)


def totals(agg: Any) -> dict[str, float]:
    shape = agg.shape
    sched = models(shape[shape["kind"] == "scheduled"])
    return {
        c: float(sched[c].sum())
        for c in (
            "messages",
            "delayed_messages",
            "exact_fifo",
            "exact_standard",
            "batched_fifo",
            "reference_ops",
            "cycles",
        )
    }


def test_exact_totals_on_a_hand_built_event_log(spark: Any, event_log: Path) -> None:
    agg = aggregate(read_scheduled(spark, [str(event_log)]), PRICING)
    t = totals(agg)
    assert t["messages"] == 4 and t["delayed_messages"] == 3
    for field in ("exact_fifo", "exact_standard", "batched_fifo", "reference_ops", "cycles"):
        assert t[field] == pytest.approx(expected(field)), field
    counts = agg.shape.groupby("kind")["messages"].sum().to_dict()
    # A bad line and a record without destination; a blank line is no record at all.
    assert counts == {"scheduled": 4, "other": 1, "malformed": 2}
    sched = agg.shape[agg.shape["kind"] == "scheduled"]
    sent = sched.groupby("month")["messages"].sum()
    # Counted where sent, UTC: 23:59:59Z stays in January.
    assert sent[sent > 0].to_dict() == {"2026-01": 2, "2026-02": 2}
    # The one-year delay sent on 31 January is used in every month up to January 2027.
    assert sorted(sched["month"].unique()) == [f"2026-{m:02d}" for m in range(1, 13)] + ["2027-01"]


def test_the_roll_ups_on_the_driver_are_sparks(
    spark: Any, event_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grouped result over the budget is rolled up by Spark, else by pandas on the driver
    (cost/job.py): the same rows either way, null keys and all."""
    from sqsdelay.cost import job

    def rows(frame: Any) -> list[tuple[Any, ...]]:
        nulled = [
            tuple(None if v != v else v for v in row)  # NaN and None are both a null
            for row in frame.astype(object).itertuples(index=False)
        ]
        return sorted(nulled, key=lambda row: [(v is None, str(v)) for v in row])

    with spark_jobs(spark) as jobs:
        local = aggregate(read_scheduled(spark, [str(event_log)]), PRICING)
    # Two actions: the input's one pass (a checkpoint of the grouped rows) and their
    # collect. (The adaptive plan runs its stages as jobs named `$anonfun...` on Spark 4,
    # after the action on 3.5; the limit's tries, one or two.) A count of the grouped rows
    # before the collect, and the cache read again, made 11 jobs.
    actions = {name.split(" at ")[0] for name in jobs if not name.startswith("$anonfun")}
    assert actions == {"localCheckpoint", collect_action(spark)}, jobs
    # the checkpoint's blocks are freed by the release, not left to the JVM's collector
    (grouped,) = local.cached
    sc = spark.sparkContext._jsc.sc()  # its persistent RDDs by id (a copy each call)
    rdd = grouped._jdf.queryExecution().analyzed().rdd().id()
    assert sc.getPersistentRDDs().contains(rdd)
    local.release()
    assert not sc.getPersistentRDDs().contains(rdd)
    monkeypatch.setattr(job, "GROUP_ROW_BUDGET", 0)
    in_spark = aggregate(read_scheduled(spark, [str(event_log)]), PRICING)
    in_spark.release()
    # and as on a cluster, where the grouped rows are cached, not a local checkpoint
    monkeypatch.setattr(job, "CHECKPOINT_ON_LOCAL_MASTER", False)
    with spark_jobs(spark) as jobs:
        cached = aggregate(read_scheduled(spark, [str(event_log)]), PRICING)
    assert not any(name.startswith("localCheckpoint") for name in jobs), jobs
    assert cached.cached[0].is_cached
    cached.release()
    assert not cached.cached[0].is_cached
    for other in (in_spark, cached):
        for name in ("shape", "destinations"):
            mine, theirs = getattr(local, name), getattr(other, name)
            assert list(mine.columns) == list(theirs.columns), name
            a, b = rows(mine), rows(theirs)
            assert len(a) == len(b) > 0, name
            for x, y in zip(a, b, strict=True):  # sums added in another order: to 1e-9
                for u, v in zip(x, y, strict=True):
                    if isinstance(u, float) or isinstance(v, float):
                        assert u == pytest.approx(v, rel=1e-9, abs=1e-9), name
                    else:
                        assert u == v, name


def test_csv_and_parquet_give_the_same_totals(spark: Any, event_log: Path, tmp_path: Path) -> None:
    import pandas as pd
    from pyspark.sql import types as T

    frame = pd.DataFrame(RECORDS)
    frame.to_csv(tmp_path / "events.csv", index=False)
    frame.to_parquet(tmp_path / "events.parquet")
    # typed times, with their zone and without (pandas' naive datetimes: Spark's
    # TIMESTAMP_NTZ, read as UTC wall time)
    typed = pd.to_datetime(frame["timestamp"], utc=True, format="ISO8601").dt.floor("us")
    frame.assign(timestamp=typed).to_parquet(tmp_path / "typed.parquet", coerce_timestamps="us")
    naive = frame.assign(timestamp=typed.dt.tz_localize(None))
    naive.to_parquet(tmp_path / "naive.parquet", coerce_timestamps="us")
    assert spark.read.parquet(str(tmp_path / "naive.parquet")).schema["timestamp"].dataType == (
        T.TimestampNTZType()
    )
    from_json = aggregate(read_scheduled(spark, [str(event_log)]), PRICING)

    def sent_by_month(agg: Any) -> dict[str, float]:
        return dict(agg.shape.groupby("month")["messages"].sum())

    for name in ("events.csv", "events.parquet", "typed.parquet", "naive.parquet"):
        agg = aggregate(read_scheduled(spark, [str(tmp_path / name)]), PRICING)
        assert totals(agg) == totals(from_json), name
        # in the same months (a time read in another zone moves 31 January 23:59:59 on)
        assert sent_by_month(agg) == sent_by_month(from_json), name
        assert (agg.start, agg.end) == (from_json.start, from_json.end), name


def test_subscription_envelopes_and_firehose_objects_give_the_same_totals(
    spark: Any, event_log: Path, tmp_path: Path
) -> None:
    """As a subscription delivers them (one envelope a line) and as Firehose writes them to
    S3 (gzip members back to back, no line breaks)."""
    import gzip

    plain = totals(aggregate(read_scheduled(spark, [str(event_log)]), PRICING))
    docs = envelopes(event_log.read_text().splitlines())
    lined = tmp_path / "subscription.json"
    lined.write_text("\n".join(docs))
    firehose = tmp_path / "firehose-1-2026-01-31.gz"
    firehose.write_bytes(b"".join(gzip.compress(d.encode()) for d in docs))
    for path in (lined, firehose):
        rows = read_scheduled(spark, [str(path)], "cwl-subscription")
        assert totals(aggregate(rows, PRICING)) == plain, path.name


def test_a_broken_gzip_member_ends_its_file_without_failing_the_job() -> None:
    import gzip

    docs = envelopes(["{}", "{}"], per=1)
    good = b"".join(gzip.compress(d.encode()) for d in docs)
    assert list(envelope_texts(good + b"\x1f\x8b not gzip")) == docs
    assert list(envelope_texts("\n".join(docs).encode())) == docs
    assert list(envelope_texts(b"")) == [""]  # one empty document: no envelope


def test_what_if_generates_the_workload_inside_spark(spark: Any) -> None:
    spec = WhatIf.model_validate(
        {
            "messages_per_day": 100,
            "months": 2,
            "start": "2026-03-01",
            "destinations": 4,
            "delay_seconds": {"kind": "fixed", "value": 1925},
            "seed": 1,
        }
    )
    whole = aggregate(generate(spark, spec), PRICING)
    agg = models(whole.shape)
    assert spec.days == 61 and agg["messages"].sum() == 6100
    sent = agg.groupby("month")["messages"].sum()
    assert set(sent[sent > 0].index) == {"2026-03", "2026-04"}
    assert set(agg["month"]) == {"2026-03", "2026-04", "2026-05"}  # 30 April's last hops
    assert whole.destinations["destination"].nunique() == 4 and not whole.folded
    assert agg["exact_fifo"].sum() == 6100 * 6 and agg["delayed_messages"].sum() == 6100


@pytest.mark.parametrize(
    "dist",
    [
        {"kind": "uniform", "min": 0, "max": 1800},
        {"kind": "lognormal", "mu": 7, "sigma": 1},
        {"kind": "histogram", "buckets": [[900, 1], [3600, 1]]},
    ],
)
def test_what_if_distributions(spark: Any, dist: dict[str, Any]) -> None:
    spec = WhatIf.model_validate({"messages_per_day": 2000, "delay_seconds": dist})
    agg = aggregate(generate(spark, spec), PRICING).shape
    share = agg["routed"].sum() / agg["messages"].sum()
    assert 0.2 < share < 0.95  # some direct, some through the delay queue


def test_a_release_that_fails_loses_no_report(
    spark: Any, event_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Freeing the rows the report kept in Spark comes after its figures: a failure there (a
    py4j call) is a warning, and the report is written all the same. Each frame is freed
    whatever became of the others."""
    from sqsdelay.cost import job

    freed: list[Any] = []
    unkept = job.unkept

    def broken(frame: Any) -> None:
        unkept(frame)  # the shared session keeps nothing of this test's
        freed.append(frame)
        raise RuntimeError("py4j: unpersist failed")

    monkeypatch.setattr(job, "unkept", broken)
    out = capture_logs()
    report = run_report(
        ReportRequest(inputs=[str(event_log)], output=str(tmp_path), pricing=PRICING), spark=spark
    )
    assert json.loads((tmp_path / "summary.json").read_text())["input"] == INPUT_COUNTS
    assert report.summary["input"] == INPUT_COUNTS
    [warned] = events(out, "cost.release_failed")
    assert warned["level"] == "warning" and warned["error"] == "RuntimeError"
    assert freed  # the real release ran first


def test_each_kept_frame_is_freed_whatever_became_of_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sqsdelay.cost import job

    tried: list[str] = []

    def unkept(frame: str) -> None:
        tried.append(frame)
        if frame != "bill lines":
            raise RuntimeError(f"py4j: {frame}")

    monkeypatch.setattr(job, "unkept", unkept)
    agg = job.Aggregate(*[None] * 8, cached=["grouped", "per month", "bill lines"])
    with pytest.raises(RuntimeError, match="py4j: grouped"):
        agg.release()
    assert tried == ["grouped", "per month", "bill lines"]


def test_report_files_and_summary(spark: Any, event_log: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    report = run_report(
        ReportRequest(inputs=[str(event_log)], output=str(out), pricing=PRICING), spark=spark
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["input"] == INPUT_COUNTS
    exact = next(m for m in summary["models"] if m["model"] == "exact")
    assert exact["requests"] == pytest.approx(expected("exact_fifo") + expected("exact_standard"))
    assert summary == {**report.summary, "assumptions": report.assumptions}
    registry = expected("registry_writes") * 0.625e-6 + expected("registry_reads") * 0.125e-6
    assert summary["registry_cost"] == round_money(registry) and registry > 0.001
    assert round_money(0.00220725) == 0.0022 and round_money(12.345678) == 12.35
    for name in ("by_destination", "by_month", "by_band", "delay_histogram", "models"):
        assert (out / f"{name}.csv").stat().st_size > 0
    import pandas as pd

    book = pd.read_excel(out / "report.xlsx", sheet_name=None, index_col=0)
    assert list(book) == list(report.tables)
    by_month = book["by_month"]
    assert by_month.index[-1] == "total"
    # the totals row is the sum of what the sheet shows, itself rounded as money
    shown = by_month["batched_cost"][:-1]
    assert by_month["batched_cost"].iloc[-1] == round_money(float(shown.sum()))
    # the estimate as FOCUS 1.2 rows: the same money as the usage months' estimate
    focus = pd.read_csv(out / "estimate-focus.csv")
    assert list(focus.columns) == COLUMNS and focus["x_Estimate"].all()
    by_period = focus.groupby(focus["ChargePeriodStart"].str[:7])["ListCost"].sum()
    assert {m: round_money(v) for m, v in by_period.items()} == summary["monthly_estimated_cost"]
    assert set(focus["ServiceName"]) == {"Amazon Simple Queue Service"}  # registry off
    delay_queues = focus[focus["ResourceId"].str.endswith("-delay.fifo")]
    assert set(delay_queues["ResourceId"]) == {"orders-delay.fifo", "billing-delay.fifo"}
    assert {json.dumps(json.loads(t), sort_keys=True) for t in delay_queues["Tags"]} == {
        json.dumps({"sqsdelay:component": "delay-queue", "sqsdelay:destination": d})
        for d in ("orders", "billing")
    }
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 3 and "Assumptions" in page and "registry (added)" in page
    assert "Cost of running (estimated, for the window)" in page and "ECS: 1 task(s)" in page
    # one task of 0.25 vCPU and 0.5 GB over the window
    hours = (
        datetime.fromisoformat(summary["window"]["end"])
        - datetime.fromisoformat(summary["window"]["start"])
    ).total_seconds() / 3600
    compute = hours * (0.25 * 0.04048 + 0.5 * 0.004445)
    assert summary["cost_of_running"]["worker_compute"] == round_money(compute)
    assert "<script" not in page and "<link" not in page and "src=" not in page  # offline


def test_report_can_be_published_to_a_hadoop_uri(
    spark: Any, event_log: Path, tmp_path: Path
) -> None:
    target = tmp_path / "published"
    run_report(
        ReportRequest(inputs=[str(event_log)], output=target.as_uri(), pricing=PRICING), spark=spark
    )
    assert (target / "report.html").exists() and (target / "summary.json").exists()


def test_empty_input_is_a_clear_message(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(json.dumps({"event": "worker.stats"}) + "\nnot json\n")
    with pytest.raises(InvalidInput, match=r"no delay\.scheduled records") as info:
        run_report(
            ReportRequest(inputs=[str(path)], output=str(tmp_path / "o"), pricing=PRICING),
            spark=spark,
        )
    assert "other events: 1, malformed lines: 1" in str(info.value)


def test_missing_input_path(spark: Any, event_log: Path, tmp_path: Path) -> None:
    """A missing local file is named before Spark starts; a glob (or a URI) that matches
    nothing, by Spark."""
    missing = str(tmp_path / "nope.jsonl")
    for inputs, bills in (([missing], []), ([str(event_log)], [missing])):
        with pytest.raises(InvalidInput, match=f"^input not found: {missing}$"):
            run_report(
                ReportRequest(
                    inputs=inputs, bills=bills, output=str(tmp_path / "o"), pricing=PRICING
                ),
                spark=spark,
            )
    with pytest.raises(InvalidInput, match="input not found"):
        run_report(
            ReportRequest(
                inputs=[str(tmp_path / "nothing-*.jsonl")],
                output=str(tmp_path / "o"),
                pricing=PRICING,
            ),
            spark=spark,
        )


def test_a_report_leaves_the_callers_session_running(
    spark: Any, event_log: Path, tmp_path: Path
) -> None:
    run_report(
        ReportRequest(inputs=[str(event_log)], output=str(tmp_path / "out"), pricing=PRICING)
    )
    assert spark.range(2).count() == 2


def test_python_has_minutes_not_seconds_to_fetch_a_collect(spark: Any) -> None:
    """A collect waits for Python to connect to the JVM's socket: at Spark's 15 s a starved
    driver (nice 10, a saturated machine) missed it and then waited forever."""
    assert spark.conf.get("spark.python.authenticate.socketTimeout") == "600s"
    assert spark.range(3).toPandas()["id"].tolist() == [0, 1, 2]


def chromium() -> str | None:
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser")


def page_metrics(html_path: Path, tmp_path: Path, width: int = 1100) -> dict[str, int]:
    """Load a copy of the page in headless Chromium at `width` px and read its layout."""
    probe = tmp_path / "probe.html"
    script = (
        "<script>const d=document.documentElement;document.title=JSON.stringify({"
        "scroll:d.scrollWidth,client:d.clientWidth,height:d.scrollHeight,"
        "tables:[...document.querySelectorAll('table')].filter("
        "t=>t.getBoundingClientRect().right>d.clientWidth).length})</script>"
    )
    probe.write_text(html_path.read_text().replace("</body>", script + "</body>"))
    done = subprocess.run(
        [
            str(chromium()),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            f"--window-size={width},900",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    title = done.stdout.split("<title>", 1)[1].split("</title>", 1)[0]
    return dict(json.loads(html.unescape(title)))


@pytest.mark.skipif(chromium() is None, reason="Chromium is not installed (apt install chromium)")
def test_the_report_fits_1100_px_in_chromium(spark: Any, tmp_path: Path) -> None:
    spec = WhatIf.model_validate(
        {
            "messages_per_day": 2000,
            "months": 6,
            "start": "2026-07-01",
            "destinations": 12,
            "delay_seconds": {"kind": "lognormal", "mu": 9, "sigma": 2.5},
        }
    )
    out = tmp_path / "report"
    run_report(
        ReportRequest(inputs=[], what_if=spec, output=str(out), pricing=PRICING), spark=spark
    )
    metrics = page_metrics(out / "report.html", tmp_path)
    assert metrics["scroll"] <= metrics["client"], metrics
    assert metrics["tables"] == 0, metrics
    import re

    text = re.sub(r"<svg.*?</svg>", "", (out / "report.html").read_text(), flags=re.S)
    assert "e-0" not in text and "<th></th>" not in text  # no 5.95e-06, no index-name row
    page = text
    assert page.count("class=total") == 3  # month, destination, band
    assert "is the cheapest at" in page


def test_the_estimate_follows_the_route_each_message_took(spark: Any, tmp_path: Path) -> None:
    """A 30-day delay the sender parked costs a Scheduler invocation and one pass through
    the delay queue, not 2,879 passes: the estimate (and the reconciliation's delay-queue
    requests) price the route the event names; the models still compare every route."""
    summaries = {}
    for route in ("delay-queue", "parked"):
        log = tmp_path / f"{route}.jsonl"
        line = {"event": "delay.scheduled", "destination": "orders", "delay_seconds": 2_592_000}
        line |= {"size_bytes": 100, "timestamp": "2026-01-01T00:00:00Z", "route": route}
        log.write_text(json.dumps(line) + "\n")
        out = tmp_path / route
        report = run_report(
            ReportRequest(inputs=[str(log)], output=str(out), pricing=PRICING), spark=spark
        )
        months = report.tables["by_month"]
        summaries[route] = (
            float(months["estimated_fifo"].sum()),
            float(months["estimated_invocations"].sum()),
            [m["requests"] for m in report.summary["models"]],
        )
    looping, parked = summaries["delay-queue"], summaries["parked"]
    # the send, then 2,879 batched passes of a receive, a send and a delete, less the last
    # send (the hand-over, a standard request)
    assert looping[0] == pytest.approx(1 + (3 * 2_879 - 1) / 10)
    assert parked[0] < 3 and (looping[1], parked[1]) == (0, 1)
    assert looping[2] == parked[2]  # the models side by side do not depend on the route


def test_the_librarys_logfmt_lines_in_an_applications_log(
    spark: Any, event_log: Path, tmp_path: Path
) -> None:
    """A sending application that never configured sqsdelay's logging: its own handler and
    format, its own lines around ours. `--format logfmt` reads our events from it; inside
    CloudWatch Logs envelopes they are read the same way."""
    import logging

    from sqsdelay.logs import get_logger

    path = tmp_path / "app.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    app = logging.getLogger("app")
    ours = logging.getLogger("sqsdelay.test.app")
    for logger in (app, ours):
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    log = get_logger("sqsdelay.test.app")
    for i, r in enumerate(RECORDS):
        app.info("handling order %s with event=foo in the text", i)
        fields = {k: v for k, v in r.items() if k != "timestamp"}
        log.info(
            "delay.scheduled", message_id=f"m {i}", route="x", timestamp=r["timestamp"], **fields
        )
    log.info("delay.scheduled", delay_seconds=5)  # no destination: malformed
    handler.close()
    text = path.read_text()
    assert 'message_id="m 0"' in text and "handling order" in text
    plain = aggregate(read_scheduled(spark, [str(event_log)]), PRICING)
    logfmt = aggregate(read_scheduled(spark, [str(path)], "logfmt"), PRICING)
    assert totals(logfmt) == totals(plain)
    counts = logfmt.shape.groupby("kind")["messages"].sum().to_dict()
    assert counts == {"scheduled": 4, "malformed": 1}  # the application's lines are not input
    wrapped = tmp_path / "subscription.json"
    wrapped.write_text("\n".join(envelopes(text.splitlines())))
    in_envelopes = aggregate(read_scheduled(spark, [str(wrapped)], "cwl-subscription"), PRICING)
    assert totals(in_envelopes) == totals(plain)
    counts = in_envelopes.shape.groupby("kind")["messages"].sum().to_dict()
    assert counts == {"scheduled": 4, "malformed": 1, "other": 4}  # the application's lines


def test_window_bounds_without_an_offset_are_utc_however_the_job_is_started(
    spark: Any, event_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spark-submit passes `--since 2026-02-01` as a time without an offset; pyspark would
    read it in the driver's local zone. The job takes it as UTC, as the CLI does."""
    import time

    out = str(tmp_path / "r")
    with pytest.raises(InvalidInput, match="--since must be before --until"):
        run_report(
            ReportRequest(
                inputs=[str(event_log)],
                output=out,
                pricing=PRICING,
                since=datetime(2026, 2, 1),
                until=datetime(2026, 1, 1),
            ),
            spark=spark,
        )
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        report = run_report(
            ReportRequest(
                inputs=[str(event_log)], output=out, pricing=PRICING, since=datetime(2026, 2, 1)
            ),
            spark=spark,
        )
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    # the two records sent from 2026-02-01T00:00:00Z on; New York's midnight would drop one
    assert report.summary["input"]["scheduled"] == 2


def test_a_fifo_destination_is_priced_with_its_forwards_and_its_staging_queue(
    spark: Any, tmp_path: Path
) -> None:
    """The same three messages (no delay, a minute, an hour) to a standard and to a FIFO
    destination: the FIFO one's message without a delay is a FIFO send; each delayed one is
    handed over to the staging queue and forwarded (a receive and a delete there, standard,
    and a FIFO send into the destination, each a tenth of a batch); its staging queue is
    long-polled like the delay queue; the FOCUS rows name the staging queue and price the
    destination's own requests as FIFO."""
    import pandas as pd

    lines = [
        {"event": "delay.scheduled", "timestamp": "2026-01-10T00:00:00Z", "destination": d,
         "delay_seconds": delay, "size_bytes": 100}
        for d in ("orders", "jobs.fifo") for delay in (0, 60, 3600)
    ]  # fmt: skip
    # the window (and so the idle polling) runs to the last send
    lines.append({**lines[0], "timestamp": "2026-01-20T00:00:00Z", "destination": "tick"})
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join(json.dumps(x) for x in lines))
    done = run_report(
        ReportRequest(inputs=[str(log)], output=str(tmp_path / "out"), pricing=PRICING), spark=spark
    )
    d = done.tables["by_destination"]
    std, fifo = d.loc["orders"], d.loc["jobs.fifo"]
    assert fifo["estimated_fifo"] == pytest.approx(std["estimated_fifo"])  # the delay queue's
    assert std["estimated_destination_fifo"] == 0
    assert fifo["estimated_destination_fifo"] == pytest.approx(1 + 0.1 + 0.1)
    assert fifo["estimated_standard"] - std["estimated_standard"] == pytest.approx(-1 + 0.2 + 0.2)
    assert fifo["staging_poll_requests"] == pytest.approx(fifo["idle_poll_requests"])
    assert fifo["staging_poll_requests"] > 0
    assert std["staging_poll_requests"] == 0
    extra = 1.2 * PRICING.fifo_price - 0.6 * PRICING.standard_price
    extra += fifo["staging_poll_requests"] * PRICING.standard_price
    assert fifo["batched_cost"] + fifo["idle_poll_cost"] == pytest.approx(
        std["batched_cost"] + std["idle_poll_cost"] + extra
    )
    rows = pd.read_csv(tmp_path / "out" / "estimate-focus.csv")
    by_resource = rows.groupby("ResourceId")["ListCost"].sum()
    assert set(by_resource.index) == {
        "orders", "orders-delay.fifo", "jobs.fifo", "jobs-delay-fifo.fifo", "jobs-fifo-staging",
        "tick",
    }  # fmt: skip
    staging = rows[rows["ResourceId"] == "jobs-fifo-staging"]
    assert set(staging["ListUnitPrice"]) == {PRICING.standard_price}
    assert staging["PricingQuantity"].sum() == pytest.approx(
        fifo["estimated_standard"] + fifo["staging_poll_requests"]
    )
    own = rows[rows["ResourceId"] == "jobs.fifo"]
    assert set(own["ListUnitPrice"]) == {PRICING.fifo_price}
    assert own["PricingQuantity"].sum() == pytest.approx(1.2)
