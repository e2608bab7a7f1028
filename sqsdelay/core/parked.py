"""A destination's parked messages, read from EventBridge Scheduler (pure flow): what the
console's Scheduled page shows without the registry.

The schedules of every destination share one group, and a schedule's name is a hash of
its delay queue and message id (`identity.schedule_name`), so a destination's are found by
reading each schedule (GetSchedule) and keeping those whose input sends to its delay
queue. Bounded: at most `scan` schedules are looked at. The input holds the message body,
which is never returned: only the id, the due time, the fire time, the size and the
attribute names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from sqsdelay.core import wire_format
from sqsdelay.core.flows import Call, Flow
from sqsdelay.errors import SqsOperationError

LIST_PAGE: Final = 100  # ListSchedules' MaxResults
AT_ONCE: Final = 10  # GetSchedule calls in flight


@dataclass(frozen=True)
class ParkedMessage:
    message_id: str
    due_ms: int | None  # sqsdelay.DueAt; None for a schedule without it
    fires: str  # the schedule's expression, at(...) in UTC
    size_bytes: int
    attribute_names: tuple[str, ...]


@dataclass(frozen=True)
class ParkedList:
    messages: list[ParkedMessage]
    looked_at: int  # schedules read
    more: bool  # the group has schedules beyond `scan`


def of_schedule(schedule: dict[str, Any], delay_queue: str) -> ParkedMessage | None:
    """The parked message a schedule sends to `delay_queue`, or None (another queue's, or
    not one of ours)."""
    try:
        request = json.loads(schedule["Target"]["Input"])
        if not str(request["QueueUrl"]).endswith("/" + delay_queue):
            return None
        attributes = request.get("MessageAttributes", {})
        due = attributes.get(wire_format.DUE_AT_ATTRIBUTE, {}).get("StringValue")
        return ParkedMessage(
            message_id=str(request["MessageGroupId"]),
            due_ms=int(due) if due is not None else None,
            fires=str(schedule.get("ScheduleExpression", "")),
            size_bytes=len(str(request.get("MessageBody", "")).encode()),
            attribute_names=tuple(sorted(set(attributes) - wire_format.SENDER_ATTRIBUTES)),
        )
    except (KeyError, TypeError, ValueError):
        return None


def listed(group: str, delay_queue: str, *, scan: int, timeout: float | None) -> Flow[ParkedList]:
    """The parked messages of `delay_queue` among the first `scan` schedules of `group`,
    soonest due first."""
    names: list[str] = []
    token: str | None = None
    while len(names) < scan:
        params: dict[str, Any] = {"GroupName": group, "MaxResults": LIST_PAGE}
        if token:
            params["NextToken"] = token
        [reply] = yield [Call("scheduler", "ListSchedules", params, timeout=timeout)]
        if reply.fault is not None:
            raise SqsOperationError("ListSchedules", group, reply.fault.code, reply.fault.detail)
        names += [s["Name"] for s in reply.response.get("Schedules", [])]
        token = reply.response.get("NextToken")
        if not token:
            break
    more = len(names) > scan or token is not None
    names = names[:scan]
    found: list[ParkedMessage] = []
    for start in range(0, len(names), AT_ONCE):
        calls = [
            Call("scheduler", "GetSchedule", {"Name": n, "GroupName": group}, timeout=timeout)
            for n in names[start : start + AT_ONCE]
        ]
        for got in (yield calls):
            if got.fault is None and (m := of_schedule(dict(got.response), delay_queue)):
                found.append(m)
    found.sort(key=lambda m: (m.due_ms is None, m.due_ms or 0, m.message_id))
    return ParkedList(found, len(names), more)
