"""The sender against the moto server over HTTP, sync (boto3) and async (aioboto3)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import AsyncSender, BatchResult, Message, Sender, SendResult
from sqsdelay.core import quotas, wire_format
from sqsdelay.errors import (
    BatchSendError,
    DelayQueueMissing,
    InvalidDelay,
    InvalidQueueName,
    MessageDelayTooLong,
    MessageTooLarge,
    QueueMissing,
    TooManyAttributes,
)
from sqsdelay.settings import Settings
from tests.conftest import count_requests, wait_for


class AsyncAdapter:
    """Runs AsyncSender through the same interface as Sender, so every test covers both."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def _run(self, method: str, *args: Any, **kwargs: Any) -> Any:
        async def go() -> Any:
            async with AsyncSender(self.settings) as sender:
                return await getattr(sender, method)(*args, **kwargs)

        return asyncio.run(go())

    def send(self, *args: Any, **kwargs: Any) -> SendResult:
        return self._run("send", *args, **kwargs)  # type: ignore[no-any-return]

    def send_batch(self, *args: Any, **kwargs: Any) -> BatchResult:
        return self._run("send_batch", *args, **kwargs)  # type: ignore[no-any-return]


@pytest.fixture(params=["sync", "async"])
def make_sender(request: pytest.FixtureRequest) -> Callable[[Settings], Any]:
    return Sender if request.param == "sync" else AsyncAdapter


def receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    resp = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["All"],
        **kwargs,
    )
    return resp.get("Messages", [])  # type: ignore[no-any-return]


def url_of(sqs: Any, name: str) -> str:
    return sqs.get_queue_url(QueueName=name)["QueueUrl"]  # type: ignore[no-any-return]


