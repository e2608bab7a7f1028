"""Cost commands: cost-estimate, cost-report."""

from __future__ import annotations

from inspect import Parameter, Signature
from pathlib import Path
from typing import Annotated, Any

import typer

from sqsdelay.cli.app import command
from sqsdelay.cli.settings_flags import settings_of
from sqsdelay.core import quotas
from sqsdelay.core.delays import parse_delay
from sqsdelay.cost.options import REPORT_OPTIONS
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
    from sqsdelay.cost.money import estimate
    from sqsdelay.cost.pricing import load_pricing

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


def cost_report(ctx: typer.Context, output: Path, master: str | None, **given: Any) -> int:
    """Estimate what delayed delivery costs, per destination, usage month and delay band
    (Spark), next to the AWS bill when one is given.

    The delay queue cycle is SQSDELAY_MAX_NATIVE_DELAY_SECONDS (--max-native-delay-seconds)."""
    from rich.console import Console

    from sqsdelay.cost.classarchive import class_archive_file
    from sqsdelay.cost.options import ReportRequest, report_arguments
    from sqsdelay.cost.render.terminal import print_summary
    from sqsdelay.cost.run import run_report

    require("spark", "the cost report")
    arguments = report_arguments(given)
    settings = settings_of(ctx)
    console = Console(stderr=True)
    with console.status("cost report") as status:
        report = run_report(
            ReportRequest(
                **arguments,
                output=str(output),
                cycle_seconds=settings.max_native_delay_seconds,
                registry_table=settings.registry_table_name(),
                schedule_group=settings.schedule_group,
            ),
            master=master,
            class_archive=class_archive_file(settings.spark_class_archive),
            progress=lambda text: status.update(f"cost report: {text}"),
        )
    print_summary(report.summary, str(output), Console())
    return 0


def _report_signature() -> Signature:
    """cost-report's flags: `output` and `master`, and the options `cost/options.py`
    defines for the CLI and spark-submit both."""
    keyword = Parameter.KEYWORD_ONLY
    output = typer.Option(..., help="directory for report.html, CSVs, summary.json")
    master = typer.Option(None, help="Spark master (default local[2])")
    params = [
        Parameter("ctx", Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        Parameter("output", keyword, annotation=Path, default=output),
    ]
    for o in REPORT_OPTIONS:
        kind: Any = list[o.kind] if o.many else o.kind  # type: ignore[name-defined]
        if o.default is None:
            kind = kind | None
        option = typer.Option(o.default, o.option, help=o.help, min=o.least)
        params.append(Parameter(o.name, keyword, annotation=kind, default=option))
        if o.name == "input_format":  # where the help has always listed it
            params.append(Parameter("master", keyword, annotation=str | None, default=master))
    return Signature(params)


cost_report.__signature__ = _report_signature()  # type: ignore[attr-defined]
cost_report.__annotations__ = {
    p.name: p.annotation
    for p in cost_report.__signature__.parameters.values()  # type: ignore[attr-defined]
} | {"return": int}
command(cost_report)
