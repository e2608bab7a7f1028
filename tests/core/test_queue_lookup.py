"""Queue URLs by name (core/queue_lookup.py): asked for once per name and account, a missing
queue's error naming the command that creates it, and forgotten after a miss."""

from __future__ import annotations

import pytest

from sqsdelay.core.flows import Fault, drive
from sqsdelay.core.queue_lookup import QueueLookup
from sqsdelay.errors import DelayQueueMissing, QueueMissing, SqsOperationError
from tests.support.stub import StubAws


def _lookup() -> QueueLookup:
    return QueueLookup("p-", "error", lambda queue: f"sqsdelay install {queue}")


def test_a_url_is_asked_for_once_per_name_and_account() -> None:
    stub, lookup = StubAws(), _lookup()
    assert drive(lookup.lookup("p-orders"), stub).endswith("/p-orders")
    drive(lookup.lookup("p-orders"), stub)
    drive(lookup.lookup("p-orders", "210987654321"), stub)
    asked = [c.params for c in stub.calls if c.api == "GetQueueUrl"]
    assert asked == [
        {"QueueName": "p-orders"},
        {"QueueName": "p-orders", "QueueOwnerAWSAccountId": "210987654321"},
    ]


def test_a_missing_delay_queue_says_how_to_create_it() -> None:
    stub, lookup = StubAws(), _lookup()
    stub.fail("GetQueueUrl", "AWS.SimpleQueueService.NonExistentQueue")
    with pytest.raises(DelayQueueMissing) as raised:
        drive(lookup.destination("orders"), stub)
    assert "sqsdelay install orders" in str(raised.value)


def test_a_missing_queue_nobody_named_has_no_command() -> None:
    err = _lookup().missing("SendMessage", "elsewhere")
    assert type(err) is QueueMissing and "install" not in str(err)


def test_a_miss_forgets_the_url_and_other_faults_keep_it() -> None:
    stub, lookup = StubAws(), _lookup()
    drive(lookup.lookup("p-orders"), stub)
    other = lookup.failure(Fault("Throttling", "slow"), "SendMessage", "p-orders")
    assert type(other) is SqsOperationError and other.code == "Throttling"
    drive(lookup.lookup("p-orders"), stub)
    assert len(stub.calls) == 1
    lookup.trio("orders")
    gone = lookup.failure(Fault("QueueDoesNotExist", "gone"), "SendMessage", "p-orders")
    assert isinstance(gone, QueueMissing) and "sqsdelay install orders" in str(gone)
    drive(lookup.lookup("p-orders"), stub)
    assert len(stub.calls) == 2  # asked again after the miss
