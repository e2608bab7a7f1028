"""The Lambda handler, fed events built from real messages received from the moto server."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from sqsdelay.aws import lambda_driver as aws_lambda
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.lambda_driver import Handler
from sqsdelay.aws.sender import Sender
from sqsdelay.core import wire_format
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.lambda_events import invoke_as_lambda, receive_records
from tests.support.queues import send_raw
from tests.support.workerkit import Collector


@pytest.fixture
def cycle(make_settings: Any, sqs: Any) -> tuple[Settings, dict[str, str], str]:
    s = make_settings(max_native_delay_seconds=1)
    reports = Installer(s, client=sqs).run(["orders"])
    urls = {r.spec.role: str(r.url) for r in reports}
    arn = sqs.get_queue_attributes(QueueUrl=urls["delay"], AttributeNames=["QueueArn"])
    return s, urls, arn["Attributes"]["QueueArn"]


def test_requeue_hand_over_and_poison_in_one_event(cycle: Any, sqs: Any) -> None:
    s, urls, arn = cycle
    send_raw(
        sqs, urls["delay"], "later", "3600", bin={"DataType": "Binary", "BinaryValue": b"\x00\xff"}
    )
    send_raw(sqs, urls["delay"], "now", "1")
    send_raw(sqs, urls["delay"], "bad", "soon")
    records = receive_records(sqs, urls["delay"], arn, 3)
    result = Handler(s, client=sqs)({"Records": records})
    assert result == {"batchItemFailures": []}
    (handed,) = Collector(sqs, urls["destination"]).until(1, timeout=10)
    now_record = next(r for r in records if r["body"] == "now")
    assert handed.body == "now"  # with the message id NServiceBus's pump would also set
    assert handed.attributes == {
        wire_format.MESSAGE_ID_ATTRIBUTE: {
            "DataType": "String",
            "StringValue": now_record["messageId"],
        }
    }
    (dead,) = Collector(sqs, urls["error"]).until(1, timeout=10)
    assert dead.body == "bad" and wire_format.FAILURE_ATTRIBUTE in dead.attributes
    for r in records:  # what Lambda does with the records that did not fail
        sqs.delete_message(QueueUrl=urls["delay"], ReceiptHandle=r["receiptHandle"])
    requeued = receive_records(sqs, urls["delay"], arn, 1)
    later = [r for r in requeued if r["body"] == "later"]
    assert later and later[0]["messageAttributes"]["bin"]["binaryValue"] == "AP8="
    left = int(later[0]["messageAttributes"][wire_format.DELAY_ATTRIBUTE]["stringValue"])
    assert 3590 < left < 3600
    assert wire_format.DUE_AT_ATTRIBUTE in later[0]["messageAttributes"]


def test_two_copies_of_one_message_in_one_event_are_handed_over_once(cycle: Any, sqs: Any) -> None:
    """Within one invocation, as in the worker: the second copy of a message (an emulator's
    double receive, or a redelivery batched with its first receive) is neither sent nor
    reported; Lambda deletes both handles once the first copy was handed over."""
    s, urls, arn = cycle
    send_raw(sqs, urls["delay"], "once", "1")
    (record,) = receive_records(sqs, urls["delay"], arn, 1)
    copy = {**record, "receiptHandle": record["receiptHandle"] + "-copy"}
    handler = Handler(s, client=sqs)
    assert handler({"Records": [record, copy]}) == {"batchItemFailures": []}
    dest = Collector(sqs, urls["destination"])
    dest.until(1, timeout=10)
    dest.quiet_for(2)
    assert [g.body for g in dest.got] == ["once"]
    assert handler.stats.events["delay.copy_in_hand"] == 1


def test_partial_failure_reports_exactly_the_failed_records(cycle: Any, sqs: Any) -> None:
    s, urls, arn = cycle
    send_raw(sqs, urls["delay"], "later", "3600")
    send_raw(sqs, urls["delay"], "now-1", "1")
    send_raw(sqs, urls["delay"], "now-2", "0")
    records = receive_records(sqs, urls["delay"], arn, 3)
    sqs.delete_queue(QueueUrl=urls["destination"])  # hand-overs will fail
    result = Handler(s, client=sqs)({"Records": records})
    failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
    expected = {r["messageId"] for r in records if r["body"].startswith("now")}
    assert failed == expected


def test_records_without_broker_timestamps_are_poison(cycle: Any, sqs: Any) -> None:
    s, urls, arn = cycle
    send_raw(sqs, urls["delay"], "stamped", "3600")
    (record,) = receive_records(sqs, urls["delay"], arn, 1)
    del record["attributes"]["SentTimestamp"]
    assert Handler(s, client=sqs)({"Records": [record]}) == {"batchItemFailures": []}
    (dead,) = Collector(sqs, urls["error"]).until(1, timeout=10)
    reason = json.loads(dead.attributes[wire_format.FAILURE_ATTRIBUTE]["StringValue"])["reason"]
    assert "SentTimestamp is missing" in reason


def test_an_event_from_a_queue_that_is_not_a_delay_queue_fails_whole(cycle: Any, sqs: Any) -> None:
    s, urls, arn = cycle
    send_raw(sqs, urls["delay"], "x", "5")
    records = receive_records(sqs, urls["delay"], arn, 1)
    for r in records:
        r["eventSourceARN"] = "arn:aws:sqs:us-east-1:123456789012:orders"
    result = Handler(s, client=sqs)({"Records": records})
    assert [f["itemIdentifier"] for f in result["batchItemFailures"]] == [records[0]["messageId"]]


def test_module_handler_reads_settings_from_the_environment(
    cycle: Any, sqs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, urls, arn = cycle
    for key, value in {
        "ENDPOINT_URL": s.endpoint_url,
        "REGION": "us-east-1",
        "QUEUE_PREFIX": s.queue_prefix,
        "MAX_NATIVE_DELAY_SECONDS": "1",
    }.items():
        monkeypatch.setenv(f"SQSDELAY_{key}", str(value))
    monkeypatch.setattr(aws_lambda, "_handler", None)
    send_raw(sqs, urls["delay"], "now", "0")
    records = receive_records(sqs, urls["delay"], arn, 1)
    started = time.time()
    assert aws_lambda.handler({"Records": records}, None) == {"batchItemFailures": []}
    (got,) = Collector(sqs, urls["destination"]).until(1, timeout=10)
    assert got.body == "now" and got.at - started < 5


def test_one_record_that_cannot_be_handled_fails_alone(cycle: Any, sqs: Any) -> None:
    # An unexpected error used to fail the whole invocation, and the records already handed
    # over were delivered again.
    s, urls, arn = cycle
    for body in ("a", "b"):
        send_raw(sqs, urls["delay"], body, "0")
    records = receive_records(sqs, urls["delay"], arn, 2)
    odd = {**records[0], "messageId": "odd", "receiptHandle": records[0]["receiptHandle"]}
    odd["messageAttributes"] = {"n": {"dataType": "String", "stringValue": 5}}
    # Another message (its own id: one message in an event twice is handled once).
    due = {
        **records[1],
        "messageId": "broken-timestamp",
        "attributes": {**records[1]["attributes"], "SentTimestamp": "²"},
    }
    handler = Handler(s, client=sqs)
    result = handler({"Records": [odd, due, records[1]]}, None)
    assert result == {"batchItemFailures": [{"itemIdentifier": "odd"}]}
    got = Collector(sqs, urls["destination"]).until(1, timeout=10)
    assert [g.body for g in got] == ["b"]
    errors = Collector(sqs, urls["error"]).until(1, timeout=10)  # the broken timestamp
    assert [e.body for e in errors] == ["b"]


def test_a_fifo_destination_is_served_by_its_delay_and_staging_event_sources(
    make_settings: Any, sqs: Any
) -> None:
    """Two event source mappings, one function: the FIFO delay queue hands over into the
    staging queue, and the staging queue's records are forwarded in their group."""
    s = make_settings(max_native_delay_seconds=1)
    urls = {r.spec.role: str(r.url) for r in Installer(s, client=sqs).run(["orders.fifo"])}
    Sender(s, client=sqs).send("orders.fifo", "hello", delay=2, group_id="order-7")
    handler = Handler(s, client=sqs)
    got = Collector(sqs, urls["destination"])

    def one_round() -> bool:
        invoke_as_lambda(sqs, urls["delay"], handler)
        invoke_as_lambda(sqs, urls["staging"], handler)
        got.poll()
        return bool(got.got)

    wait_for(one_round, timeout=20)
    [delivered] = got.got
    assert delivered.body == "hello" and delivered.system["MessageGroupId"] == "order-7"
    assert handler.stats.events["delay.handed_over"] == handler.stats.events["delay.forwarded"] == 1
