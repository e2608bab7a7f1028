"""A destination's parked messages from Scheduler's schedules (pure: a fake group answers
ListSchedules and GetSchedule)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sqsdelay.core import parked, wire_format
from sqsdelay.core.flows import Call, Fault, Reply, drive
from sqsdelay.errors import SqsOperationError


def schedule(queue: str, message_id: str, due: int | None, body: str = "secret") -> dict[str, Any]:
    attrs: dict[str, Any] = {"tenant": {"DataType": "String", "StringValue": "<b>x</b>"}}
    if due is not None:
        attrs[wire_format.DUE_AT_ATTRIBUTE] = {"DataType": "Number", "StringValue": str(due)}
    request = {
        "QueueUrl": f"http://sqs/123/{queue}",
        "MessageBody": body,
        "MessageGroupId": message_id,
        "MessageAttributes": attrs,
    }
    return {
        "ScheduleExpression": "at(2030-01-01T00:00:00)",
        "Target": {"Input": json.dumps(request)},
    }


class Group:
    def __init__(self, schedules: dict[str, dict[str, Any]]) -> None:
        self.schedules = schedules
        self.calls: list[Call] = []

    def __call__(self, calls: list[Call]) -> list[Reply]:
        self.calls += calls
        out = []
        for c in calls:
            if c.api == "ListSchedules":
                names = sorted(self.schedules)
                at = int(c.params.get("NextToken", 0))
                chunk = names[at : at + c.params["MaxResults"]]
                answer: dict[str, Any] = {"Schedules": [{"Name": n} for n in chunk]}
                if at + len(chunk) < len(names):
                    answer["NextToken"] = str(at + len(chunk))
                out.append(Reply(answer))
            else:
                got = self.schedules.get(c.params["Name"])
                out.append(Reply(got) if got else Reply({}, Fault("ResourceNotFoundException", "")))
        return out


def test_only_this_queues_schedules_soonest_first_and_never_a_body() -> None:
    group = Group(
        {
            "a": schedule("q-delay.fifo", "late", 300),
            "b": schedule("other-delay.fifo", "theirs", 100),
            "c": schedule("q-delay.fifo", "soon", 200, body="x" * 10),
            "d": {"Target": {"Input": "not json"}},
            "e": schedule("q-delay.fifo", "no-due", None),
        }
    )
    got = drive(parked.listed("g", "q-delay.fifo", scan=100, timeout=None), group)
    assert [m.message_id for m in got.messages] == ["soon", "late", "no-due"]
    assert got.messages[0].size_bytes == 10 and got.messages[0].attribute_names == ("tenant",)
    assert got.looked_at == 5 and not got.more
    assert "secret" not in repr(got)


def test_the_scan_is_bounded_and_says_so() -> None:
    group = Group({f"s{i:03d}": schedule("q-delay.fifo", f"m{i}", i) for i in range(250)})
    got = drive(parked.listed("g", "q-delay.fifo", scan=150, timeout=None), group)
    assert got.looked_at == 150 and got.more and len(got.messages) == 150
    assert sum(c.api == "GetSchedule" for c in group.calls) == 150


def test_a_refused_list_is_an_error_that_names_the_group() -> None:
    def refuse(calls: list[Call]) -> list[Reply]:
        return [Reply({}, Fault("AccessDeniedException", "no scheduler:ListSchedules"))]

    with pytest.raises(SqsOperationError, match=r"ListSchedules.*'g'.*AccessDenied"):
        drive(parked.listed("g", "q-delay.fifo", scan=10, timeout=None), refuse)
