"""sqsdelay.taskiq's kick without I/O: whatever a producer kicks, the sqsdelay route sends the
body, group and id taskiq-aio-sqs would have sent, and the task reads back what was kicked; a
large one goes to S3 as taskiq-aio-sqs sends it."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from taskiq.exceptions import SendTaskError
from taskiq_aio_sqs import SQSQueue
from taskiq_aio_sqs.exceptions import ExtendedBucketNameMissingError

from sqsdelay import errors
from sqsdelay.taskiq import SQSBroker

FIFO = "orders.fifo"


class FakeSender:
    """Stands in for AsyncSender: records each send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    async def send(self, queue: str, body: str, **options: Any) -> None:
        self.sent.append((queue, body, options))


def started_broker() -> tuple[SQSBroker, FakeSender]:
    """A broker as startup leaves it, with its queue URLs known and a fake sender."""
    broker = SQSBroker(
        "orders", endpoint_url="http://127.0.0.1:9", sqsdelay={"max_native_delay_seconds": 2}
    ).with_queues(SQSQueue(name=FIFO, is_fifo=True))
    assert isinstance(broker, SQSBroker)
    broker._queue_urls = {"orders": "http://q/orders", FIFO: f"http://q/{FIFO}"}
    broker._sqs_queue_url = "http://q/orders"
    fake = FakeSender()
    broker._sqsdelay_sender = fake  # type: ignore[assignment]
    return broker, fake


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(
    args=st.lists(json_values, max_size=3),
    kwargs=st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), json_values),
    delay=st.decimals(min_value="2.001", max_value=10**8, places=3),
    fifo=st.booleans(),
    group=st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True),
)
def test_whatever_is_kicked_the_task_reads_it_back(
    args: list[Any], kwargs: dict[str, Any], delay: Any, fifo: bool, group: str
) -> None:
    broker, fake = started_broker()

    async def task(*_: Any, **__: Any) -> None:
        pass

    decorated = broker.register_task(task, task_name="app.task")
    labels: dict[str, Any] = {"delay": str(delay)}
    if fifo:
        labels |= {"queue": FIFO, "group_id": group}
    kicked = asyncio.run(decorated.kicker().with_labels(**labels).kiq(*args, **kwargs))
    [(queue, body, options)] = fake.sent
    assert queue == (FIFO if fifo else "orders")
    assert options["id"] == kicked.task_id
    assert options["group_id"] == (group if fifo else None)
    assert options["delay"] == timedelta(milliseconds=int(delay * 1000))  # exact, to the ms
    received = broker.formatter.loads(body.encode())
    assert (received.args, received.kwargs) == (args, kwargs)
    assert received.labels["delay"] == str(delay)  # the task sees the labels it was kicked with


class FakeS3:
    """Stands in for the broker's aiobotocore S3 client: keeps what is put."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}

    async def put_object(self, *, Body: bytes, Bucket: str, Key: str) -> None:
        self.objects[(Bucket, Key)] = Body

    async def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        return {"Body": _Stream(self.objects[(Bucket, Key)])}


class _Stream:
    def __init__(self, data: bytes) -> None:
        self.data = data

    async def __aenter__(self) -> _Stream:
        return self

    async def __aexit__(self, *_: object) -> None:
        pass

    async def read(self) -> bytes:
        return self.data


class FakeSQS:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send_message(self, **kwargs: Any) -> None:
        self.sent.append(kwargs)


def large_broker(bucket: str | None) -> tuple[SQSBroker, FakeSender, FakeS3, FakeSQS]:
    broker, fake = started_broker()
    broker.s3_extended_bucket_name = bucket
    s3, sqs = FakeS3(), FakeSQS()
    broker._s3_client = s3  # type: ignore[assignment]
    broker._sqs_client = sqs  # type: ignore[assignment]
    return broker, fake, s3, sqs


def test_a_large_task_on_the_sqsdelay_route_goes_to_s3_as_taskiq_aio_sqs_sends_it() -> None:
    """The same S3 object and the same pointer as taskiq-aio-sqs's own route (kicked with no
    delay), and taskiq-aio-sqs's receive side reads the task back from it."""
    broker, fake, s3, sqs = large_broker("big")

    async def task(blob: str) -> None:
        pass

    decorated = broker.register_task(task, task_name="app.task")
    blob = "x" * 1_100_000
    kicked = asyncio.run(decorated.kicker().with_task_id("t-native").kiq(blob))
    [theirs] = sqs.sent  # taskiq-aio-sqs's own send, no delay
    long = decorated.kicker().with_task_id("t-long").with_labels(delay="3600")
    asyncio.run(long.kiq(blob))
    [(queue, body, options)] = fake.sent
    assert (queue, options["id"]) == ("orders", "t-long")
    assert options["delay"] == timedelta(hours=1)
    key = json.loads(body)["s3_key"]
    assert re.fullmatch(r"t-long\.[0-9a-f]{32}\.json", key)  # a key per kick
    assert s3.objects.keys() == {("big", "t-native.json"), ("big", key)}
    assert json.loads(body) == {"s3_bucket": "big", "s3_key": key}
    assert body == theirs["MessageBody"].replace("t-native.json", key)
    assert options["attributes"] == theirs["MessageAttributes"]
    # What a taskiq worker makes of the message the sqsdelay worker hands over.
    received = {
        "Body": body,
        "ReceiptHandle": "r",
        "MessageId": "m",
        "MessageAttributes": {
            **options["attributes"],
            "NServiceBus.MessageId": {"DataType": "String", "StringValue": "t-long"},
        },
    }
    ackable = asyncio.run(broker._to_ackable_message(received, broker._default_queue, "u"))
    assert ackable is not None
    task_message = broker.formatter.loads(ackable.data)
    assert (task_message.task_id, task_message.args) == ("t-long", [blob])
    assert kicked.task_id == "t-native"


