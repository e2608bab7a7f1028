"""EventBridge Scheduler calls (thin boto3 / aioboto3 adapters over `sqsdelay.parking`).

`create` answers a CreateSchedule the way `ParkStep.settle` and the sender read it: the
error, if any, and on ConflictException the schedule that already exists. `cancel` deletes
a parked message's schedule unless it is too late.
"""

from __future__ import annotations

import contextlib
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sqsdelay import parking
from sqsdelay._types import CancelOutcome
from sqsdelay.clients import error_code, translate

_ERRORS = (ClientError, BotoCoreError, OSError, TimeoutError)
Answer = tuple[Exception | None, dict[str, Any] | None]


def create(scheduler: Any, request: dict[str, Any]) -> Answer:
    try:
        scheduler.create_schedule(**request)
    except _ERRORS as exc:
        existing = None
        if error_code(exc) == "ConflictException":  # a retry after a crash?
            with contextlib.suppress(*_ERRORS):
                existing = scheduler.get_schedule(
                    Name=request["Name"], GroupName=request["GroupName"]
                )
        return exc, existing
    return None, None


async def acreate(scheduler: Any, request: dict[str, Any]) -> Answer:
    """As `create`, for an aioboto3 client."""
    try:
        await scheduler.create_schedule(**request)
    except _ERRORS as exc:
        existing = None
        if error_code(exc) == "ConflictException":
            with contextlib.suppress(*_ERRORS):
                existing = await scheduler.get_schedule(
                    Name=request["Name"], GroupName=request["GroupName"]
                )
        return exc, existing
    return None, None


def accepted(answer: Answer, request: dict[str, Any]) -> bool:
    """Whether a CreateSchedule answer parked the message: it succeeded, or it met the very
    schedule this request describes (a retry after a crash)."""
    error, existing = answer
    if error is None:
        return True
    conflict = error_code(error) == "ConflictException" and existing is not None
    return conflict and parking.is_own_schedule(existing or {}, request)


def outcome(schedule: dict[str, Any] | None, *, now: float, cycle: int) -> CancelOutcome | None:
    """`too-late` when the schedule is gone or fires within Scheduler's precision; None
    when it may still be deleted."""
    if schedule is None:
        return "too-late"
    fire = parking.fire_ms_of(schedule.get("ScheduleExpression", ""))
    if fire is None or fire - now * 1000 <= parking.precision_seconds(cycle) * 1000:
        return "too-late"
    return None


def _missing(exc: Exception, operation: str, name: str) -> None:
    """ResourceNotFoundException is an answer (too late); anything else is an error."""
    if error_code(exc) != "ResourceNotFoundException":
        raise translate(exc, operation, name) from None


def cancel(scheduler: Any, name: str, group: str, *, now: float, cycle: int) -> CancelOutcome:
    try:
        schedule = scheduler.get_schedule(Name=name, GroupName=group)
    except (ClientError, BotoCoreError) as exc:
        _missing(exc, "GetSchedule", name)
        schedule = None
    answer = outcome(schedule, now=now, cycle=cycle)
    if answer is not None:
        return answer
    try:
        scheduler.delete_schedule(Name=name, GroupName=group)
    except (ClientError, BotoCoreError) as exc:
        _missing(exc, "DeleteSchedule", name)
        return "too-late"
    return "cancelled"


async def acancel(
    scheduler: Any, name: str, group: str, *, now: float, cycle: int
) -> CancelOutcome:
    """As `cancel`, for an aioboto3 client."""
    try:
        schedule = await scheduler.get_schedule(Name=name, GroupName=group)
    except (ClientError, BotoCoreError) as exc:
        _missing(exc, "GetSchedule", name)
        schedule = None
    answer = outcome(schedule, now=now, cycle=cycle)
    if answer is not None:
        return answer
    try:
        await scheduler.delete_schedule(Name=name, GroupName=group)
    except (ClientError, BotoCoreError) as exc:
        _missing(exc, "DeleteSchedule", name)
        return "too-late"
    return "cancelled"
