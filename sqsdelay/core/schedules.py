"""EventBridge Scheduler calls, written once as flows (`sqsdelay.core.flows`) that every
runtime drives: the worker, the Lambda handler and both senders.

`create` parks one message and answers the way `accepted` reads it: the fault, if any, and
on ConflictException the schedule that already exists. `cancel` deletes a parked message's
schedule unless it is too late.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from sqsdelay.core import identity, parking
from sqsdelay.core.backoff import CircuitBreaker
from sqsdelay.core.flows import Call, Fault, Flow
from sqsdelay.core.types import CancelOutcome
from sqsdelay.errors import SqsOperationError
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.core.schedules")

Answer = tuple[Fault | None, Mapping[str, Any] | None]


def create(request: Mapping[str, Any], timeout: float | None = None) -> Flow[Answer]:
    [reply] = yield [Call("scheduler", "CreateSchedule", request, timeout=timeout)]
    if reply.fault is None or reply.fault.code != "ConflictException":
        return reply.fault, None
    # A retry after a crash? Read what exists, to tell our own schedule from another's.
    name = {"Name": request["Name"], "GroupName": request["GroupName"]}
    [found] = yield [Call("scheduler", "GetSchedule", name, timeout=timeout)]
    return reply.fault, (found.response if found.fault is None else None)


def accepted(answer: Answer, request: Mapping[str, Any]) -> bool:
    """Whether a CreateSchedule answer parked the message: it succeeded, or it met the very
    schedule this request describes (a retry after a crash)."""
    fault, existing = answer
    if fault is None:
        return True
    conflict = fault.code == "ConflictException" and existing is not None
    return conflict and parking.is_own_schedule(existing or {}, request)


def settle(
    answer: Answer, request: Mapping[str, Any], breaker: CircuitBreaker, now: float
) -> str | None:
    """Read a CreateSchedule answer for a worker or a sender: None when the message is parked
    (the breaker closes), else why not. A fault of Scheduler itself, or no answer, opens
    the breaker, so that parking waits instead of asking again at once."""
    if accepted(answer, request):
        breaker.success(parking.BREAKER_KEY)
        return None
    fault = answer[0]
    code = fault.code if fault else "Unknown"
    if fault is None or fault.is_service_fault(parking.SERVICE_FAULT_CODES):
        wait = breaker.failure(parking.BREAKER_KEY, now)
        log.error("scheduler.unavailable", code=code, retry_in_seconds=wait)
    return code


def outcome(schedule: Mapping[str, Any] | None, *, now: float, cycle: int) -> CancelOutcome | None:
    """`too-late` when the schedule is gone or fires within Scheduler's precision; None
    when it may still be deleted."""
    if schedule is None:
        return "too-late"
    fire = parking.fire_ms_of(schedule.get("ScheduleExpression", ""))
    if fire is None or fire - now * 1000 <= parking.precision_seconds(cycle) * 1000:
        return "too-late"
    return None


def _gone(fault: Fault | None, operation: str, name: str) -> bool:
    """ResourceNotFoundException is an answer (too late); any other fault is an error."""
    if fault is None:
        return False
    if fault.code == "ResourceNotFoundException":
        return True
    raise SqsOperationError(operation, name, fault.code, fault.detail)


def cancel(name: str, group: str, *, now: float, cycle: int) -> Flow[CancelOutcome]:
    ident = {"Name": name, "GroupName": group}
    [got] = yield [Call("scheduler", "GetSchedule", ident)]
    schedule = None if _gone(got.fault, "GetSchedule", name) else got.response
    answer = outcome(schedule, now=now, cycle=cycle)
    if answer is not None:
        return answer
    [deleted] = yield [Call("scheduler", "DeleteSchedule", ident)]
    return "too-late" if _gone(deleted.fault, "DeleteSchedule", name) else "cancelled"


Moved = Literal["rescheduled", "too-late", "not-parked"]


def _moved_input(input_text: str, message_id: str, due_ms: int, fire_ms: int) -> dict[str, Any]:
    """The schedule's SendMessage request with the new due time (and, for a reader without
    sqsdelay.DueAt, the delay counted from `fire_ms`), and a dedup id of its own."""
    request: dict[str, Any] = json.loads(input_text)
    # it sets a string and a number value, alike in the JSON form (binary ones stay base64)
    attributes = request.get("MessageAttributes", {})
    request["MessageAttributes"] = parking.back_attributes(attributes, due_ms, fire_ms)
    request["MessageDeduplicationId"] = identity.park_dedup_id(message_id, due_ms)
    return request


def move(
    name: str, group: str, message_id: str, *, due_ms: int, now: float, cycle: int
) -> Flow[Moved]:
    """Move a parked message to a new due time: UpdateSchedule with the new fire time and
    payload, or, when the new time is too close to wait in Scheduler, send the payload to the
    delay queue now and delete the schedule (the loop's last hops take over). `not-parked`:
    no such schedule; `too-late`: it fires within Scheduler's precision."""
    ident = {"Name": name, "GroupName": group}
    [got] = yield [Call("scheduler", "GetSchedule", ident)]
    if _gone(got.fault, "GetSchedule", name):
        return "not-parked"
    schedule = got.response
    if outcome(schedule, now=now, cycle=cycle) is not None:
        return "too-late"
    target = dict(schedule["Target"])
    fire = parking.fire_at_ms(due_ms, cycle)
    if fire - now * 1000 > parking.precision_seconds(cycle) * 1000:
        target["Input"] = json.dumps(
            _moved_input(target["Input"], message_id, due_ms, fire),
            separators=(",", ":"),
            ensure_ascii=False,
        )
        update = {
            **ident,
            "ScheduleExpression": parking.at_expression(fire),
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE",
            "State": "ENABLED",
            "Target": target,
        }
        [updated] = yield [Call("scheduler", "UpdateSchedule", update)]
        return "too-late" if _gone(updated.fault, "UpdateSchedule", name) else "rescheduled"
    now_ms = int(now * 1000)
    request = parking.send_message_of(
        json.dumps(_moved_input(target["Input"], message_id, due_ms, now_ms))
    )
    [sent] = yield [Call("sqs", "SendMessage", request)]
    if sent.fault is not None:
        raise SqsOperationError("SendMessage", name, sent.fault.code, sent.fault.detail)
    # Deleting is tidying: if it fails and the schedule fires, the registry's claim (or
    # FIFO deduplication) keeps the second copy from a second delivery.
    [deleted] = yield [Call("scheduler", "DeleteSchedule", ident)]
    if deleted.fault is not None and deleted.fault.code != "ResourceNotFoundException":
        log.warning("schedule.delete_failed", schedule=name, code=deleted.fault.code)
    return "rescheduled"
