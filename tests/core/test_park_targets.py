"""Where parked messages go back to (core/park_targets.py): the error queue's ARN read off
its URL and the client's place, looked up once; none when parking is off, for a forward, or
when a queue cannot be looked up (the loop carries the message instead)."""

from __future__ import annotations

import dataclasses

from sqsdelay.core.flows import drive
from sqsdelay.core.park_targets import ParkTargets, park_target
from sqsdelay.core.queue_lookup import QueueLookup
from tests.support.stub import StubAws

ROLE = "arn:aws:iam::123456789012:role/scheduler"


def _targets(role: str | None = ROLE) -> ParkTargets:
    return ParkTargets("sqsdelay", role, QueueLookup("", "error", lambda q: q))


def test_the_error_queue_arn_is_read_off_its_url_and_the_place() -> None:
    url = "https://sqs.eu-west-1.amazonaws.com/123456789012/error"
    target = park_target("g", ROLE, "https://d", url + "/", ("aws-cn", "cn-north-1"))
    assert target.dead_letter_arn == "arn:aws-cn:sqs:cn-north-1:123456789012:error"
    assert (target.group, target.role_arn, target.delay_queue_url) == ("g", ROLE, "https://d")


def test_a_target_is_looked_up_once_per_delay_queue_and_account() -> None:
    stub, targets = StubAws(), _targets()
    trio = targets.resolver.trio("orders")
    first = drive(targets.lookup(trio, ("aws", "us-east-1")), stub)
    again = drive(targets.lookup(trio, ("aws", "us-east-1")), stub)
    assert first is again and first is not None
    assert first.delay_queue_url.endswith("/orders-delay.fifo")
    assert len(stub.calls) == 2  # the delay queue and the error queue
    drive(targets.lookup(trio, ("aws", "us-east-1"), "210987654321"), stub)
    assert len(stub.calls) == 4


def test_none_when_off_for_a_forward_or_when_a_queue_is_missing() -> None:
    stub = StubAws()
    off = _targets(role=None)
    assert drive(off.lookup(off.resolver.trio("orders"), ("aws", "x")), stub) is None
    on = _targets()
    forward = dataclasses.replace(on.resolver.trio("orders.fifo"), forwards=True)
    assert drive(on.lookup(forward, ("aws", "x")), stub) is None
    assert stub.calls == []
    stub.fail("GetQueueUrl", "QueueDoesNotExist")
    assert drive(on.lookup(on.resolver.trio("orders"), ("aws", "x")), stub) is None
