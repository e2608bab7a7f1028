"""`sqsdelay schedule ...`: recurring schedules on EventBridge Scheduler (docs/schedules.md)."""

from __future__ import annotations

import contextlib
import functools
import json
import pathlib
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import islice
from typing import Annotated, Any

import typer
import yaml

from sqsdelay.cli.app import app, command
from sqsdelay.cli.settings_flags import settings_of
from sqsdelay.core.recurring import RecurringSchedule
from sqsdelay.core.recurring_sync import read_set
from sqsdelay.errors import InvalidSchedule

schedule_app = typer.Typer(
    name="schedule",
    help="Recurring schedules on EventBridge Scheduler: put, list, get, pause, resume, "
    "delete, sync.",
    no_args_is_help=True,
)
app.add_typer(schedule_app, name="schedule")
on_schedule: Callable[[Callable[..., int]], Callable[..., None]] = functools.partial(
    command, group=schedule_app
)

Group = Annotated[
    str | None,
    typer.Option("--group", help="the schedule group (default: SQSDELAY_RECURRING_GROUP)"),
]


def _schedules(ctx: typer.Context, group: str | None) -> Any:
    from sqsdelay.aws.recurring import Schedules

    return Schedules(settings_of(ctx), group=group)


def _date(text: str | None, what: str) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InvalidSchedule(
            f"{what} {text!r} is not a date and time: give ISO 8601, e.g. 2027-01-31T09:00 "
            "(in the schedule's time zone) or 2027-01-31T08:00:00+00:00"
        ) from None


@on_schedule
def put(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="the schedule's name (1-64 of A-Z a-z 0-9 - _ .)")],
    queue: Annotated[str, typer.Option("--queue", help="the destination queue")],
    body: Annotated[str, typer.Option("--body", help="each occurrence's message body")],
    cron: Annotated[
        str | None,
        typer.Option("--cron", help="cron(m h dom mon dow year), or Unix '0 9 * * MON-FRI'"),
    ] = None,
    rate: Annotated[str | None, typer.Option("--rate", help="e.g. '5 minutes'")] = None,
    timezone: Annotated[str, typer.Option("--timezone", help="IANA zone of the cron")] = "UTC",
    start: Annotated[str | None, typer.Option("--start", help="first time (ISO 8601)")] = None,
    end: Annotated[str | None, typer.Option("--end", help="last time (ISO 8601)")] = None,
    flexible_window: Annotated[
        int | None, typer.Option("--flexible-window", help="minutes Scheduler may spread it")
    ] = None,
    message_type: Annotated[
        str | None, typer.Option("--message-type", help="NServiceBus message type")
    ] = None,
    group_id: Annotated[
        str | None, typer.Option("--group-id", help="FIFO group (default: the name)")
    ] = None,
    group: Group = None,
) -> int:
    """Create or replace a recurring schedule; prints its next fire times."""
    schedule = RecurringSchedule.of(
        name=name,
        cron=cron,
        rate=rate,
        timezone=timezone,
        start=_date(start, "--start"),
        end=_date(end, "--end"),
        flexible_window_minutes=flexible_window,
        queue=queue,
        body=body,
        message_type=message_type,
        group_id=group_id,
    )
    outcome = _schedules(ctx, group).put(schedule)
    print(f"{outcome} {name}  {schedule.expression} {schedule.timezone}")
    for when in islice(schedule.fire_times(datetime.now(UTC)), 3):
        print(f"  next: {when.isoformat()}")
    return 0


@on_schedule
def list_(ctx: typer.Context, group: Group = None) -> int:
    """The group's recurring schedules (sqsdelay's only)."""
    for s in _schedules(ctx, group).list():
        owner = "put" if s.set_name == "" else f"set {s.set_name}"
        print(f"{s.name}\t{s.state}\t{s.expression}\t{s.timezone}\t{owner}")
    return 0


@on_schedule
def get(ctx: typer.Context, name: str, group: Group = None) -> int:
    """One schedule, as Scheduler holds it (JSON)."""
    found = _schedules(ctx, group).get(name)
    if found is None:
        print(f"no schedule {name!r} in group {group!r}")
        return 1
    print(json.dumps(describe(found), indent=2, default=str))
    return 0


@on_schedule
def pause(ctx: typer.Context, name: str, group: Group = None) -> int:
    """Disable a schedule (its occurrences are skipped until resumed)."""
    changed = _schedules(ctx, group).pause(name)
    print(f"paused {name}" if changed else f"{name} was paused already")
    return 0


