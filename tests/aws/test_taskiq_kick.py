"""sqsdelay.taskiq's kick without I/O: whatever a producer kicks, the sqsdelay route sends the
body, group and id taskiq-aio-sqs would have sent, and the task reads back what was kicked; a
large one goes to S3 as taskiq-aio-sqs sends it."""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from taskiq.exceptions import SendTaskError
from taskiq_aio_sqs import SQSQueue
from taskiq_aio_sqs.exceptions import ExtendedBucketNameMissingError

from sqsdelay import errors
from sqsdelay import taskiq as taskiq_module
from sqsdelay.settings import Settings
from sqsdelay.taskiq import DelayedSource, ScheduleNotCancelled, SQSBroker
from tests.support.logs import capture_logs, events

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
        "orders", endpoint_url="http://127.0.0.1:9", settings=Settings(max_native_delay_seconds=2)
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


class SchedulingSender(FakeSender):
    """As the sender with the registry: what went through a delay queue (beyond the broker's
    2 s native delay) is scheduled until cancelled; `cancel` answers as the registry does,
    or `answer` when set."""

    def __init__(self, answer: str | None = None) -> None:
        super().__init__()
        self.answer = answer
        self.cancels: list[tuple[str, str]] = []

    async def cancel(self, queue: str, message_id: str) -> str:
        self.cancels.append((queue, message_id))
        if self.answer is not None:
            return self.answer
        scheduled = {(q, o["id"]) for q, _, o in self.sent if o["delay"] > timedelta(seconds=2)}
        return "cancelled" if (queue, message_id) in scheduled else "unknown"


def scheduling_broker(answer: str | None = None) -> tuple[SQSBroker, SchedulingSender, FakeSQS]:
    broker, _, _, sqs = large_broker(None)
    fake = SchedulingSender(answer)
    broker._sqsdelay_sender = fake  # type: ignore[assignment]
    return broker, fake, sqs


async def _noop(*_: Any) -> None:
    pass


def test_unschedule_cancels_the_task_id_the_schedule_was_kicked_with() -> None:
    """Issue 58 (3): with `with_task_id` the task is sent under that id, and the cancel asked
    for the schedule id (`unknown`, thrown away: the task ran)."""
    broker, fake, _ = scheduling_broker()
    task = broker.register_task(_noop, task_name="app.task")
    source = DelayedSource(broker)
    when = datetime.now(UTC) + timedelta(hours=1)

    async def scenario() -> None:
        kicker = task.kicker().with_task_id("order-7").with_schedule_id("s-7")
        created = await kicker.schedule_by_time(source, when)
        await created.unschedule()
        by_default = await task.kicker().with_schedule_id("s-8").schedule_by_time(source, when)
        await by_default.unschedule()  # no task id: the schedule id is the task id

    asyncio.run(scenario())
    assert [o["id"] for _, _, o in fake.sent] == ["order-7", "s-8"]
    assert fake.cancels == [("orders", "order-7"), ("orders", "s-8")]


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("too-late", "unschedule it before its time"),
        ("unknown", "broker.cancel(task_id"),
    ],
)
def test_an_unschedule_that_cancels_nothing_raises_saying_why(answer: str, says: str) -> None:
    broker, fake, _ = scheduling_broker(answer)
    task = broker.register_task(_noop, task_name="app.task")
    source = DelayedSource(broker)
    when = datetime.now(UTC) + timedelta(hours=1)

    async def scenario() -> None:
        created = await task.kicker().with_task_id("t-1").schedule_by_time(source, when)
        await created.unschedule()

    with pytest.raises(ScheduleNotCancelled) as raised:
        asyncio.run(scenario())
    error = raised.value
    assert isinstance(error, errors.SqsDelayError)
    assert (error.outcome, error.task_id, error.queue) == (answer, "t-1", "orders")
    assert says in str(error)
    assert fake.cancels == [("orders", "t-1")]


