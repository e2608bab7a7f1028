"""Message commands: send, cancel, reschedule, scheduled."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.table import Table

from sqsdelay.cli.app import command
from sqsdelay.cli.settings_flags import settings_of
from sqsdelay.core import message_tags
from sqsdelay.core.delays import parse_delay, parse_exact_delay
from sqsdelay.errors import InvalidInput, InvalidMessage

# The arguments every message command takes
Queue = Annotated[str, typer.Argument(help="destination queue (without prefix)")]
MessageId = Annotated[
    str, typer.Argument(help="the message's id: send's --id, or the group_id it printed")
]


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
    queue: Queue,
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
    tag: Annotated[
        list[str] | None,
        typer.Option(
            "--tag",
            help="NAME=VALUE, repeatable (with the registry): cancel --tag NAME=VALUE "
            "cancels every message sent with it",
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
    tags = message_tags.parse_all(tag or [])
    result = Sender(settings).send(
        queue,
        body,
        delay=seconds,
        attributes=attributes,
        message_type=message_type,
        id=id,
        group_id=group_id,
        tags=tags or None,
    )
    print(json.dumps(result.as_dict()))
    return 0


# Exit codes of cancel and reschedule by status (README, "Commands").
STATUS_EXIT = {"cancelled": 0, "rescheduled": 0, "too-late": 3, "unknown": 4}


@command
def cancel(
    ctx: typer.Context,
    queue: Queue,
    message_id: Annotated[
        str | None,
        typer.Argument(help="the message's id: send's --id, or the group_id it printed"),
    ] = None,
    tag: Annotated[
        str | None,
        typer.Option(
            "--tag", help="NAME=VALUE: every message sent with this tag, instead of one id"
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="with --tag: only count them and show some ids")
    ] = False,
) -> int:
    """Cancel a scheduled message (with the registry, or a parked one), or with --tag every
    message sent with that tag (with the registry).

    Prints one JSON line with status: cancelled (exit 0: it will never be delivered),
    too-late (exit 3: handed over, it will arrive) or unknown (exit 4: no record of it).
    With --tag: first a line with the count (matched), then one with each outcome's count
    (exit 0; 3 when some were too late); --dry-run prints the count and a sample of ids."""
    from sqsdelay.aws.sender import Sender

    if (message_id is None) == (tag is None):
        raise InvalidInput("give a message id or --tag NAME=VALUE, not both")
    if dry_run and tag is None:
        raise InvalidInput("--dry-run goes with --tag (one id's cancel has nothing to count)")
    if tag is not None:
        return _cancel_tagged(Sender(settings_of(ctx)), queue, message_tags.parse(tag), dry_run)
    assert message_id is not None
    with _known_queue():
        outcome = Sender(settings_of(ctx)).cancel(queue, message_id)
    print(json.dumps({"status": outcome, "message_id": message_id, "queue": queue}))
    return STATUS_EXIT[outcome]


def _cancel_tagged(sender: Any, queue: str, tag: tuple[str, str], dry_run: bool) -> int:
    with _known_queue():
        counted = sender.cancel_tagged(queue, tag, dry_run=True)
        print(json.dumps({**counted.as_dict(), "queue": queue, "dry_run": dry_run}), flush=True)
        if dry_run:
            return 0
        done = sender.cancel_tagged(queue, tag)
    print(json.dumps({**done.as_dict(), "queue": queue}))
    return STATUS_EXIT["too-late"] if done.outcomes["too-late"] else 0


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
    queue: Queue,
    message_id: MessageId,
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
    queue: Queue,
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
