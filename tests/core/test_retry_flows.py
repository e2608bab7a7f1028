"""A consumer's retry as flows (core/retry_flows.py), answered by the stub SQS: the retry's
send, then the original's delete; nothing deleted when the send fails; the backoff's give
up into the error queue with the poison record; another account's queues by their URL."""

from __future__ import annotations

from typing import Any

import pytest

from sqsdelay.aws.sender import Sender
from sqsdelay.core import consumer_message, wire_format
from sqsdelay.core.flows import drive
from sqsdelay.core.retries import Backoff
from sqsdelay.core.retry_flows import OriginalNotDeleted, backoff_flow, retry_flow
from sqsdelay.core.send_flows import SendFlows
from sqsdelay.errors import ConfigError, SqsOperationError
from sqsdelay.settings import Settings
from tests.support.stub import StubAws

OTHER = "222222222222"


def _record(account: str = OTHER) -> dict[str, Any]:
    return {
        "messageId": "m-1",
        "receiptHandle": "rh-1",
        "body": "charge order 7",
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {
            wire_format.MESSAGE_ID_ATTRIBUTE: {"dataType": "String", "stringValue": "order-7"}
        },
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:us-east-1:{account}:orders",
    }


def _flows(stub: StubAws, **settings: Any) -> SendFlows:
    return Sender(Settings(region="us-east-1", **settings), caller=stub).flows


def test_the_retry_is_sent_then_the_original_deleted_in_its_owners_queues() -> None:
    stub = StubAws()
    incoming = consumer_message.read(_record())
    done = drive(retry_flow(_flows(stub), incoming, delay=5, at=None), stub)
    assert done.attempt == 1 and done.message_id == "order-7" and done.sent is not None
    assert [c.api for c in stub.calls if c.api != "GetQueueUrl"] == ["SendMessage", "DeleteMessage"]
    # Each queue looked up in the account the message came from (the stub's URLs name none).
    asked = [c.params for c in stub.calls if c.api == "GetQueueUrl"]
    assert asked and all(p.get("QueueOwnerAWSAccountId") == OTHER for p in asked)


def test_a_failed_send_leaves_the_original_and_a_failed_delete_says_so() -> None:
    stub = StubAws()
    stub.fail("SendMessage", "InternalError", times=1)
    with pytest.raises(SqsOperationError):
        drive(retry_flow(_flows(stub), consumer_message.read(_record()), delay=5, at=None), stub)
    assert not [c for c in stub.calls if c.api == "DeleteMessage"]
    stub.fail("DeleteMessage", "InternalError")
    with pytest.raises(OriginalNotDeleted, match="comes back after its visibility timeout"):
        drive(retry_flow(_flows(stub), consumer_message.read(_record()), delay=5, at=None), stub)


def test_a_give_up_goes_to_the_error_queue_with_its_reason() -> None:
    stub = StubAws()
    flows = _flows(stub, error_queue="error")
    done = drive(
        backoff_flow(flows, consumer_message.read(_record()), Backoff(max_attempts=0), 0.5, "down"),
        stub,
    )
    assert done.dead_lettered is not None and "down" in done.dead_lettered
    [sent] = [c for c in stub.calls if c.api == "SendMessage"]
    assert sent.params["QueueUrl"].endswith("/error")
    asked = [c.params for c in stub.calls if c.api == "GetQueueUrl"]
    assert {"QueueName": "error", "QueueOwnerAWSAccountId": OTHER} in asked
    assert sent.params["MessageBody"] == "charge order 7"


def test_the_nservicebus_wire_format_is_refused_before_any_call() -> None:
    stub = StubAws()
    flows = _flows(stub, wire_format="nservicebus")
    with pytest.raises(ConfigError, match="NServiceBus"):
        drive(retry_flow(flows, consumer_message.read(_record()), delay=5, at=None), stub)
    assert stub.calls == []