@pytest.mark.parametrize("fifo", [False, True])
def test_a_schedule_within_the_native_delay_cannot_be_cancelled_and_says_so(fifo: bool) -> None:
    """Sent with SQS's own DelaySeconds (a FIFO queue: its staging queue's), so no registry
    record: unschedule raises, where it cancelled nothing silently and the task ran."""
    broker, fake, sqs = scheduling_broker()
    task = broker.register_task(_noop, task_name="app.task")
    source = DelayedSource(broker)
    when = datetime.now(UTC) + timedelta(seconds=1.5)  # within the broker's 2 s
    labels = {"queue": FIFO, "group_id": "g"} if fifo else {}

    async def scenario() -> None:
        kicker = task.kicker().with_labels(**labels).with_task_id("soon")
        created = await kicker.schedule_by_time(source, when)
        await created.unschedule()

    with pytest.raises(ScheduleNotCancelled, match="SQSDELAY_MAX_NATIVE_DELAY_SECONDS") as raised:
        asyncio.run(scenario())
    assert (raised.value.outcome, raised.value.task_id) == ("native", "soon")
    assert raised.value.queue == (FIFO if fifo else "orders")
    assert "more than 2 s ahead" in str(raised.value)
    assert len(fake.sent if fifo else sqs.sent) == 1  # it was sent, and runs
    assert fake.cancels == []


def test_the_source_forgets_a_schedule_an_hour_after_its_time() -> None:
    """A worker whose retries go through a DelayedSource keeps no record of old ones."""
    broker, _, _ = scheduling_broker()
    task = broker.register_task(_noop, task_name="app.task")
    source = DelayedSource(broker)
    start = time.time()
    clock = [start]

    async def schedule(name: str) -> None:
        when = datetime.fromtimestamp(clock[0] + 60, UTC)
        await task.kicker().with_schedule_id(name).schedule_by_time(source, when)

    with mock.patch.object(taskiq_module.time, "time", lambda: clock[0]):
        for n in range(3):
            asyncio.run(schedule(f"old-{n}"))
        clock[0] = start + 60 + 3600 + 1  # an hour after their time
        asyncio.run(schedule("new"))
    assert set(source._kicked) == {"new"}


def dedup_broker(registry: str, attributes: int = 0) -> tuple[SQSBroker, FakeSender]:
    """A started broker with `use_task_id_for_deduplication` whose kicks carry `attributes`
    MessageAttributes of a subclass's."""

    class Attributed(SQSBroker):
        async def build_kick_kwargs(self, *args: Any, **kwargs: Any) -> Any:
            built = dict(await super().build_kick_kwargs(*args, **kwargs))
            string = {"DataType": "String", "StringValue": "v"}
            return built | {"MessageAttributes": {f"a{i}": string for i in range(attributes)}}

    broker = Attributed(
        "orders",
        endpoint_url="http://127.0.0.1:9",
        use_task_id_for_deduplication=True,
        settings=Settings(max_native_delay_seconds=2, registry=registry),
    ).with_queues(SQSQueue(name=FIFO, is_fifo=True))
    assert isinstance(broker, SQSBroker)
    broker._queue_urls = {"orders": "http://q/orders", FIFO: f"http://q/{FIFO}"}
    broker._sqs_queue_url = "http://q/orders"
    fake = FakeSender()
    broker._sqsdelay_sender = fake  # type: ignore[assignment]
    return broker, fake