def test_short_delay_goes_direct_with_delayseconds(
    settings: Settings, sqs: Any, make_sender: Callable[[Settings], Any]
) -> None:
    Installer(settings, client=sqs).run(["orders"])
    result = make_sender(settings).send("orders", "hello", delay=0.2)
    assert result.route == "direct" and result.delay_seconds == 1
    assert result.queue == settings.queue_prefix + "orders"
    assert result.queue_url == url_of(sqs, result.queue)
    attrs = sqs.get_queue_attributes(QueueUrl=result.queue_url, AttributeNames=["All"])
    assert attrs["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"
    assert receive(sqs, result.queue_url) == []  # not before its delay


def test_long_delay_goes_to_the_delay_queue_in_nservicebus_format(
    settings: Settings, sqs: Any, make_sender: Callable[[Settings], Any]
) -> None:
    s = settings.model_copy(update={"max_native_delay_seconds": 1})
    Installer(s, client=sqs).run(["orders"])
    binary = bytes(range(256))
    result = make_sender(s).send(
        "orders",
        "payload",
        delay=timedelta(hours=2),
        attributes={
            "bin": {"DataType": "Binary", "BinaryValue": binary},
            "n": {"DataType": "Number", "StringValue": "42"},
        },
    )
    assert result.route == "delay-queue" and result.delay_seconds == 7200
    assert result.queue == s.queue_prefix + "orders-delay.fifo"
    (msg,) = wait_for(lambda: receive(sqs, result.queue_url, WaitTimeSeconds=1), timeout=10)
    assert msg["Body"] == "payload"
    attrs = msg["MessageAttributes"]
    assert attrs[wire_format.DELAY_ATTRIBUTE] == {"StringValue": "7200", "DataType": "String"}
    assert attrs["bin"]["BinaryValue"] == binary
    assert attrs["n"] == {"StringValue": "42", "DataType": "Number"}
    group = msg["Attributes"]["MessageGroupId"]
    assert group == result.message_id and len(group) == 32
    # deduplicated by this send, not by the id alone (SQS's window would drop a new send)
    assert len(msg["Attributes"]["MessageDeduplicationId"]) == 64


def test_deliver_at_in_the_future(
    settings: Settings, sqs: Any, make_sender: Callable[[Settings], Any]
) -> None:
    Installer(settings, client=sqs).run(["orders"])
    at = datetime.now(UTC) + timedelta(days=3, seconds=0.5)
    before = time.time()
    result = make_sender(settings).send("orders", "x", deliver_at=at)
    after = time.time()
    assert result.route == "delay-queue"
    # the time left when the sender read its clock, rounded up (the async sender makes its
    # client first: over a second on a loaded machine)
    left = at.timestamp()
    assert math.ceil(left - after) <= result.delay_seconds <= math.ceil(left - before)


def test_missing_delay_queue_is_a_typed_error_naming_the_fix(
    settings: Settings, sqs: Any, make_sender: Callable[[Settings], Any]
) -> None:
    sqs.create_queue(QueueName=settings.queue_prefix + "plain")  # receiver without delay queue
    with pytest.raises(DelayQueueMissing) as info:
        make_sender(settings).send("plain", "x", delay=901)
    assert f"sqsdelay --queue-prefix {settings.queue_prefix} install plain" in str(info.value)
    assert info.value.queue == settings.queue_prefix + "plain-delay.fifo"
    # a short delay still works: receiver disabled, sender enabled, <= 900 s is supported
    assert make_sender(settings).send("plain", "x", delay=900).route == "direct"


def test_missing_destination_is_a_typed_error(
    settings: Settings, make_sender: Callable[[Settings], Any]
) -> None:
    with pytest.raises(QueueMissing, match="install nowhere"):
        make_sender(settings).send("nowhere", "x", delay=1)


@pytest.mark.parametrize(
    ("sender_unrestricted", "receiver_installed", "delay", "supported"),
    [
        (False, False, 900, True),
        (False, True, 900, True),
        (True, False, 900, True),
        (True, True, 900, True),
        (False, False, 901, False),
        (False, True, 901, False),
        (True, False, 901, False),
        (True, True, 901, True),
    ],
)
def test_support_matrix(
    settings: Settings,
    sqs: Any,
    sender_unrestricted: bool,
    receiver_installed: bool,
    delay: int,
    supported: bool,
) -> None:
    if receiver_installed:
        Installer(settings, client=sqs).run(["orders"])
    else:
        sqs.create_queue(QueueName=settings.queue_prefix + "orders")
    s = settings.model_copy(update={"unrestricted": sender_unrestricted})
    sender = Sender(s, client=sqs)
    if supported:
        assert sender.send("orders", "x", delay=delay).message_id
    elif not sender_unrestricted:
        sent = count_requests(sqs)
        with pytest.raises(MessageDelayTooLong):
            sender.send("orders", "x", delay=delay)
        assert sent == []  # refused before any call
    else:
        with pytest.raises(DelayQueueMissing):
            sender.send("orders", "x", delay=delay)


@pytest.mark.parametrize(
    ("queue", "body", "kwargs", "error"),
    [
        ("orders", "x", {"delay": -1}, InvalidDelay),
        ("orders", "x", {"delay": "soon"}, InvalidDelay),
        ("a" * 70, "x", {"delay": 5000}, InvalidQueueName),
        ("a" * 81, "x", {"delay": 1}, InvalidQueueName),
        ("bäd", "x", {"delay": 1}, InvalidQueueName),
        (
            "orders",
            "x",
            {
                "delay": 5000,
                "attributes": {
                    f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(10)
                },
            },
            TooManyAttributes,
        ),
        (
            "orders",
            "x" * (quotas.MAX_MESSAGE_BYTES - 5),
            {"delay": 1, "attributes": {"a": {"DataType": "String", "StringValue": "v"}}},
            MessageTooLarge,
        ),
    ],
)
def test_bad_input_is_refused_before_any_call(
    settings: Settings, sqs: Any, queue: str, body: str, kwargs: dict[str, Any], error: type
) -> None:
    sent = count_requests(sqs)
    with pytest.raises(error):
        Sender(settings, client=sqs).send(queue, body, **kwargs)
    with pytest.raises(error):
        Sender(settings, client=sqs).send_batch(queue, [Message("ok", 1), Message(body, **kwargs)])
    assert sent == []


def test_ten_attributes_fit_on_the_direct_route(settings: Settings, sqs: Any) -> None:
    Installer(settings, client=sqs).run(["orders"])
    attrs = {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(10)}
    assert Sender(settings, client=sqs).send("orders", "x", delay=0, attributes=attrs).message_id


def test_batches_split_by_queue_count_and_size(
    settings: Settings, sqs: Any, make_sender: Callable[[Settings], Any]
) -> None:
    s = settings.model_copy(update={"max_native_delay_seconds": 5})
    Installer(s, client=sqs).run(["orders"])
    calls = count_requests(sqs)
    sender = Sender(s, client=sqs) if make_sender is Sender else make_sender(s)
    messages = [Message(f"m{i}", delay=i % 2 * 100) for i in range(25)]
    messages.append(Message("big" * 200_000, delay=0))  # 600 KB: must travel in its own batch
    result = sender.send_batch("orders", messages)
    assert result.ok and len(result.sent) == 26
    assert [r.index for r in result.sent] == list(range(26))
    assert {r.route for r in result.sent[:2]} == {"direct", "delay-queue"}
    if make_sender is Sender:
        # 13 direct + 1 big -> 2 batches; 13 delayed -> 2 batches (plus URL lookups)
        assert calls.count("AmazonSQS.SendMessageBatch") == 4


def test_partially_failed_batch_is_never_a_success(
    settings: Settings, sqs: Any, make_sender: Callable[[Settings], Any]
) -> None:
    sqs.create_queue(QueueName=settings.queue_prefix + "orders")  # no delay queue
    messages = [Message("now", delay=0), Message("later", delay=3600), Message("now2", delay=1)]
    with pytest.raises(BatchSendError) as info:
        make_sender(settings).send_batch("orders", messages)
    result = info.value.result
    assert isinstance(result, BatchResult) and not result.ok
    assert [r.index for r in result.sent] == [0, 2]
    assert [(f.index, f.code) for f in result.failed] == [(1, "QueueDoesNotExist")]
    quiet = make_sender(settings).send_batch("orders", messages, raise_on_failure=False)
    assert len(quiet.failed) == 1 and len(quiet.sent) == 2


def test_send_logs_delay_scheduled_without_the_body(
    settings: Settings, sqs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from sqsdelay import logs

    logs.configure("json", "INFO")
    Installer(settings, client=sqs).run(["orders"])
    capsys.readouterr()
    # Without trace context: a pytest worker that ran the OpenTelemetry tests before holds
    # their SDK (a process has one tracer provider), and a traceparent would add its bytes.
    untraced = settings.model_copy(update={"otel": "off"})
    Sender(untraced, client=sqs).send("orders", "top secret body", delay=2000)
    err = capsys.readouterr().err
    assert "top secret body" not in err
    event = next(json.loads(line) for line in err.splitlines() if "delay.scheduled" in line)
    assert event["destination"] == settings.queue_prefix + "orders"
    assert event["delay_seconds"] == 2000 and event["route"] == "delay-queue"
    delay_attribute = len(wire_format.DELAY_ATTRIBUTE) + len("String") + len("2000")
    id_attribute = len(wire_format.MESSAGE_ID_ATTRIBUTE) + len("String") + len(event["message_id"])
    due_attribute = len(wire_format.DUE_AT_ATTRIBUTE) + len("Number") + 13  # epoch ms: 13 digits
    assert event["size_bytes"] == (
        len("top secret body") + delay_attribute + id_attribute + due_attribute
    )
    assert event["message_id"] and event["sqs_message_id"] != event["message_id"]
