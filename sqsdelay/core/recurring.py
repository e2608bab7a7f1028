"""Recurring schedules on EventBridge Scheduler (pure): the checked schedule, the
CreateSchedule/UpdateSchedule request it becomes, an occurrence read back from a message,
and what `schedule sync` changes. docs/schedules.md.

Each schedule sends through Scheduler's universal target `sqs:sendMessage` (as parking
does), so that an occurrence arrives as an ordinary sqsdelay message: the body and
attributes `send` would give it, in the destination's wire format, plus the schedule's name
and the occurrence's time. Scheduler writes that time into the payload at each invocation
(its context keyword `<aws.scheduler.scheduled-time>`), so the message id, `NAME@TIME`, is
the same on every delivery of one occurrence (a retry, a duplicate) and new for the next:
the guard, keyed by the id, runs an occurrence once. A templated SQS target would set no
message attributes, and the guard finds its key there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from sqsdelay.core import cron, message_shape, parking, queue_names, quotas, send
from sqsdelay.core.types import Attributes
from sqsdelay.errors import InvalidInput, InvalidSchedule, TooManyAttributes

# Scheduler's context keyword, replaced by the occurrence's time (e.g. 2026-03-29T01:00:00Z)
SCHEDULED_TIME: Final = "<aws.scheduler.scheduled-time>"
SCHEDULE_ATTRIBUTE: Final = "sqsdelay.Schedule"
SCHEDULED_TIME_ATTRIBUTE: Final = "sqsdelay.ScheduledTime"
# The schedules sqsdelay manages say so in their Description (Scheduler has no tags on a
# schedule, and the name is the user's); a sync set adds its name.
MARK: Final = "sqsdelay recurring schedule"
_SET_MARK: Final = re.compile(re.escape(MARK) + r"; sync set ([0-9A-Za-z_.-]{1,64})")
# Scheduler's names (schedule and group): 1-64 of these.
_NAME: Final = re.compile(r"[0-9A-Za-z_.-]{1,64}")
# parking's schedules are named sqsdelay-<48 hex digits> (identity.schedule_name)
_PARKING_NAME: Final = re.compile(r"sqsdelay-[0-9a-f]{48}")
MAX_WINDOW_MINUTES: Final = 1440  # FlexibleTimeWindow's MaximumWindowInMinutes, 1 to 1440
# Scheduler refuses a recurring StartDate more than five minutes in the past.
START_GRACE_SECONDS: Final = 300
_TIME: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def check_name(name: str, what: str = "schedule name") -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidSchedule(
            f"{what} {str(name)[:80]!r} is not 1-64 letters, digits, '-', '_' or '.' "
            "(EventBridge Scheduler's rule): e.g. nightly-report"
        )
    if what == "schedule name" and _PARKING_NAME.fullmatch(name):
        raise InvalidSchedule(
            f"{name!r} is named like a parked message's schedule (sqsdelay- and 48 hex "
            "digits): pick another name"
        )
    return name


class RecurringSchedule(BaseModel):
    """One recurring schedule. Build it with `RecurringSchedule.of(...)`, which raises
    `InvalidSchedule` (what is wrong and what to do) instead of pydantic's error."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    expression: str  # cron(...) or rate(...), normalised; `of` takes cron= or rate=
    timezone: str = "UTC"
    start: datetime | None = None
    end: datetime | None = None
    flexible_window_minutes: int | None = None  # None: OFF (within a minute of the time)
    queue: str
    body: str
    message_type: str | None = None
    group_id: str | None = None  # a FIFO destination's group (default: the schedule's name)
    attributes: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    max_retry_attempts: int = parking.RETRY_POLICY["MaximumRetryAttempts"]
    max_event_age_seconds: int = parking.RETRY_POLICY["MaximumEventAgeInSeconds"]

    @classmethod
    def of(
        cls, *, cron: str | None = None, rate: str | None = None, **fields: Any
    ) -> RecurringSchedule:
        if (cron is None) == (rate is None) and "expression" not in fields:
            raise InvalidSchedule(
                "give either a cron or a rate (one of them): e.g. --cron "
                "'0 9 * * MON-FRI' or --rate '5 minutes'"
            )
        if cron is not None:
            fields["expression"] = cron
        if rate is not None:
            fields["expression"] = "rate(" + rate.removeprefix("rate(").removesuffix(")") + ")"
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise _typed(exc) from None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value)

    @field_validator("expression")
    @classmethod
    def _expression(cls, value: str) -> str:
        return cron.parse_expression(value).expression

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        cron.zone(value)
        return value

    @field_validator("flexible_window_minutes")
    @classmethod
    def _window(cls, value: int | None) -> int | None:
        if value is not None and not 1 <= value <= MAX_WINDOW_MINUTES:
            raise InvalidSchedule(
                f"a flexible window of {value} minutes: give 1 to {MAX_WINDOW_MINUTES}, or "
                "none (the occurrence is sent within a minute of its time)"
            )
        return value

    @field_validator("max_retry_attempts")
    @classmethod
    def _attempts(cls, value: int) -> int:
        if not 0 <= value <= 185:
            raise InvalidSchedule(f"{value} retry attempts: Scheduler takes 0 to 185")
        return value

    @field_validator("max_event_age_seconds")
    @classmethod
    def _age(cls, value: int) -> int:
        if not 60 <= value <= 86_400:
            raise InvalidSchedule(f"a retry age of {value} s: Scheduler takes 60 to 86400")
        return value

    @field_validator("body")
    @classmethod
    def _body(cls, value: str) -> str:
        message_shape.check_body(value)
        return value

    @model_validator(mode="after")
    def _dates(self) -> RecurringSchedule:
        # a naive date is a time in the schedule's own zone, as Scheduler's console shows it
        tz = cron.zone(self.timezone)
        for name in ("start", "end"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                object.__setattr__(self, name, value.replace(tzinfo=tz))
        if self.start and self.end and self.end <= self.start:
            raise InvalidSchedule(
                f"the end {self.end.isoformat()} is not after the start "
                f"{self.start.isoformat()}: give an end after the start"
            )
        return self

    @property
    def parsed(self) -> cron.Expression:
        return cron.parse_expression(self.expression)

    def fire_times(self, after: datetime) -> Any:
        """Scheduler's fire times after `after` (an iterator of UTC datetimes)."""
        return cron.fire_times(
            self.parsed, self.timezone, after=after, start=self.start, end=self.end
        )

    def check_dates(self, now: float) -> None:
        """What Scheduler refuses against its clock: a start more than five minutes past, an
        end already past. Checked before any call."""
        if self.start is not None and self.start.timestamp() < now - START_GRACE_SECONDS:
            raise InvalidSchedule(
                f"the start {self.start.isoformat()} is in the past (Scheduler takes one at "
                "most five minutes ago): leave it out to start now, or give a later one"
            )
        if self.end is not None and self.end.timestamp() <= now:
            raise InvalidSchedule(
                f"the end {self.end.isoformat()} is in the past: give a later end, or none"
            )


def _typed(exc: ValidationError) -> InvalidSchedule:
    """pydantic's error as ours: the first problem, in its own words when it is ours."""
    first = exc.errors()[0]
    error = (first.get("ctx") or {}).get("error")
    if isinstance(error, InvalidInput):
        return InvalidSchedule(str(error))
    where = ".".join(str(p) for p in first.get("loc", ())) or "schedule"
    return InvalidSchedule(f"{where}: {first.get('msg', 'is not valid')}")


@dataclass(frozen=True)
class Target:
    """Where the occurrences go and how Scheduler may send them."""

    group: str
    role_arn: str
    queue_url: str  # the destination's
    dead_letter_arn: str  # the error queue's: Scheduler's dead-letter queue


def occurrence_id(name: str, scheduled_time: str = SCHEDULED_TIME) -> str:
    """An occurrence's message id: the schedule's name and its scheduled time, which
    Scheduler fills in per invocation (a valid MessageGroupId: at most 85 characters)."""
    return f"{name}@{scheduled_time}"


def description(set_name: str | None) -> str:
    return MARK if set_name is None else f"{MARK}; sync set {check_name(set_name, 'set name')}"


def managed_set(schedule: Mapping[str, Any]) -> str | None:
    """The sync set a schedule belongs to; "" for one `put` made, None for one not ours."""
    text = str(schedule.get("Description") or "")
    if (match := _SET_MARK.fullmatch(text)) is not None:
        return match[1]
    return "" if text == MARK else None


def message_input(schedule: RecurringSchedule, target: Target, limits: send.SendLimits) -> str:
    """The universal target's Input: the SendMessage request of every occurrence, planned as
    `send` plans a message sent now (body, wire format, NServiceBus.MessageId), with the
    occurrence's id and time left for Scheduler to fill in."""
    attributes = {
        name: message_shape.string_attribute(v) for name, v in schedule.attributes.items()
    }
    attributes[SCHEDULE_ATTRIBUTE] = message_shape.string_attribute(schedule.name)
    attributes[SCHEDULED_TIME_ATTRIBUTE] = message_shape.string_attribute(SCHEDULED_TIME)
    destination = queue_names.destination_name(schedule.queue, limits.queue_prefix)
    fifo = queue_names.is_fifo(destination)
    message = send.Message(
        schedule.body,
        delay=0,
        attributes=attributes,
        message_type=schedule.message_type,
        id=occurrence_id(schedule.name),
        group_id=schedule.group_id or (schedule.name if fifo else None),
    )
    # A fixed clock: the same schedule plans the same input (sync compares them). It is
    # NServiceBus's TimeSent, which is informational: the schedule's start, or 1970.
    anchor = schedule.start.timestamp() if schedule.start else 0.0
    try:
        # The occurrence's id must ride along: the guard keys on it (an envelope has it
        # inside); without room it would be dropped and every occurrence refused by the guard.
        planned = send.plan(
            schedule.queue,
            message,
            limits,
            now=anchor,
            require_id=limits.wire_format != "nservicebus",
        )
    except TooManyAttributes as exc:
        raise InvalidSchedule(
            f"an occurrence of {schedule.name!r} cannot carry its id ({exc}): give the "
            f"schedule at most {quotas.MAX_MESSAGE_ATTRIBUTES - 3} attributes (one fewer with a "
            "message type)"
        ) from None
    if planned.route != "direct" or planned.delay_seconds:
        raise InvalidSchedule(
            f"an occurrence of {schedule.name!r} would not go straight to "
            f"{destination!r}: check the queue"
        )
    request: dict[str, Any] = {"QueueUrl": target.queue_url, **planned.request}
    if fifo:  # FIFO drops a second delivery of one occurrence within five minutes too
        request["MessageDeduplicationId"] = occurrence_id(schedule.name)
    if "MessageAttributes" in request:
        request["MessageAttributes"] = parking._json_attributes(request["MessageAttributes"])
    text = json.dumps(request, separators=(",", ":"), ensure_ascii=False)
    size = len(text.encode())
    if size > parking.MAX_INPUT_BYTES:
        raise InvalidSchedule(
            f"the message of {schedule.name!r} makes a schedule input of {size} bytes; "
            f"Scheduler takes {parking.MAX_INPUT_BYTES}: store the payload elsewhere (e.g. S3) "
            "and send a reference"
        )
    return text


def request(
    schedule: RecurringSchedule,
    target: Target,
    limits: send.SendLimits,
    *,
    set_name: str | None = None,
) -> dict[str, Any]:
    """The CreateSchedule (and UpdateSchedule: the same keys) request."""
    out: dict[str, Any] = {
        "Name": schedule.name,
        "GroupName": check_name(target.group, "group name"),
        "Description": description(set_name),
        "ScheduleExpression": schedule.expression,
        "ScheduleExpressionTimezone": schedule.timezone,
        "FlexibleTimeWindow": (
            {"Mode": "OFF"}
            if schedule.flexible_window_minutes is None
            else {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": schedule.flexible_window_minutes}
        ),
        "State": "ENABLED" if schedule.enabled else "DISABLED",
        "Target": {
            "Arn": parking.SEND_MESSAGE_TARGET,
            "RoleArn": target.role_arn,
            "Input": message_input(schedule, target, limits),
            "RetryPolicy": {
                "MaximumEventAgeInSeconds": schedule.max_event_age_seconds,
                "MaximumRetryAttempts": schedule.max_retry_attempts,
            },
            "DeadLetterConfig": {"Arn": target.dead_letter_arn},
        },
    }
    if schedule.start is not None:
        out["StartDate"] = schedule.start
    if schedule.end is not None:
        out["EndDate"] = schedule.end
    return out


UPDATE_KEYS: Final = (
    "Name",
    "GroupName",
    "Description",
    "ScheduleExpression",
    "ScheduleExpressionTimezone",
    "FlexibleTimeWindow",
    "State",
    "Target",
    "StartDate",
    "EndDate",
    "KmsKeyArn",
    "ActionAfterCompletion",
)


def update_of(existing: Mapping[str, Any], *, now: float, **changes: Any) -> dict[str, Any]:
    """An UpdateSchedule request that keeps what `existing` (a GetSchedule answer) has
    but `changes`: UpdateSchedule replaces every field, so each is given again, except a
    StartDate already past, which Scheduler refuses (a cron is unchanged without it; a rate
    then counts from the update)."""
    out = {k: existing[k] for k in UPDATE_KEYS if existing.get(k) is not None}
    start = out.get("StartDate")
    if isinstance(start, datetime) and start.timestamp() < now - START_GRACE_SECONDS:
        del out["StartDate"]
    return out | changes


# ---- occurrences, as a consumer reads them ----


@dataclass(frozen=True)
class Occurrence:
    schedule: str
    scheduled_time: datetime  # UTC
    message_id: str


def occurrence_of(attributes: Attributes) -> Occurrence | None:
    """The occurrence a received message is (its attributes: `ConsumerMessage.received.attributes`),
    or None for a message no recurring schedule sent."""
    name = message_shape.string_value(attributes, SCHEDULE_ATTRIBUTE)
    when = message_shape.string_value(attributes, SCHEDULED_TIME_ATTRIBUTE)
    if name is None or when is None:
        return None
    if not _TIME.fullmatch(when):
        raise InvalidInput(
            f"the occurrence of schedule {name!r} carries {when[:40]!r} as its time, not "
            "Scheduler's: it was sent by something that did not fill in "
            f"{SCHEDULED_TIME}, so its id is not one occurrence's"
        )
    at = datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return Occurrence(name, at, occurrence_id(name, when))


def substituted(input_text: str, scheduled: datetime) -> str:
    """The Input as Scheduler sends it for the occurrence at `scheduled` (the emulator and
    `resume --catch-up` send this)."""
    return input_text.replace(
        SCHEDULED_TIME, scheduled.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
