"""NServiceBus interoperability in both directions, against the transport's own rules.

`tests/nservicebus_port.py` ports those rules from Particular/NServiceBus.AmazonSQS and
`tests/fixtures/nservicebus/` holds requests derived from the same source, each citing it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Message, Sender, plan
from sqsdelay.core import nservicebus, quotas, wire_format
from sqsdelay.core.decision import HandOver, Limits, Requeue, decide
from sqsdelay.core.received import Received, from_boto
from sqsdelay.errors import InvalidMessage, InvalidQueueName, TooManyAttributes
from sqsdelay.settings import Settings
from tests.support import nservicebus_port as nsb
from tests.support.workerkit import Collector, RunningWorker

FIXTURES = Path(__file__).parents[1] / "fixtures" / "nservicebus"
CYCLE = 2
TYPE = "Sales.OrderPlaced, Sales"


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    assert data["derived_from"], "every fixture cites the source it was derived from"
    return data


def received(doc: dict[str, Any]) -> Received:
    return from_boto(doc["received"])


@pytest.fixture
def fast(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(
        max_native_delay_seconds=CYCLE, visibility_timeout_seconds=3, wait_time_seconds=1
    )


def receive_one(sqs: Any, url: str, timeout: float = 15) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        resp = sqs.receive_message(
            QueueUrl=url,
            WaitTimeSeconds=1,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        )
        for m in resp.get("Messages", []):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            m.setdefault("MessageAttributes", {})
            return dict(m)
    raise AssertionError(f"no message on {url} within {timeout} s")


def send_request(sqs: Any, prefix: str, request: dict[str, Any]) -> None:
    """Send a request in the port's shape (queue by name) to the emulator."""
    request = dict(request)
    url = sqs.get_queue_url(QueueName=prefix + request.pop("QueueName"))["QueueUrl"]
    sqs.send_message(QueueUrl=url, **request)


# --- the port against the fixtures -------------------------------------------------------


def test_the_port_reproduces_the_fixtures_derived_from_the_source() -> None:
    d = fixture("dispatch_delay_3_days.json")
    i = d["input"]
    got = nsb.dispatch(
        i["destination"], i["message_id"], i["headers"], i["payload"].encode(), i["delay_seconds"]
    )
    assert got == d["request"]
    for name in ("pump_requeue.json", "pump_hand_over.json"):
        doc = fixture(name)
        got = nsb.pump(doc["received"], now_ms=doc["now_ms"], destination=doc["destination"])
        assert got == doc["request"], name


# --- sqsdelay writes what NServiceBus writes ----------------------------------------------


def test_a_3_day_send_in_nservicebus_mode_is_the_request_nservicebus_makes() -> None:
    d = fixture("dispatch_delay_3_days.json")
    want = d["request"]
    settings = Settings(wire_format="nservicebus")
    planned = plan(
        "Sales.Orders",  # sanitized as NServiceBus does
        Message(d["input"]["payload"], delay=259200, message_type=TYPE),
        settings,
        now=1795341600.0,
        new_id=lambda: d["input"]["message_id"],
    )
    assert planned.queue == want["QueueName"]
    request = planned.request
    assert request["MessageAttributes"] == want["MessageAttributes"]  # names, types, values
    assert request["MessageGroupId"] == want["MessageGroupId"]
    # NServiceBus deduplicates by the message id; sqsdelay by the send (a retry that keeps the
    # id is not dropped in SQS's five minutes). Its pump only copies the id into a requeue,
    # a whole cycle later, when no window is open.
    assert request["MessageDeduplicationId"] != want["MessageDeduplicationId"]
    assert "DelaySeconds" not in request and "DelaySeconds" not in want
    ours, theirs = json.loads(request["MessageBody"]), json.loads(want["MessageBody"])
    assert list(ours) == list(theirs) == ["Body", "S3BodyKey", "Headers"]
    assert ours["Body"] == theirs["Body"] and ours["S3BodyKey"] is None
    for header in (
        nservicebus.MESSAGE_ID,
        nservicebus.ENCLOSED_MESSAGE_TYPES,
        nservicebus.CONTENT_TYPE,
        nservicebus.TIME_SENT,
        nservicebus.MESSAGE_INTENT,
    ):
        assert ours["Headers"][header], header
    assert ours["Headers"][nservicebus.TIME_SENT] == theirs["Headers"][nservicebus.TIME_SENT]
    assert ours["Headers"][nservicebus.MESSAGE_ID] == want["MessageGroupId"]
    accepted = nsb.input_queue({"MessageId": "sqs-id", "Body": request["MessageBody"]})
    assert accepted.body == d["input"]["payload"].encode() and not accepted.native
    assert accepted.headers[nservicebus.ENCLOSED_MESSAGE_TYPES] == TYPE