@on_schedule
def resume(
    ctx: typer.Context,
    name: str,
    catch_up: Annotated[
        bool, typer.Option("--catch-up", help="send the latest occurrence missed while paused")
    ] = False,
    group: Group = None,
) -> int:
    """Enable a schedule. Missed occurrences are skipped, unless --catch-up."""
    sent = _schedules(ctx, group).resume(name, catch_up=catch_up)
    if sent is not None:
        print(f"sent the missed occurrence of {sent.isoformat()}")
    print(f"resumed {name}")
    return 0


@on_schedule
def delete(ctx: typer.Context, name: str, group: Group = None) -> int:
    """Delete a schedule."""
    gone = _schedules(ctx, group).delete(name)
    print(f"deleted {name}" if gone else f"{name} was gone already")
    return 0


@on_schedule
def sync(
    ctx: typer.Context,
    file: Annotated[
        pathlib.Path | None, typer.Argument(help="YAML or JSON: set, group, schedules")
    ] = None,
    celery_app: Annotated[
        str | None,
        typer.Option("--celery-app", help="module:app: its beat_schedule (set: celery-beat)"),
    ] = None,
    taskiq_broker: Annotated[
        str | None,
        typer.Option(
            "--taskiq-broker", help="module:broker: its tasks' schedule labels (set: taskiq)"
        ),
    ] = None,
    dramatiq_module: Annotated[
        str | None,
        typer.Option("--dramatiq-module", help="module: its actors' periodic(...) (set: dramatiq)"),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the diff only")] = False,
    set_name: Annotated[
        str | None, typer.Option("--set", help="the set's name (default: the file's, or stem)")
    ] = None,
    group: Annotated[
        str | None,
        typer.Option("--group", help="schedule group (default: the file's, then the setting)"),
    ] = None,
) -> int:
    """Make the group's schedules of this set exactly the file's (or a Celery app's beat
    schedule, a taskiq broker's schedule labels, a Dramatiq module's periodic actors):
    create, update, delete."""
    sources = [x for x in (file, celery_app, taskiq_broker, dramatiq_module) if x is not None]
    if len(sources) != 1:
        raise InvalidSchedule(
            "give one of FILE, --celery-app module:app, --taskiq-broker module:broker or "
            "--dramatiq-module module"
        )
    file_group = None
    if file is not None:
        try:
            data = yaml.safe_load(file.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise InvalidSchedule(f"cannot read {file}: {exc}") from None
        named, file_group, schedules = read_set(data, set_name or file.stem)
    else:
        named, schedules = _from_scheduler(celery_app, taskiq_broker, dramatiq_module)
    result = _schedules(ctx, group or file_group).sync(
        schedules, set_name or named, dry_run=dry_run
    )
    for line in result.plan.lines():
        print(line)
    unchanged = len(result.plan.unchanged)
    if dry_run:
        print(f"dry run: nothing changed ({unchanged} unchanged)")
    else:
        print(f"{len(result.changed)} changed, {unchanged} unchanged")
    return 0


def _from_scheduler(
    celery_app: str | None, taskiq_broker: str | None, dramatiq_module: str | None
) -> tuple[str, list[RecurringSchedule]]:
    """A scheduler's own declarations, read as-is (sqsdelay/schedule_sources.py)."""
    import sys

    from sqsdelay import schedule_sources

    sys.path.insert(0, str(pathlib.Path.cwd()))  # module:app from here, as celery -A reads it
    if celery_app is not None:
        app = schedule_sources.load(celery_app, "--celery-app")
        return "celery-beat", schedule_sources.from_celery(app)
    if taskiq_broker is not None:
        broker = schedule_sources.load(taskiq_broker, "--taskiq-broker")
        return "taskiq", schedule_sources.from_taskiq(broker)
    assert dramatiq_module is not None
    module = schedule_sources.load(dramatiq_module, "--dramatiq-module")
    return "dramatiq", schedule_sources.from_dramatiq(module)


def describe(found: dict[str, Any]) -> dict[str, Any]:
    """A GetSchedule answer as `schedule get` prints it: the message's input decoded."""
    out = {k: v for k, v in found.items() if k not in ("ResponseMetadata",)}
    with contextlib.suppress(KeyError, TypeError, ValueError):
        out["Target"] = {**out["Target"], "Input": json.loads(out["Target"]["Input"])}
    return out
