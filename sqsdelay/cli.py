"""The `sqsdelay` command line.

Settings flags go before the command (`sqsdelay --endpoint-url URL send ...`) and have the
same names as the SQSDELAY_ settings they override. Exit codes: 0 success, 2 bad input or
configuration (nothing sent), 1 runtime failure.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from inspect import Parameter, Signature
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast, get_args, get_origin

import typer
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from rich.console import Console
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup, TyperOption

from sqsdelay import logs
from sqsdelay.core import quotas
from sqsdelay.core.delays import parse_delay, parse_exact_delay
from sqsdelay.errors import InvalidInput, InvalidMessage, SqsDelayError
from sqsdelay.extras import require
from sqsdelay.settings import Settings, load_settings

if TYPE_CHECKING:  # the AWS adapters load only when a command needs them
    from sqsdelay.aws.installer import QueueReport, ResourceReport


class _CommandsFirst(TyperGroup):
    """Help with the commands first, then the settings flags in panels by who reads them.

    Typer prints options before commands; a new user looks for the commands. The flags are
    drawn by `_print_settings`, which keeps their names whole at 80 columns.
    """

    def format_help(self, ctx: Any, formatter: Any) -> None:  # typer's own click types
        flags = [p for p in self.params if isinstance(p, TyperOption) and p.name in _PANEL_OF]
        for p in flags:
            p.hidden = True
        try:
            super().format_help(ctx, formatter)
        finally:
            for p in flags:
                p.hidden = False
        _print_settings(Console())


app = typer.Typer(
    name="sqsdelay",
    cls=_CommandsFirst,
    help="Unrestricted delayed delivery for Amazon SQS.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _opt(help_text: str) -> Any:
    return typer.Option(help=help_text, show_default=False)


def command(fn: Callable[..., int]) -> Callable[..., None]:
    """Register a command whose errors become exit codes: 2 bad input, 1 runtime failure."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            code = fn(*args, **kwargs)
        except InvalidInput as exc:
            print(f"sqsdelay: error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
        except SqsDelayError as exc:
            print(f"sqsdelay: failed: {exc}", file=sys.stderr)
            raise typer.Exit(1) from None
        raise typer.Exit(code)

    app.command(name=fn.__name__.replace("_", "-"))(run)
    return run


# The settings flags by who reads them; tests check that every setting has its panel.
PANELS: dict[str, tuple[str, ...]] = {
    "Connection": ("endpoint_url", "region", "call_timeout_seconds"),
    "Queues": (
        "queue_prefix",
        "error_queue",
        "max_native_delay_seconds",
        "visibility_timeout_seconds",
        "delay_queue_retention_seconds",
        "max_message_bytes",
        "kms_key_id",
    ),
    "Sender": ("unrestricted", "max_delay_seconds", "wire_format"),
    "Worker": (
        "queues",
        "discovery_interval_seconds",
        "idle_counts_lag_seconds",
        "concurrency",
        "wait_time_seconds",
        "receive_visibility_seconds",
        "invalid_delay",
        "max_attempts",
        "max_receive_failure_seconds",
        "stats_interval_seconds",
    ),
    "Parking": (
        "parking",
        "park_after_seconds",
        "scheduler_role_arn",
        "park_concurrency",
        "schedule_group",
    ),
    "Registry": ("registry", "registry_table"),
    "Logging and metrics": ("log_format", "log_level", "log_file", "metrics", "metrics_namespace"),
    "Cost report": ("spark_class_archive",),
}
_PANEL_OF = {name: panel for panel, names in PANELS.items() for name in names}


def _flag(info: FieldInfo) -> tuple[Any, str]:
    """The type typer parses the flag as, and the one the help shows (Settings validates)."""
    annotation = info.annotation
    if annotation is bool:
        return bool, ""
    if get_origin(annotation) is Literal:
        return annotation, "|".join(str(v) for v in get_args(annotation))
    kinds = [k for k in get_args(annotation) if k is not type(None)] or [annotation]
    choices = [str(v) for k in kinds if get_origin(k) is Literal for v in get_args(k)]
    if choices:  # a choice or a file
        return str, "|".join([*choices, "FILE"])
    if get_origin(kinds[0]) is list:
        return str, "NAME,NAME"
    shown = {int: "INTEGER", float: "NUMBER", Path: "FILE"}
    return kinds[0], shown.get(kinds[0], "TEXT")


def _default_text(name: str, info: FieldInfo) -> str:
    if info.annotation is bool:
        return ("" if info.default else "no-") + name.replace("_", "-")
    if info.default in (None, "", PydanticUndefined):
        return ""
    return str(info.default)


def _print_settings(console: Console) -> None:
    intro = (
        "Settings flags go before the command. Each has an environment variable of the same "
        "name: --max-attempts is SQSDELAY_MAX_ATTEMPTS."
    )
    console.print(Padding(Text(intro), (0, 1)))
    for panel, names in PANELS.items():
        table = Table(box=None, show_header=False, expand=True, padding=(0, 1, 0, 0))
        table.add_column(no_wrap=True, style="bold cyan")
        table.add_column(no_wrap=True, style="yellow")
        table.add_column(ratio=1)
        for name in names:
            info = Settings.model_fields[name]
            flag = "--" + name.replace("_", "-")
            if info.annotation is bool:
                flag += "\n--no-" + flag[2:]
            text = Text((info.description or "").removeprefix(f"{panel.lower()}: "))
            if default := _default_text(name, info):
                text.append(f" [default: {default}]", style="dim")
            table.add_row(flag, _flag(info)[1], text)
        console.print(Panel(table, title=panel, title_align="left", border_style="dim"))


def _generated_callback() -> Callable[..., None]:
    """A callback with one `--name` flag per Settings field, so the two never drift apart."""
    params = [Parameter("ctx", Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"ctx": typer.Context, "return": None}
    for name, info in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        kind = _flag(info)[0]
        option = typer.Option(
            None,
            f"{flag}/--no-{flag[2:]}" if kind is bool else flag,
            case_sensitive=False,
        )
        params.append(Parameter(name, Parameter.KEYWORD_ONLY, default=option))
        annotations[name] = kind | None

    def callback(ctx: typer.Context, **flags: Any) -> None:
        ctx.obj = {k: v for k, v in flags.items() if v is not None}

    callback.__signature__ = Signature(params)  # type: ignore[attr-defined]
    callback.__annotations__ = annotations
    return callback


app.callback()(_generated_callback())


def settings_of(ctx: typer.Context, **more: Any) -> Settings:
    settings = load_settings(**{**(ctx.obj or {}), **more})
    logs.configure(settings.log_format, settings.log_level, file=settings.log_file)
    return settings


def _attribute(text: str) -> tuple[str, dict[str, str]]:
    """`NAME=VALUE` (String) or `NAME:Number=VALUE`."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise InvalidMessage(f"--attribute {text!r}: use NAME=VALUE or NAME:Number=VALUE")
    name, _, data_type = name.partition(":")
    return name, {"DataType": data_type or "String", "StringValue": value}


@command
def send(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="destination queue (without prefix)")],
    delay: Annotated[str, typer.Option(help="delay in seconds; fractions round up")],
    body: Annotated[str | None, typer.Option(help="message body")] = None,
    body_file: Annotated[Path | None, typer.Option(help="read the body from a file")] = None,
    attribute: Annotated[list[str] | None, typer.Option(help="NAME=VALUE, repeatable")] = None,
    message_type: Annotated[
        str | None,
        typer.Option(help="NServiceBus message type; required with --wire-format nservicebus"),
    ] = None,
    id: Annotated[
        str | None,
        typer.Option(
            "--id",
            help="the message's id (default: a new UUID); with the registry, a second send "
            "of an id still scheduled sends nothing and prints duplicate: true",
        ),
    ] = None,
    group_id: Annotated[
        str | None,
        typer.Option(
            help="the message group: required for a FIFO destination (NAME.fifo); for a "
            "standard one, a fair queue's tenant"
        ),
    ] = None,
) -> int:
    """Send one delayed message; prints one JSON line with message_id, route and queue_url."""
    from sqsdelay.aws.sender import Sender

    settings = settings_of(ctx)
    seconds = parse_delay(delay)
    if (body is None) == (body_file is None):
        raise InvalidMessage("give exactly one of --body or --body-file")
    if body_file is not None:
        try:
            body = body_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidMessage(f"cannot read --body-file {body_file}: {exc}") from None
    assert body is not None
    attributes = dict(_attribute(a) for a in attribute or [])
    result = Sender(settings).send(
        queue,
        body,
        delay=seconds,
        attributes=attributes,
        message_type=message_type,
        id=id,
        group_id=group_id,
    )
    print(json.dumps(result.as_dict()))
    return 0


# Exit codes of cancel and reschedule by status (DESIGN.md).
STATUS_EXIT = {"cancelled": 0, "rescheduled": 0, "too-late": 3, "unknown": 4}


@command
def cancel(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="destination queue (without prefix)")],
    message_id: Annotated[
        str, typer.Argument(help="the message's id: send's --id, or the group_id it printed")
    ],
) -> int:
    """Cancel a scheduled message (with the registry, or a parked one).

    Prints one JSON line with status: cancelled (exit 0: it will never be delivered),
    too-late (exit 3: handed over, it will arrive) or unknown (exit 4: no record of it)."""
    from sqsdelay.aws.sender import Sender

    with _known_queue():
        outcome = Sender(settings_of(ctx)).cancel(queue, message_id)
    print(json.dumps({"status": outcome, "message_id": message_id, "queue": queue}))
    return STATUS_EXIT[outcome]


@contextlib.contextmanager
def _known_queue() -> Iterator[None]:
    """A destination without a delay queue is bad input for cancel, reschedule and
    scheduled (exit 2): nothing can be scheduled there."""
    from sqsdelay.errors import QueueMissing

    try:
        yield
    except QueueMissing as exc:
        raise InvalidInput(f"{exc.queue}: {exc.detail}") from None


def _utc_time(text: str, flag: str) -> datetime:
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(
            f"{flag} {text!r} is not an ISO 8601 time: 2027-01-31T09:00:00Z"
        ) from None
    if when.tzinfo is None:
        raise InvalidInput(
            f"{flag} {text!r} has no time zone: add Z (UTC) or an offset such as +01:00"
        )
    return when


@command
def reschedule(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="destination queue (without prefix)")],
    message_id: Annotated[
        str, typer.Argument(help="the message's id: send's --id, or the group_id it printed")
    ],
    delay: Annotated[str | None, typer.Option(help="the new delay, in seconds from now")] = None,
    at: Annotated[str | None, typer.Option(help="the new due time, ISO 8601 with a zone")] = None,
) -> int:
    """Move a scheduled message's due time, later or sooner (with the registry, or a parked
    one). Prints one JSON line with status: rescheduled (exit 0, with due_at), too-late
    (exit 3) or unknown (exit 4)."""
    from sqsdelay.aws.sender import Sender
    from sqsdelay.core.registry import iso_utc

    if (delay is None) == (at is None):
        raise InvalidInput("give exactly one of --delay or --at")
    when = _utc_time(at, "--at") if at is not None else None
    seconds = parse_exact_delay(delay) if delay is not None else None
    sender = Sender(settings_of(ctx))
    with _known_queue():
        outcome, due_ms = sender.reschedule(queue, message_id, delay=seconds, at=when)
    line: dict[str, Any] = {"status": outcome, "message_id": message_id, "queue": queue}
    if outcome == "rescheduled":
        line["due_at"] = iso_utc(due_ms)
    print(json.dumps(line))
    return STATUS_EXIT[outcome]


@command
def scheduled(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="destination queue (without prefix)")],
    due_before: Annotated[
        str | None, typer.Option(help="only what is due before this time (ISO 8601, zone)")
    ] = None,
    state: Annotated[
        str, typer.Option(help="scheduled, handed-over, cancelled, or all")
    ] = "scheduled",
    limit: Annotated[int, typer.Option(help="at most this many, soonest first")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON line per message")] = False,
) -> int:
    """List a destination's messages in the registry, soonest first."""
    from sqsdelay.aws.sender import Sender
    from sqsdelay.core.registry import STATES, State

    if state != "all" and state not in STATES:
        raise InvalidInput(f"--state {state!r}: give one of {', '.join(STATES)} or all")
    chosen: State | None = None if state == "all" else cast(State, state)
    before = _utc_time(due_before, "--due-before") if due_before is not None else None
    with _known_queue():
        records = Sender(settings_of(ctx)).scheduled(
            queue, due_before=before, state=chosen, limit=limit
        )
    if as_json:
        for record in records:
            print(json.dumps(record.as_dict()))
        return 0
    table = Table("due at (UTC)", "message id", "state", "route", title=f"{queue}: {len(records)}")
    for record in records:
        row = record.as_dict()
        table.add_row(row["due_at"], row["message_id"], row["state"], row["route"])
    Console().print(table)
    return 0


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
    for r in installer.run(queues, create=not check, fix=fix, force=force):
        problems += _print_report(r.spec.role, r.spec.name, r.created, r.url is not None, r)
    if settings.parking == "scheduler":
        group = installer.schedule_group(queues, create=not check)
        problems += _print_report("schedules", group.name, group.created, group.exists, group)
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
) -> int:
    """Configuration check plus visible / in-flight / delayed counts of every queue."""
    from sqsdelay.aws.operations import discovered
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
    for fix in fixes:  # plain lines, so that they can be copied whole
        print(f"fix: {fix}")
    _print_metrics(console, settings_of(ctx), queues)
    return 1 if problems else 0