def test_nservicebus_mode_needs_a_message_type() -> None:
    with pytest.raises(InvalidMessage, match="--message-type"):
        plan("orders", Message("x", delay=5), Settings(wire_format="nservicebus"), now=0.0)


# --- sqsdelay's worker does what NServiceBus's pump does ---------------------------------


def test_the_worker_hands_over_as_the_pump_does_attribute_for_attribute() -> None:
    doc = fixture("pump_hand_over.json")
    r = received(doc)
    decision = decide(r, local_now_ms=doc["now_ms"], offset_ms=None, lim=Limits())
    want = doc["request"]
    assert isinstance(decision, HandOver)
    # The pump rounds the fraction of a second up; the worker waits it out and sends the
    # whole seconds left, which without the wait (`at_once`) is the pump's request.
    assert decision.at_once().request() == {"DelaySeconds": want["DelaySeconds"]}
    assert decision.attributes == want["MessageAttributes"]


def test_the_worker_requeues_with_the_pumps_attributes_and_its_due_time() -> None:
    doc = fixture("pump_requeue.json")
    decision = decide(received(doc), local_now_ms=doc["now_ms"], offset_ms=None, lim=Limits())
    want = doc["request"]["MessageAttributes"]
    assert isinstance(decision, Requeue)
    assert decision.remaining_seconds == 258300
    assert {k: v for k, v in decision.attributes.items() if k in want} == want
    assert set(decision.attributes) - set(want) == {wire_format.DUE_AT_ATTRIBUTE}
    assert decision.group_id == doc["request"]["MessageGroupId"]


@pytest.mark.parametrize("elapsed_ms", [0, 1, 999, 1000, 1001, 450_500, 900_000, 900_999])
@pytest.mark.parametrize("delay", [0, 1, 901, 1800, 259200])
def test_remaining_delay_is_the_pumps_on_a_first_receive(delay: int, elapsed_ms: int) -> None:
    sent = 1_795_341_600_000
    message = {
        "MessageId": "m",
        "Body": "b",
        "Attributes": {
            "SentTimestamp": str(sent),
            "ApproximateFirstReceiveTimestamp": str(sent + elapsed_ms),
            "ApproximateReceiveCount": "1",
            "MessageDeduplicationId": "d",
            "MessageGroupId": "g",
        },
        "MessageAttributes": {
            wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": str(delay)}
        },
        "ReceiptHandle": "h",
    }
    theirs = nsb.pump(message, now_ms=sent + elapsed_ms, destination="q")
    ours = decide(from_boto(message), local_now_ms=sent + elapsed_ms, offset_ms=None, lim=Limits())
    assert isinstance(ours, Requeue | HandOver)
    if isinstance(ours, HandOver):
        assert theirs["QueueName"] == "q"
        assert ours.at_once().request().get("DelaySeconds") == theirs.get("DelaySeconds")
        assert ours.remaining_seconds * 1000 + ours.wait_ms == max(0, delay * 1000 - elapsed_ms)
        assert ours.attributes == theirs["MessageAttributes"]
    else:
        assert theirs["QueueName"] == "q-delay.fifo"
        their_delay = theirs["MessageAttributes"][wire_format.DELAY_ATTRIBUTE]["StringValue"]
        assert str(ours.remaining_seconds) == their_delay


def test_a_foreign_message_with_many_receives_is_not_dead_lettered() -> None:
    doc = fixture("pump_requeue.json")
    message = json.loads(json.dumps(doc["received"]))
    message["Attributes"]["ApproximateReceiveCount"] = "57"  # NServiceBus's own retries
    now = int(message["Attributes"]["ApproximateFirstReceiveTimestamp"]) + 1000
    decision = decide(from_boto(message), local_now_ms=now, offset_ms=None, lim=Limits())
    assert isinstance(decision, Requeue)


