"""Lambda's SQS poller, played by a test: records built from received messages, and one
round of receive, invoke and delete."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from tests.conftest import wait_for


def lambda_record(message: dict[str, Any], arn: str) -> dict[str, Any]:
    """What Lambda's SQS poller hands the function for a received message."""
    attrs = {}
    for name, value in message.get("MessageAttributes", {}).items():
        attr: dict[str, Any] = {
            "dataType": value["DataType"],
            "stringListValues": [],
            "binaryListValues": [],
        }
        if "BinaryValue" in value:
            attr["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode()
        else:
            attr["stringValue"] = value["StringValue"]
        attrs[name] = attr
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message["Attributes"],
        "messageAttributes": attrs,
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": "us-east-1",
    }


def receive(sqs: Any, url: str) -> list[dict[str, Any]]:
    """One receive as Lambda's poller makes it: up to 10, every attribute."""
    resp = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=1,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["All"],
    )
    return list(resp.get("Messages", []))


def receive_records(sqs: Any, url: str, arn: str, count: int) -> list[dict[str, Any]]:
    """At least `count` messages of the queue (within 15 s), as records of `arn`."""
    got: list[dict[str, Any]] = []

    def more() -> bool:
        got.extend(receive(sqs, url))
        return len(got) >= count

    wait_for(more, timeout=15)
    return [lambda_record(m, arn) for m in got]


def invoke_as_lambda(
    sqs: Any, url: str, handler: Callable[[dict[str, Any], Any], dict[str, Any]]
) -> list[dict[str, Any]]:
    """One round of Lambda's SQS poller: receive, invoke, delete what did not fail."""
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    records = [lambda_record(m, arn["Attributes"]["QueueArn"]) for m in receive(sqs, url)]
    if records:
        failed = {
            f["itemIdentifier"] for f in handler({"Records": records}, None)["batchItemFailures"]
        }
        for r in records:
            if r["messageId"] not in failed:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=r["receiptHandle"])
    return records