def test_a_fifo_kick_carries_its_deduplication_id_and_a_retry_one_of_its_own() -> None:
    """Issue 58 (10): taskiq-aio-sqs's `use_task_id_for_deduplication` gives a FIFO kick
    `MessageDeduplicationId` = the task id; the sqsdelay route sends it on, whatever the
    delay, so a repeated kick is dropped at the destination. A retry keeps its task id, and
    goes under a key of its own per retry (else dropped within five minutes of its run)."""
    out = capture_logs("WARNING")
    broker, fake = dedup_broker("off")
    task = broker.register_task(_noop, task_name="app.task")
    kicker = task.kicker().with_task_id("t").with_labels(queue=FIFO, group_id="g")
    for delay in ("60", "1.5"):
        asyncio.run(kicker.with_labels(delay=delay).kiq())
    for retry in ("1", "2", "2"):
        asyncio.run(kicker.with_labels(delay="60", _retries=retry).kiq())
    asyncio.run(task.kicker().with_task_id("s").with_labels(delay="60").kiq())  # standard
    keys = [o["deduplication_id"] for _, _, o in fake.sent]
    assert keys[:2] == ["t", "t"] and keys[5] is None
    assert keys[2] != keys[3] == keys[4] and len({*keys[2:5], "t"}) == 3
    assert all(re.fullmatch("[0-9a-f]{64}", k) for k in keys[2:5])
    assert not events(out, "taskiq.deduplication_not_kept")


def test_a_fifo_kick_without_room_for_its_deduplication_id_goes_without_and_says_so() -> None:
    """A subclass's attributes may leave no room for the attribute that carries the id: the
    task is sent without it (delivered once per kick) rather than refused, warned once per
    broker; with the registry a re-kick beyond the native delay is a duplicate anyway."""
    out = capture_logs("WARNING")
    for registry, attributes, delay, kept in (
        ("off", 7, "60", False),  # the delay queue's four: no room
        ("dynamodb", 7, "60", False),  # ... but the registry drops a re-kick: not warned
        ("off", 7, "1.5", True),  # the staging queue's three: room
        ("off", 8, "1.5", False),
    ):
        broker, fake = dedup_broker(registry, attributes)
        task = broker.register_task(_noop, task_name="app.task")
        kicker = task.kicker().with_task_id("t").with_labels(queue=FIFO, group_id="g")
        for _ in range(2):
            asyncio.run(kicker.with_labels(delay=delay).kiq())
        assert [o["deduplication_id"] for _, _, o in fake.sent] == ["t" if kept else None] * 2
    warned = events(out, "taskiq.deduplication_not_kept")
    assert [(w["delay_ms"], w["attributes"]) for w in warned] == [(60_000, 7), (1500, 8)]
    assert "fewer MessageAttributes" in warned[0]["detail"]


# -- which Region: one rule with or without settings= -------------------------------------


@pytest.mark.parametrize("form", ["no settings", "Settings()"])
def test_the_brokers_region_wins_over_the_environment_in_both_forms(
    monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    monkeypatch.setenv("SQSDELAY_REGION", "eu-west-1")
    monkeypatch.setenv("SQSDELAY_ENDPOINT_URL", "http://env:1")
    given = {} if form == "no settings" else {"settings": Settings()}
    broker = SQSBroker("orders", region_name="us-east-1", endpoint_url="http://b:2", **given)
    got = broker.sqsdelay_settings
    assert (got.region, got.endpoint_url) == ("us-east-1", "http://b:2")


@pytest.mark.parametrize("form", ["no settings", "Settings()"])
def test_the_brokers_default_region_too_so_that_both_routes_send_to_one_region(
    monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    monkeypatch.setenv("SQSDELAY_REGION", "eu-west-1")
    given = {} if form == "no settings" else {"settings": Settings()}
    broker = SQSBroker("orders", **given)  # taskiq-aio-sqs's own default: us-east-1
    assert broker.sqsdelay_settings.region == broker._aws_region == "us-east-1"


def test_a_region_given_in_settings_wins_over_the_brokers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSDELAY_REGION", "eu-west-1")
    broker = SQSBroker("orders", region_name="us-east-1", settings=Settings(region="ap-south-1"))
    assert broker.sqsdelay_settings.region == "ap-south-1"
    assert broker.sqsdelay_settings.endpoint_url is None  # the broker gave none