@pytest.mark.parametrize("value", [None, "soon", "-5", ""])
def test_invalid_delay_is_delivered_at_once_when_configured_like_nservicebus(
    value: str | None,
) -> None:
    doc = fixture("pump_hand_over.json")
    message = json.loads(json.dumps(doc["received"]))
    if value is None:
        del message["MessageAttributes"][wire_format.DELAY_ATTRIBUTE]
    else:
        message["MessageAttributes"][wire_format.DELAY_ATTRIBUTE]["StringValue"] = value
    theirs = nsb.pump(message, now_ms=doc["now_ms"], destination="Sales-Orders")
    assert theirs["QueueName"] == "Sales-Orders" and "DelaySeconds" not in theirs
    r = from_boto(message)
    assert decide(r, local_now_ms=0, offset_ms=None, lim=Limits()).target == "error"
    ours = decide(r, local_now_ms=0, offset_ms=None, lim=Limits(invalid_delay="deliver"))
    assert isinstance(ours, HandOver)
    assert ours.request() == {} and ours.attributes == theirs["MessageAttributes"]


# --- over the emulator: both directions ---------------------------------------------------


def test_an_nservicebus_message_through_sqsdelays_worker_arrives_as_the_pump_sends_it(
    fast: Settings, sqs: Any
) -> None:
    Installer(fast, client=sqs).run(["Sales.Orders"])
    d = fixture("dispatch_delay_3_days.json")["input"]
    delay = 2 * CYCLE + 1
    written = nsb.dispatch(
        "Sales-Orders", d["message_id"], d["headers"], d["payload"].encode(), delay, CYCLE
    )
    assert written["QueueName"] == "Sales-Orders-delay.fifo"
    start = time.time()
    send_request(sqs, fast.queue_prefix, written)
    # What NServiceBus's own pump sends on the last hop (timestamps that make it a hand-over).
    last_hop = {
        "MessageId": "sqs-id",
        "Body": written["MessageBody"],
        "MessageAttributes": written["MessageAttributes"],
        "Attributes": {
            "SentTimestamp": "0",
            "ApproximateFirstReceiveTimestamp": str(delay * 1000),
            "ApproximateReceiveCount": "1",
            "MessageDeduplicationId": d["message_id"],
        },
    }
    want = nsb.pump(last_hop, now_ms=delay * 1000, destination="Sales-Orders")
    url = sqs.get_queue_url(QueueName=fast.queue_prefix + "Sales-Orders")["QueueUrl"]
    collector = Collector(sqs, url)
    with RunningWorker(fast, ["Sales.Orders"]):
        (got,) = collector.until(1, timeout=20)
        collector.quiet_for(1)
    assert len(collector.got) == 1
    assert got.body == want["MessageBody"]
    assert got.attributes == want["MessageAttributes"]
    assert 0 <= got.at - (start + delay) < 2.0
    assert (
        nsb.input_queue({"MessageId": got.message_id, "Body": got.body}).body
        == b'{"OrderId":42,"Customer":"ACME"}'
    )


