"""The idempotency guard against the embedded emulator over HTTP: duplicates of a direct send
(the id rides on every send that has room for it)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest

from sqsdelay import consumer
from sqsdelay.aws.sender import Sender
from sqsdelay.core import wire_format
from sqsdelay.errors import InvalidInput
from sqsdelay.settings import Settings
from tests.support.consumerkit import guard_table, install, lambda_record, receive_one, sent_twice

ATTRS = {"tenant": {"DataType": "String", "StringValue": "a"}}


@pytest.fixture
def dynamodb(moto_url: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=moto_url, region_name="us-east-1")


@pytest.fixture
def table(dynamodb: Any) -> str:
    return guard_table(dynamodb, f"idem-{uuid.uuid4().hex[:8]}")


def test_a_direct_send_whose_answer_was_lost_runs_a_guarded_handler_once_with_no_key(
    settings: Settings, sqs: Any, dynamodb: Any, table: str
) -> None:
    url = install(settings, sqs, "orders")["orders"]
    sent, copies = sent_twice(settings, sqs, url, '{"charge": 7}', attributes=ATTRS)
    assert sent.route == "direct"
    assert copies[0]["MessageId"] != copies[1]["MessageId"]  # two messages to SQS
    ids = [c["MessageAttributes"][wire_format.MESSAGE_ID_ATTRIBUTE]["StringValue"] for c in copies]
    assert ids == [sent.message_id] * 2  # the key every copy shares
    runs: list[str] = []
    guard = consumer.Guard(table, name="orders.charge", client=dynamodb)  # no key=

    @guard.once
    def charge(message: Any) -> dict[str, int]:
        runs.append("charged")
        return {"charged": len(runs)}

    first = charge(copies[0])
    second = charge(lambda_record(copies[1], settings.queue_prefix + "orders"))  # any shape
    assert runs == ["charged"]
    assert (first.ran, second.ran, second.result) == (True, False, {"charged": 1})


def test_a_direct_send_with_ten_attributes_of_the_callers_goes_without_the_id_so_a_key_is_needed(
    settings: Settings, sqs: Any, dynamodb: Any, table: str
) -> None:
    url = install(settings, sqs, "orders")["orders"]
    ten = {f"a{i}": {"DataType": "String", "StringValue": str(i)} for i in range(10)}
    sent = Sender(settings, client=sqs).send(
        "orders", '{"order_id": "o-1"}', delay=0, attributes=ten
    )
    assert sent.nservicebus_message_id is None  # sent as given: nothing refused, nothing lost
    got = receive_one(sqs, url)
    assert got["MessageAttributes"] == ten
    with pytest.raises(InvalidInput, match="Name a key"):
        consumer.Guard(table, name="h", client=dynamodb).run(got, lambda m: None)
    keyed = consumer.Guard(
        table, name="h", client=dynamodb, key=lambda m: json.loads(m.received.body)["order_id"]
    )
    assert keyed.run(got, lambda m: 1).ran and not keyed.run(got, lambda m: 2).ran
