"""Operations commands: install, worker, inspect, replay-errors, pause, resume, paused."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from sqsdelay.cli.app import command
from sqsdelay.cli.settings_flags import settings_of
from sqsdelay.errors import InvalidInput
from sqsdelay.settings import Settings

if TYPE_CHECKING:  # the AWS adapters load only when a command needs them
    from sqsdelay.aws.installer import QueueReport, ResourceReport


def _opt(help_text: str) -> Any:
    return typer.Option(help=help_text, show_default=False)


@command
def install(
    ctx: typer.Context,
    queues: Annotated[list[str], typer.Argument(help="destination queues")],
    check: Annotated[bool, typer.Option("--check", help="only validate")] = False,
    fix: Annotated[bool, typer.Option("--fix", help="correct what can be corrected")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="with --fix: change DelaySeconds of a non-empty queue, or lower it below 900",
        ),
    ] = False,
) -> int:
    """Create (idempotently), check or fix each destination, its delay queue and the error queue."""
    from sqsdelay.aws.installer import Installer

    if check and fix:
        raise InvalidInput("--check and --fix exclude each other")
    settings = settings_of(ctx)
    installer = Installer(settings)
    problems = 0
    reports = installer.run(queues, create=not check, fix=fix, force=force)
    if check:  # a Lambda worker's timeout against its queue's visibility timeout
        installer.check_triggers(reports)
    for r in reports:
        problems += _print_report(r.spec.role, r.spec.name, r.created, r.url is not None, r)
    if settings.parking == "scheduler":
        group = installer.schedule_group(queues, create=not check)
        problems += _print_report("schedules", group.name, group.created, group.exists, group)
    elif check:
        group = installer.schedules_left()
        if group.problems:
            problems += _print_report("schedules", group.name, False, group.exists, group)
    if settings.registry == "dynamodb":
        table = installer.registry_table(queues, create=not check)
        problems += _print_report("registry", table.name, table.created, table.exists, table)
    print("ok" if not problems else f"{problems} problem(s)")
    return 1 if problems else 0


def _print_report(
    role: str, name: str, created: bool, exists: bool, report: QueueReport | ResourceReport
) -> int:
    """Print what `install` found of one resource; the number of problems (not warnings)."""
    state = "created" if created else ("exists" if exists else "missing")
    print(f"{role:<11} {name}: {state}")
    for fixed in report.fixed:
        print(f"  fixed: {fixed}")
    for p in report.problems:
        kind = "warning" if p.warning else "problem"
        print(f"  {kind}: {p.problem}\n    fix: {p.fix}")
    return sum(not p.warning for p in report.problems)


@command
def worker(
    ctx: typer.Context,
    queues: Annotated[
        list[str] | None,
        typer.Argument(help="destination queues to drain (default: SQSDELAY_QUEUES)"),
    ] = None,
    concurrency: Annotated[int | None, _opt("receive loops per queue under load")] = None,
    all_queues: Annotated[
        bool,
        typer.Option(
            "--all", help="every delay queue under SQSDELAY_QUEUE_PREFIX, found while running"
        ),
    ] = False,
) -> int:
    """Run the delay worker until SIGTERM/SIGINT (the ECS service)."""
    import asyncio

    from sqsdelay.aws.worker import Worker
    from sqsdelay.core.discovery import ALL

    settings = settings_of(ctx, concurrency=concurrency)
    names = [ALL] if all_queues else queues or settings.queues
    if not names:
        raise InvalidInput(
            "no queues: give them as arguments (sqsdelay worker orders billing), set "
            "SQSDELAY_QUEUES=orders,billing, or drain every delay queue under the prefix "
            "with --all (SQSDELAY_QUEUES=*)"
        )
    if ALL in names and len(names) > 1:
        raise InvalidInput("* (every delay queue under the prefix) stands alone: drop the others")
    asyncio.run(Worker(settings, names).run())
    return 0


@command
def inspect(
    ctx: typer.Context,
    queues: Annotated[list[str] | None, typer.Argument(help="destination queues")] = None,
    all_queues: Annotated[
        bool, typer.Option("--all", help="every delay queue under SQSDELAY_QUEUE_PREFIX")
    ] = False,
    lambdas: Annotated[
        list[str] | None,
        typer.Option(
            "--lambda",
            help="a Lambda worker function to check too (its recursive loop detection)",
        ),
    ] = None,
) -> int:
    """Configuration check plus visible / in-flight / delayed counts of every queue."""
    from sqsdelay.aws.operations import discovered, lambda_problems
    from sqsdelay.aws.operations import inspect as inspect_queues

    settings = settings_of(ctx)
    if all_queues:
        queues = discovered(settings)
        if not queues:
            raise InvalidInput(
                f"no delay queues under the prefix {settings.queue_prefix!r}: create one "
                "with sqsdelay install DESTINATION"
            )
    if not queues:
        raise InvalidInput("name the destination queues, or give --all")
    states = inspect_queues(settings, queues)
    table = Table(title="sqsdelay queues")
    for col in ("role", "queue", "visible", "in flight", "delayed", "check"):
        table.add_column(
            col, justify="right" if col in ("visible", "in flight", "delayed") else "left"
        )
    problems = 0
    fixes: list[str] = []
    for st in states:
        r = st.report
        check = "; ".join(f"{'warning: ' if p.warning else ''}{p.problem}" for p in r.problems)
        problems += sum(not p.warning for p in r.problems)
        fixes.extend(p.fix for p in r.problems if p.fix not in fixes)
        c = st.counts
        table.add_row(
            r.spec.role,
            r.spec.name,
            *(str(c.get(k, "-")) for k in ("visible", "in_flight", "delayed")),
            check or "ok",
        )
    console = Console(width=160)
    console.print(table)
    for p in lambda_problems(settings, lambdas or []):
        print(f"lambda {p.queue}: problem: {p.problem}")
        problems += 1
        fixes.append(p.fix)
    for fix in fixes:  # plain lines, so that they can be copied whole
        print(f"fix: {fix}")
    _print_metrics(console, settings_of(ctx), queues)
    return 1 if problems else 0


def _print_metrics(console: Console, settings: Settings, queues: list[str]) -> None:
    """The due windows of the last cycle and the last hour's lateness, from CloudWatch."""
    from sqsdelay.aws.cloudwatch import read_metrics
    from sqsdelay.aws.queue_urls import QueueResolver
    from sqsdelay.core.metrics import WINDOWS

    resolver = QueueResolver(settings)
    report = read_metrics(settings, [resolver.trio(q).destination for q in queues])
    if report.error:
        print(
            f"metrics: cannot read CloudWatch ({report.error}); the operator needs "
            "cloudwatch:GetMetricData"
        )
        return
    start = report.cycle_end.timestamp() - report.cycle_seconds
    table = Table(
        title=f"metrics (CloudWatch, namespace {settings.metrics_namespace}): waiting in the "
        f"loop in the cycle {_hhmm(start)}–{_hhmm(report.cycle_end.timestamp())} UTC, "
        "hand-overs in the last hour"
    )
    columns = ["destination", "due ≤ 1 h", "≤ 1 d", "≤ 30 d", "later", "handed over"]
    for col in [*columns, "lateness p50", "p99", "max"]:
        table.add_column(col, justify="left" if col == "destination" else "right")
    for m in report.destinations:
        if m.empty:
            table.add_row(m.destination, "no metrics yet", *[""] * 7)
            continue
        late = m.lateness_ms
        shown = [f"{late[k] / 1000:.2f} s" if k in late else "-" for k in ("p50", "p99", "max")]
        table.add_row(
            m.destination,
            *(str(m.due.get(name, 0)) for _, name in WINDOWS),
            str(int(late.get("count", 0))),
            *shown,
        )
    console.print(table)