def test_a_full_nservicebus_mode_message_survives_the_pumps_requeue_and_is_accepted(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    settings = make_settings(
        max_native_delay_seconds=CYCLE, wire_format="nservicebus", wait_time_seconds=1
    )
    Installer(settings, client=sqs).run(["orders"])
    user = {f"a{i}": {"DataType": "String", "StringValue": str(i)} for i in range(8)}
    sender = Sender(settings, client=sqs)
    with pytest.raises(TooManyAttributes):  # room is kept for the delay and the message id
        sender.send(
            "orders", "x", delay=60, attributes={**user, "a8": user["a0"]}, message_type=TYPE
        )
    result = sender.send("orders", '{"OrderId":7}', delay=60, attributes=user, message_type=TYPE)
    assert result.nservicebus_message_id == result.message_id
    delay_url = sqs.get_queue_url(QueueName=settings.queue_prefix + "orders-delay.fifo")["QueueUrl"]
    first = receive_one(sqs, delay_url)
    assert len(first["MessageAttributes"]) == quotas.MAX_MESSAGE_ATTRIBUTES
    # An NServiceBus endpoint drains the delay queue: its pump requeues the message ...
    now_ms = int(time.time() * 1000)
    requeue = nsb.pump(first, now_ms=now_ms, destination="orders", queue_delay_seconds=CYCLE)
    assert requeue["QueueName"] == "orders-delay.fifo"
    assert len(requeue["MessageAttributes"]) <= quotas.MAX_MESSAGE_ATTRIBUTES
    send_request(sqs, settings.queue_prefix, requeue)
    # ... and the next time, with a production cycle of 900 s, hands it over.
    second = receive_one(sqs, delay_url)
    hand_over = nsb.pump(second, now_ms=now_ms, destination="orders")
    assert hand_over["QueueName"] == "orders"
    send_request(sqs, settings.queue_prefix, {**hand_over, "DelaySeconds": 0})
    arrived = receive_one(sqs, result.queue_url.replace("-delay.fifo", ""))
    accepted = nsb.input_queue(arrived)
    assert accepted.body == b'{"OrderId":7}'
    assert accepted.headers[nservicebus.ENCLOSED_MESSAGE_TYPES] == TYPE
    assert accepted.headers[nservicebus.MESSAGE_ID] == result.message_id
    assert {k: v for k, v in arrived["MessageAttributes"].items() if k in user} == user


def test_sqsdelays_requeue_leaves_room_for_the_pump() -> None:
    """With 7 user attributes the worker adds sqsdelay.DueAt (10 in all); the pump then
    overwrites NServiceBus.MessageId instead of adding an 11th."""
    user = {f"a{i}": {"DataType": "String", "StringValue": str(i)} for i in range(7)}
    planned = plan("orders", Message("x", delay=5000, attributes=user), Settings(), now=0.0)
    attributes = planned.request["MessageAttributes"]
    message = {
        "MessageId": "m1",
        "ReceiptHandle": "h",
        "Body": "x",
        "MessageAttributes": attributes,
        "Attributes": {
            "SentTimestamp": "0",
            "ApproximateFirstReceiveTimestamp": "900000",
            "ApproximateReceiveCount": "1",
            "MessageDeduplicationId": planned.request["MessageDeduplicationId"],
            "MessageGroupId": planned.request["MessageGroupId"],
        },
    }
    ours = decide(from_boto(message), local_now_ms=900_000, offset_ms=None, lim=Limits())
    assert isinstance(ours, Requeue)
    assert len(ours.attributes) == quotas.MAX_MESSAGE_ATTRIBUTES
    assert wire_format.DUE_AT_ATTRIBUTE in ours.attributes
    theirs = nsb.pump(
        {**message, "MessageAttributes": ours.attributes}, now_ms=0, destination="orders"
    )
    assert len(theirs["MessageAttributes"]) == quotas.MAX_MESSAGE_ATTRIBUTES


def test_raw_mode_is_refused_by_an_endpoint_which_is_why_the_mode_exists(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    raw = make_settings()
    Installer(raw, client=sqs).run(["orders"])
    url = Sender(raw, client=sqs).send("orders", '{"OrderId":1}', delay=0).queue_url
    with pytest.raises(nsb.Refused, match="no message type"):
        nsb.input_queue(receive_one(sqs, url))
    # A raw body that happens to be valid base64 is decoded by mistake.
    Sender(raw, client=sqs).send("orders", "dGVzdA==", delay=0, message_type=TYPE)
    assert nsb.input_queue(receive_one(sqs, url)).body == b"test"
    # In raw mode a message type gives the native form (MessageTypeFullName, transport 6+).
    Sender(raw, client=sqs).send("orders", '{"OrderId":2}', delay=0, message_type=TYPE)
    native = nsb.input_queue(receive_one(sqs, url))
    assert native.native and native.headers[nservicebus.ENCLOSED_MESSAGE_TYPES] == TYPE
    assert native.body == '{"OrderId":2}'.encode("utf-16-le")  # ConvertBody's fallback


def test_a_destination_of_80_characters_takes_delays_up_to_900_s(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    settings = make_settings()
    name = "n" * (80 - len(settings.queue_prefix))
    url = sqs.create_queue(QueueName=settings.queue_prefix + name)["QueueUrl"]
    sent = Sender(settings, client=sqs).send(name, "x", delay=900)
    assert sent.route == "direct" and sent.queue_url == url
    with pytest.raises(InvalidQueueName, match="at most 69"):
        Sender(settings, client=sqs).send(name, "x", delay=901)
    with pytest.raises(InvalidQueueName, match="at most 69"):
        Installer(settings, client=sqs).run([name])