def test_a_body_that_sqsdelays_attributes_push_over_the_limit_is_offloaded_too() -> None:
    broker, fake, s3, _ = large_broker("big")

    async def task(blob: str) -> None:
        pass

    decorated = broker.register_task(task, task_name="app.task")
    kicker = decorated.kicker().with_task_id("t").with_labels(delay="60")
    asyncio.run(kicker.kiq("x"))
    overhead = len(fake.sent.pop()[1]) - 1  # the task's envelope around its argument
    # 10 characters under taskiq-aio-sqs's 1 MiB, so it would not offload it; over the limit
    # once sqsdelay's attributes (the delay, the id) are added.
    blob = "x" * (1_048_576 - overhead - 10)
    asyncio.run(kicker.kiq(blob))
    [(_, body, _)] = fake.sent
    key = json.loads(body)["s3_key"]
    assert key.startswith("t.") and ("big", key) in s3.objects


class RegistrySender(FakeSender):
    """As the sender with SQSDELAY_REGISTRY=dynamodb: a second send of an id still
    scheduled is a duplicate, and sends nothing."""

    async def send(self, queue: str, body: str, **options: Any) -> None:
        if all(o["id"] != options["id"] for _, _, o in self.sent):
            await super().send(queue, body, **options)


def test_a_second_kick_of_a_scheduled_task_id_leaves_the_first_ones_body() -> None:
    """The registry sends nothing for the second kick of a scheduled id, so the object the
    first kick's pointer names must still hold the first kick's task (one key per kick)."""
    broker, _, s3, _ = large_broker("big")
    fake = RegistrySender()
    broker._sqsdelay_sender = fake  # type: ignore[assignment]

    async def task(blob: str) -> None:
        pass

    decorated = broker.register_task(task, task_name="app.task")
    kicker = decorated.kicker().with_task_id("t").with_labels(delay="3600")
    first, second = "a" * 1_100_000, "b" * 1_100_000
    asyncio.run(kicker.kiq(first))
    asyncio.run(kicker.kiq(second))
    [(_, body, options)] = fake.sent  # the second was a duplicate
    assert len(s3.objects) == 2  # each kick its own object
    received = {
        "Body": body,
        "ReceiptHandle": "r",
        "MessageId": "m",
        "MessageAttributes": options["attributes"],
    }
    ackable = asyncio.run(broker._to_ackable_message(received, broker._default_queue, "u"))
    assert ackable is not None
    assert broker.formatter.loads(ackable.data).args == [first]  # not the second's


def test_without_the_bucket_option_a_large_task_is_a_typed_error_and_nothing_is_sent() -> None:
    broker, fake, s3, _ = large_broker(None)

    async def task(blob: str) -> None:
        pass

    decorated = broker.register_task(task, task_name="app.task")
    with pytest.raises(SendTaskError) as raised:
        asyncio.run(decorated.kicker().with_labels(delay="60").kiq("x" * 1_100_000))
    cause = raised.value.__cause__
    assert isinstance(cause, errors.MessageTooLarge)
    assert isinstance(cause, ExtendedBucketNameMissingError)  # taskiq-aio-sqs's own, too
    assert "s3_extended_bucket_name=" in str(cause)
    assert "taskiq-aio-sqs sends a body of 1 MiB or more through S3" in str(cause)
    assert fake.sent == [] and s3.objects == {}
    # Just under 1 MiB, pushed over by sqsdelay's attributes: said so, with the same remedy.
    kicker = decorated.kicker().with_task_id("t").with_labels(delay="60")
    asyncio.run(kicker.kiq("x"))
    overhead = len(fake.sent.pop()[1]) - 1  # the task's envelope around its argument
    with pytest.raises(SendTaskError) as raised:
        asyncio.run(kicker.kiq("x" * (1_048_576 - overhead - 10)))
    assert "once sqsdelay's attributes" in str(raised.value.__cause__)
    assert "s3_extended_bucket_name=" in str(raised.value.__cause__)
    # A bad delay on a large task is refused before the object is written, too.
    broker.s3_extended_bucket_name = "big"
    with pytest.raises(SendTaskError):
        asyncio.run(decorated.kicker().with_labels(delay=str(10**10)).kiq("x" * 1_100_000))
    assert fake.sent == [] and s3.objects == {}