def _print_metrics(console: Console, settings: Settings, queues: list[str]) -> None:
    """The due windows of the last cycle and the last hour's lateness, from CloudWatch."""
    from sqsdelay.aws.cloudwatch import read_metrics
    from sqsdelay.aws.queues import QueueResolver
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
    """Move failed messages of QUEUE from the error queue back to its delay queue."""
    from sqsdelay.aws.operations import replay_errors as replay

    if limit < 1 or scan < 1:
        raise InvalidInput("--limit and --scan must be at least 1")
    result = replay(settings_of(ctx), queue, limit=limit, scan=scan)
    print(
        json.dumps(
            {"replayed": len(result.replayed), "skipped": result.skipped, "failed": result.failed}
        )
    )
    return 1 if result.failed else 0


@command
def emulator(
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 4566,
) -> int:
    """Run the embedded SQS emulator on 127.0.0.1 until Ctrl-C.

    A moto server, with a runner that fires its Scheduler schedules."""
    import threading

    from sqsdelay.dev.emulator import Emulator

    with Emulator(port=port) as emu:
        print(f"SQS emulator listening on {emu.url}; export SQSDELAY_ENDPOINT_URL={emu.url}")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


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


@command
def demo(
    output: Annotated[Path, typer.Option(help="where events and the cost report go")] = Path(
        "demo-output"
    ),
) -> int:
    """The whole system end to end on the embedded emulator with a compressed cycle."""
    require("emulator", "the demo")
    from sqsdelay.dev.demo import run

    return run(output)


def main() -> None:
    app()