def _hhmm(epoch: float) -> str:
    return time.strftime("%H:%M", time.gmtime(epoch))


@command
def replay_errors(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="destination whose failed messages to replay")],
    limit: Annotated[int, typer.Option(help="replay at most this many messages")] = 100,
    scan: Annotated[
        int, typer.Option(help="look at no more than this many messages of the error queue")
    ] = 1000,
) -> int:
    """Move failed messages of QUEUE from the error queue back to its delay queue (and
    EventBridge Scheduler's dead letters to where their schedule sends: docs/schedules.md)."""
    from sqsdelay.aws.operations import replay_errors as replay

    if limit < 1 or scan < 1:
        raise InvalidInput("--limit and --scan must be at least 1")
    result = replay(settings_of(ctx), queue, limit=limit, scan=scan)
    print(
        json.dumps(
            {
                "replayed": len(result.replayed),
                "skipped": result.skipped,
                "failed": result.failed,
                "replayed_not_deleted": result.not_deleted,
            }
        )
    )
    if result.not_deleted:
        # Sent and still in the error queue: a second run may deliver a second copy.
        print(
            f"{len(result.not_deleted)} replayed but not deleted from the error queue: "
            "a run again sends them again (docs/schedules.md#sent-but-not-deleted)",
            file=sys.stderr,
        )
    return 1 if result.failed or result.not_deleted else 0


@command
def pause(
    ctx: typer.Context,
    queues: Annotated[list[str], typer.Argument(help="destination queues to pause")],
) -> int:
    """Pause destinations: the workers hand nothing over to them (their messages wait in
    their delay queues) until `sqsdelay resume`; seen within SQSDELAY_PAUSE_CHECK_SECONDS."""
    from sqsdelay.aws.operations import set_paused

    settings = settings_of(ctx)
    for queue in queues:
        state = set_paused(settings, queue, True)
        print(json.dumps({"destination": queue, "paused": True, "since": state.since}))
    return 0


@command
def resume(
    ctx: typer.Context,
    queues: Annotated[list[str], typer.Argument(help="destination queues to resume")],
) -> int:
    """Resume paused destinations: their due messages are handed over at once, in due order."""
    from sqsdelay.aws.operations import set_paused

    settings = settings_of(ctx)
    for queue in queues:
        set_paused(settings, queue, False)
        print(json.dumps({"destination": queue, "paused": False}))
    return 0


@command
def paused(
    ctx: typer.Context,
    queues: Annotated[list[str] | None, typer.Argument(help="destination queues")] = None,
    all_queues: Annotated[
        bool, typer.Option("--all", help="every delay queue under SQSDELAY_QUEUE_PREFIX")
    ] = False,
) -> int:
    """Whether destinations are paused, one JSON line each."""
    from sqsdelay.aws.operations import discovered, pause_states

    settings = settings_of(ctx)
    names = discovered(settings) if all_queues else list(queues or [])
    if not names:
        raise InvalidInput("name the destination queues, or give --all")
    for st in pause_states(settings, names):
        print(json.dumps({"destination": st.destination, "paused": st.paused, "since": st.since}))
    return 0
