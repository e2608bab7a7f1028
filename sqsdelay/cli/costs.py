"""Cost commands: cost-estimate, cost-report."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from sqsdelay.cli.app import command
from sqsdelay.cli.settings_flags import settings_of
from sqsdelay.core import quotas
from sqsdelay.core.delays import parse_delay
from sqsdelay.errors import InvalidInput
from sqsdelay.extras import require


@command
def cost_estimate(
    delay: Annotated[str, typer.Option(help="delay in seconds")],
    size_bytes: Annotated[int, typer.Option(help="body + attributes")] = 1024,
    batch_fill: Annotated[
        int, typer.Option(help="messages per batch call, 1..10")
    ] = quotas.MAX_BATCH_ENTRIES,
    pricing: Annotated[Path | None, typer.Option(help="price file (YAML)")] = None,
) -> int:
    """Cost of one delayed message: the reference formula next to our exact and batched counts."""
    from sqsdelay.cost.pricing import estimate, load_pricing

    if size_bytes < 1:
        raise InvalidInput("--size-bytes must be at least 1")
    p = load_pricing(pricing)
    e = estimate(parse_delay(delay), size_bytes=size_bytes, batch_fill=batch_fill, pricing=p)
    cur = p.currency
    print(
        f"delay N = {e.delay_seconds:,} s, size {e.size_bytes:,} bytes, "
        f"FIFO P = {p.fifo_price:.8f} {cur} per request"
    )
    print(
        f"reference formula: C = N/900 = {e.reference_cycles:,.0f} cycles, "
        f"O = 2C = {e.reference_ops:,.0f} operations, T = O*P = {e.reference_cost:.5f} {cur}"
    )
    print(
        f"exact, unbatched:  {e.cycles:,} passes, {e.exact_requests:,.0f} requests, "
        f"{e.exact_cost:.5f} {cur}"
    )
    print(
        f"batched (fill {e.batch_fill}): {e.batched_requests:,.1f} requests, "
        f"{e.batched_cost:.5f} {cur}"
    )
    print(f"EventBridge Scheduler alternative: {e.scheduler_cost:.7f} {cur}")
    parked = "parked" if e.delay_seconds > e.park_after_seconds else "not parked"
    print(
        f"parked (SQSDELAY_PARKING=scheduler, threshold {e.park_after_seconds:,} s, {parked}): "
        f"{e.parked_requests:,.1f} requests + {e.parked_invocations:,.0f} Scheduler "
        f"invocation(s), {e.parked_cost:.7f} {cur}"
    )
    print(
        f"registry (SQSDELAY_REGISTRY=dynamodb), added: {e.registry_write_units:g} write + "
        f"{e.registry_read_units:,.1f} read request units, {e.registry_cost:.7f} {cur} "
        f"(parked: {e.parked_registry_cost:.7f} {cur})"
    )
    print(
        "why they differ: the reference counts 2 FIFO operations per 900 s; each pass really "
        "is a receive, a send and a delete (plus the first send and 64 KiB chunks), and "
        "batching shares each call among up to 10 messages."
    )
    return 0


@command
def cost_report(
    ctx: typer.Context,
    output: Annotated[Path, typer.Option(help="directory for report.html, CSVs, summary.json")],
    input: Annotated[
        list[str] | None, typer.Option(help="event log (JSON lines), CSV or Parquet; repeatable")
    ] = None,
    what_if: Annotated[Path | None, typer.Option(help="generate a workload from a spec")] = None,
    pricing: Annotated[Path | None, typer.Option(help="price file (YAML)")] = None,
    batch_fill: Annotated[
        int, typer.Option(help="messages per batch call, 1..10")
    ] = quotas.MAX_BATCH_ENTRIES,
    input_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="auto (by suffix), json, logfmt, csv, parquet, cwl-subscription; .gz is read",
        ),
    ] = "auto",
    master: Annotated[str | None, typer.Option(help="Spark master (default local[2])")] = None,
    bill: Annotated[
        list[str] | None,
        typer.Option(help="AWS Data Exports bill: CUR 2.0 or FOCUS 1.2 (Parquet or CSV/gzip)"),
    ] = None,
    bill_format: Annotated[str, typer.Option(help="auto (by suffix), parquet, csv")] = "auto",
    since: Annotated[
        datetime | None, typer.Option(help="only events at or after this time (UTC)")
    ] = None,
    until: Annotated[
        datetime | None, typer.Option(help="only events before this time (UTC)")
    ] = None,
    free_tier: Annotated[
        list[str] | None,
        typer.Option(help="apply the account's free tier: sqs, scheduler (default none)"),
    ] = None,
    currency: Annotated[
        str | None, typer.Option(help="report currency, other than the price list's")
    ] = None,
    exchange_rate: Annotated[
        float | None, typer.Option(help="units of --currency per unit of the price list's")
    ] = None,
    running: Annotated[
        Path | None,
        typer.Option(help="how sqsdelay runs (YAML: worker, task size, KMS...), for its cost"),
    ] = None,
    top_destinations: Annotated[
        int | None,
        typer.Option(min=1, help="destinations named in the tables, the rest summed (default 200)"),
    ] = None,
) -> int:
    """Estimate what delayed delivery costs, per destination, usage month and delay band
    (Spark), next to the AWS bill when one is given.

    The delay queue cycle is SQSDELAY_MAX_NATIVE_DELAY_SECONDS (--max-native-delay-seconds)."""
    from rich.console import Console
    from rich.table import Table

    from sqsdelay.cost.classarchive import class_archive_file
    from sqsdelay.cost.fold import TOP_DESTINATIONS
    from sqsdelay.cost.pricing import load_pricing
    from sqsdelay.cost.report import (
        comparison,
        money,
        reconciliation_table,
        running_lines,
        unit_money,
    )
    from sqsdelay.cost.run import run_report
    from sqsdelay.cost.running import load_running
    from sqsdelay.cost.whatif import load_what_if

    require("spark", "the cost report")
    if input and what_if:
        raise InvalidInput("give --input or --what-if, not both")
    if not 1 <= batch_fill <= 10:
        raise InvalidInput("--batch-fill must be 1..10")
    settings = settings_of(ctx)
    console = Console(stderr=True)
    p = load_pricing(pricing).converted(currency, exchange_rate)
    spec = load_what_if(what_if) if what_if else None
    costs_of_running = load_running(running)
    with console.status("cost report") as status:
        report = run_report(
            inputs=input or [],
            output=str(output),
            pricing=p,
            batch_fill=batch_fill,
            cycle_seconds=settings.max_native_delay_seconds,
            what_if=spec,
            input_format=input_format,
            master=master,
            class_archive=class_archive_file(settings.spark_class_archive),
            progress=lambda text: status.update(f"cost report: {text}"),
            bills=bill or [],
            bill_format=bill_format,
            since=since,
            until=until,
            free_tier=frozenset(free_tier or []),
            registry_table=settings.registry_table_name(),
            schedule_group=settings.schedule_group,
            running=costs_of_running,
            top=top_destinations or TOP_DESTINATIONS,
        )
    s = report.summary
    table = Table(title=f"{s['messages']:,} messages, {s['delayed_messages']:,} delayed")
    for col in ("model", "requests", f"cost ({s['currency']})"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for m in s["models"]:
        table.add_row(m["title"], f"{m['requests']:,.0f}", f"{m['cost']:,.2f}")
    out = Console()
    out.print(table)
    cur = s["currency"]
    out.print(
        f"average monthly estimate {money(s['average_monthly_estimated_cost'], cur)}; per "
        f"delayed message {unit_money(s['cost_per_delayed_message'], cur, 'delayed messages')}"
    )
    out.print(comparison(s))
    if s["reconciliation"]:
        out.print(reconciliation_table(s))
    for note in s["bill_notes"]:
        out.print(note)
    running_cost = ", ".join(f"{t} {money(v, cur)}" for t, v in running_lines(s))
    out.print(f"cost of running (estimated, for the window): {running_cost}")
    out.print(
        f"skipped: {s['input']['other_events']:,} other events, "
        f"{s['input']['malformed']:,} malformed lines"
    )
    out.print(f"report: {output}/report.html")
    return 0
