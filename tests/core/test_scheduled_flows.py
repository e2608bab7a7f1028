"""Flows on what was sent (core/scheduled_flows.py), answered by the stub SQS and registry:
a parked message cancelled by its schedule, once; what each needs (the registry or parking) and
what each refuses before any call."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from sqsdelay.aws.sender import Sender
from sqsdelay.core.flows import drive
from sqsdelay.core.send import Message
from sqsdelay.errors import ConfigError, InvalidDelay, InvalidInput
from sqsdelay.settings import Settings
from tests.support.stub import StubAws

NOW = 1_900_000_000.0


FAKE = SimpleNamespace(meta=SimpleNamespace(partition="aws", region_name="us-east-1"))
ROLE = "arn:aws:iam::123456789012:role/sqsdelay-scheduler"


def _sender(stub: StubAws, **settings: Any) -> Sender:
    given = {"region": "us-east-1", "registry": "dynamodb", "registry_table": "reg", **settings}
    return Sender(Settings(**given), caller=stub, client=FAKE, clock=lambda: NOW)


def _parking(stub: StubAws) -> Sender:
    return _sender(stub, registry="off", parking="scheduler", scheduler_role_arn=ROLE)


def test_a_parked_message_is_cancelled_by_its_schedule_once() -> None:
    stub = StubAws()
    sender = _parking(stub)
    sent = drive(sender.flows.send_flow("orders", Message("b", delay=3 * 86_400)), stub)
    assert sent.route == "parked" and len(stub.schedules) == 1
    flows = sender.scheduled_flows
    assert drive(flows.cancel_flow("orders", sent.message_id), stub) == "cancelled"
    assert stub.schedules == {}
    # Without a record, a schedule that is gone may have fired: too late, never "cancelled".
    assert drive(flows.cancel_flow("orders", sent.message_id), stub) == "too-late"


def test_a_reschedule_refuses_the_past_and_the_too_far_before_any_call() -> None:
    stub = StubAws()
    flows = _parking(stub).scheduled_flows
    past = datetime.fromtimestamp(NOW, UTC) - timedelta(seconds=1)
    with pytest.raises(InvalidDelay, match="in the past"):
        drive(flows.reschedule_flow("orders", "m-1", at=past), stub)
    with pytest.raises(InvalidDelay, match="maximum delay"):
        drive(flows.reschedule_flow("orders", "m-1", delay=10**9), stub)
    assert stub.calls == []


def test_what_each_flow_needs_is_said_before_any_call() -> None:
    stub = StubAws()
    off = _sender(stub, registry="off").scheduled_flows
    with pytest.raises(ConfigError, match="registry"):
        drive(off.cancel_flow("orders", "m-1"), stub)
    with pytest.raises(ConfigError, match="registry"):
        drive(off.scheduled_flow("orders"), stub)
    with pytest.raises(ConfigError, match="registry"):
        drive(off.tagged_flow("orders", ("team", "a")), stub)
    with pytest.raises(ConfigError, match="SQSDELAY_PARKING=scheduler"):
        drive(off.parked_flow("orders"), stub)
    on = _sender(stub).scheduled_flows
    with pytest.raises(InvalidInput, match="--limit 0"):
        drive(on.scheduled_flow("orders", limit=0), stub)
    with pytest.raises(InvalidDelay, match="time zone"):
        drive(on.scheduled_flow("orders", due_before=datetime(2030, 1, 1)), stub)
    assert stub.calls == []
