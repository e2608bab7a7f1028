"""The consumer's side against the embedded emulator over HTTP: `retry_later` from each kind
of received message (sync and async), a failed send that leaves the original, Lambda's
partial-batch response, and the idempotency guard, alone and beside Powertools."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    idempotent_function,
)

from sqsdelay import consumer
from sqsdelay.aws.sender import AsyncSender, Sender
from sqsdelay.aws.worker import WorkerThread
from sqsdelay.core import wire_format
from sqsdelay.errors import (
    ConfigError,
    InvalidDelay,
    MessageTooLarge,
    SqsOperationError,
    TooManyAttributes,
)
from sqsdelay.settings import Settings
from tests.support.consumerkit import (
    counts,
    guard_table,
    install,
    lambda_record,
    receive_one,
    received_with_id,
)
from tests.support.faultproxy import FaultProxy
from tests.support.workerkit import Collector

TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
ATTRS = {
    "tenant": {"DataType": "String", "StringValue": "a"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe"},
    "n": {"DataType": "Number.int", "StringValue": "42"},
}


@pytest.fixture
def short(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(
        max_native_delay_seconds=2, visibility_timeout_seconds=5, wait_time_seconds=1
    )


def _kind(kind: str, message: dict[str, Any], settings: Settings) -> tuple[object, str | None]:
    name = settings.queue_prefix + "orders"
    if kind == "boto3":
        return message, "url"
    record = lambda_record(message, name)
    return (SQSRecord(record) if kind == "powertools" else record), None


@pytest.mark.parametrize("kind", ["boto3", "lambda", "powertools"])
def test_retry_later_resends_byte_for_byte_then_deletes_the_original(
    kind: str, short: Settings, sqs: Any
) -> None:
    urls = install(short, sqs, "orders")
    sender = Sender(short, client=sqs)
    first = sender.send(
        "orders",
        "payload \u00e9",
        delay=0,
        attributes=ATTRS,
        group_id="tenant-a",
        trace_header=TRACE,
    )
    original = receive_one(sqs, urls["orders"])
    message, url = _kind(kind, original, short)
    before = time.time()
    when: dict[str, Any] = {  # the three ways to say when, one per kind
        "boto3": {"delay": 1.5},
        "lambda": {"delay": timedelta(seconds=1.5)},
        "powertools": {"at": datetime.now(UTC) + timedelta(seconds=1.5)},
    }[kind]
    done = consumer.retry_later(
        message, queue_url=urls["orders"] if url else None, sender=sender, **when
    )
    assert done.attempt == 1 and done.sent is not None and done.sent.route == "direct"
    assert counts(sqs, urls["orders"]) == (0, 0, 1)  # the original deleted, the retry delayed
    [again] = Collector(sqs, urls["orders"]).until(1, timeout=10)
    assert again.at - before >= 1.5 and again.body == "payload \u00e9"
    assert {k: again.attributes[k] for k in ATTRS} == ATTRS
    assert again.attributes[wire_format.ATTEMPT_ATTRIBUTE]["StringValue"] == "1"
    # sqsdelay's id rides on: the retried message's key is the original's.
    sent_id = original["MessageAttributes"].get(wire_format.MESSAGE_ID_ATTRIBUTE)
    assert again.attributes[wire_format.MESSAGE_ID_ATTRIBUTE]["StringValue"] == (
        sent_id["StringValue"] if sent_id else done.message_id
    )
    assert again.system["MessageGroupId"] == "tenant-a"
    assert again.system["AWSTraceHeader"] == TRACE
    assert first.sqs_message_id != again.message_id


def test_the_async_retry_counts_on_from_the_attempt_it_received(short: Settings, sqs: Any) -> None:
    urls = install(short, sqs, "orders")
    Sender(short, client=sqs).send("orders", "x", delay=0, attributes=ATTRS)
    first = receive_one(sqs, urls["orders"])

    async def twice() -> list[consumer.Retried]:
        async with AsyncSender(short) as s:
            one = await consumer.async_retry_later(first, 0, queue_url=urls["orders"], sender=s)
            second = receive_one(sqs, urls["orders"])
            two = await consumer.async_retry_later(
                lambda_record(second, short.queue_prefix + "orders"), 0, sender=s
            )
            return [one, two]

    one, two = asyncio.run(twice())
    assert (one.attempt, two.attempt) == (1, 2)
    third = receive_one(sqs, urls["orders"])
    assert third["MessageAttributes"][wire_format.ATTEMPT_ATTRIBUTE]["StringValue"] == "2"

    async def backoff() -> consumer.Retried:
        backoff = consumer.Backoff(1, 2, max_attempts=5)
        policy = consumer.AsyncRetryPolicy(backoff, draw=lambda: 0.0)
        async with AsyncSender(short) as s:
            return await policy.retry(third, "later", queue_url=urls["orders"], sender=s)

    fourth = asyncio.run(backoff())
    assert fourth.attempt == 3 and fourth.sent is not None and fourth.sent.delay_seconds == 0


def test_the_deprecated_async_names_warn_and_still_retry(short: Settings, sqs: Any) -> None:
    """`aretry_later` and `RetryPolicy.aretry` (issue 60 §4), kept one release: each says
    what replaces it, and does what it did."""
    urls = install(short, sqs, "orders")
    Sender(short, client=sqs).send("orders", "x", delay=0)
    first = receive_one(sqs, urls["orders"])

    async def old_names() -> list[consumer.Retried]:
        policy = consumer.RetryPolicy(consumer.Backoff(1, 2, max_attempts=5), draw=lambda: 0.0)
        async with AsyncSender(short) as s:
            with pytest.warns(DeprecationWarning, match="use sqsdelay.consumer.async_retry_later"):
                one = await consumer.aretry_later(first, 0, queue_url=urls["orders"], sender=s)
            second = receive_one(sqs, urls["orders"])
            with pytest.warns(DeprecationWarning, match=r"use AsyncRetryPolicy\(\.\.\.\)\.retry"):
                two = await policy.aretry(second, "later", queue_url=urls["orders"], sender=s)
            return [one, two]

    one, two = asyncio.run(old_names())
    assert (one.attempt, two.attempt) == (1, 2)
    assert two.sent is not None and two.sent.delay_seconds == 0
    third = receive_one(sqs, urls["orders"])
    assert third["MessageAttributes"][wire_format.ATTEMPT_ATTRIBUTE]["StringValue"] == "2"


def test_a_send_that_fails_leaves_the_original_in_place(short: Settings, sqs: Any) -> None:
    urls = install(short, sqs, "orders")
    Sender(short, client=sqs).send("orders", "keep me", delay=0)
    original = receive_one(sqs, urls["orders"])
    proxy = FaultProxy(short.endpoint_url or "")
    try:
        proxy.cut("SendMessage", times=100)
        broken = Sender(
            short.model_copy(update={"endpoint_url": proxy.url, "call_timeout_seconds": 2})
        )
        with pytest.raises(SqsOperationError):
            consumer.retry_later(original, 60, queue_url=urls["orders"], sender=broken)
        assert proxy.seen["DeleteMessage"] == 0
    finally:
        proxy.close()
    assert counts(sqs, urls["orders"]) == (0, 1, 0)  # still in flight, not deleted
    sqs.change_message_visibility(
        QueueUrl=urls["orders"], ReceiptHandle=original["ReceiptHandle"], VisibilityTimeout=0
    )
    assert receive_one(sqs, urls["orders"])["Body"] == "keep me"


@pytest.mark.parametrize(
    ("shape", "error", "says"),
    [
        ("body at the limit - 60", MessageTooLarge, r"the retry is 2621\d\d bytes"),
        ("9 attributes", TooManyAttributes, "the retry needs 11 attributes"),
        ("10 attributes", TooManyAttributes, "the retry needs 12 attributes"),
    ],
)
def test_a_retry_without_room_for_its_id_is_refused_and_the_original_stays(
    make_settings: Callable[..., Settings],
    sqs: Any,
    shape: str,
    error: type[Exception],
    says: str,
) -> None:
    """A retry is the guard's key of every later copy only with its id: without room for it
    (a short retry goes straight to the destination, where an ordinary send would go without
    the id) it is refused before anything is sent, saying what to do."""
    settings = make_settings(max_native_delay_seconds=2, max_message_bytes=262_144)
    url = install(settings, sqs, "orders")["orders"]
    body, attributes = "x", {}
    if shape.startswith("body"):
        body = "x" * (262_144 - 60)
    else:
        count = int(shape.split()[0])
        attributes = {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(count)}
    sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)  # foreign
    original = receive_one(sqs, url)
    with pytest.raises(error, match=says) as raised:
        consumer.retry_later(original, 1, queue_url=url, sender=Sender(settings, client=sqs))
    assert "Nothing was sent and the original stays" in str(raised.value)
    assert "retry_later" in str(raised.value)
    assert counts(sqs, url) == (0, 1, 0)  # no retry; the original in flight, not deleted


def test_a_delete_that_fails_after_the_send_says_the_original_comes_back(
    short: Settings, sqs: Any
) -> None:
    urls = install(short, sqs, "orders")
    Sender(short, client=sqs).send("orders", "twice?", delay=0)
    original = receive_one(sqs, urls["orders"])
    proxy = FaultProxy(short.endpoint_url or "")
    try:
        proxy.cut("DeleteMessage", times=100)
        broken = Sender(
            short.model_copy(update={"endpoint_url": proxy.url, "call_timeout_seconds": 2})
        )
        with pytest.raises(consumer.OriginalNotDeleted, match="guard the handler"):
            consumer.retry_later(original, 0, queue_url=urls["orders"], sender=broken)
    finally:
        proxy.close()
    assert counts(sqs, urls["orders"]) == (1, 1, 0)  # the retry, and the original in flight


def test_a_delay_beyond_any_date_is_refused_before_anything_is_sent_or_deleted(
    short: Settings, sqs: Any
) -> None:
    urls = install(short, sqs, "orders")
    Sender(short, client=sqs).send("orders", "keep me", delay=0)
    original = receive_one(sqs, urls["orders"])
    for when in ({"delay": 10**12}, {"at": datetime(9999, 12, 31, tzinfo=UTC)}):
        with pytest.raises(InvalidDelay, match="SQSDELAY_MAX_DELAY_SECONDS"):
            consumer.retry_later(original, queue_url=urls["orders"], sender=Sender(short), **when)
    assert counts(sqs, urls["orders"]) == (0, 1, 0)


def test_the_partial_batch_response_counts_a_retried_record_as_a_success(
    short: Settings, sqs: Any
) -> None:
    urls = install(short, sqs, "orders")
    sender = Sender(short, client=sqs)
    for body in ("ok", "later", "broken"):
        sender.send("orders", body, delay=0)
    got = sqs.receive_message(
        QueueUrl=urls["orders"],
        MaxNumberOfMessages=10,
        WaitTimeSeconds=1,
        VisibilityTimeout=30,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["All"],
    )["Messages"]
    while len(got) < 3:
        got.append(receive_one(sqs, urls["orders"]))
    records = [lambda_record(m, short.queue_prefix + "orders") for m in got]
    ran: list[str] = []

    def handler(record: Any) -> None:
        ran.append(record["body"])
        if record["body"] == "later":
            raise consumer.RetryLater(1)
        if record["body"] == "broken":
            raise RuntimeError("boom")

    answer = consumer.handle_batch({"Records": records}, handler, sender=sender)
    broken = next(r["messageId"] for r in records if r["body"] == "broken")
    assert answer == {"batchItemFailures": [{"itemIdentifier": broken}]}
    assert sorted(ran) == ["broken", "later", "ok"]
    [retried] = Collector(sqs, urls["orders"]).until(1, timeout=10)
    assert retried.body == "later"


def test_a_fifo_batch_fails_the_records_after_a_failure_unrun(short: Settings) -> None:
    records = [
        {"messageId": str(i), "body": str(i), "eventSourceARN": "arn:aws:sqs:us-east-1:1:q.fifo"}
        for i in range(4)
    ]
    ran: list[str] = []

    def handler(record: Any) -> None:
        ran.append(record["body"])
        if record["body"] == "1":
            raise RuntimeError("boom")

    answer = consumer.handle_batch({"Records": records}, handler)
    assert ran == ["0", "1"]
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == ["1", "2", "3"]


def _handed_over_twice(short: Settings, sqs: Any) -> tuple[str, list[dict[str, Any]]]:
    """A message through the delay queue and the worker, then its hand-over sent again as
    it is (what a lost answer makes): the destination's two copies, received."""
    urls = install(short, sqs, "orders")
    sent = Sender(short, client=sqs).send("orders", "once", delay=3, attributes=ATTRS)
    assert sent.route == "delay-queue"
    with WorkerThread(short, ["orders"]):
        first = receive_one(sqs, urls["orders"], wait=20)
    copy = {"MessageBody": first["Body"], "MessageAttributes": first["MessageAttributes"]}
    sqs.send_message(QueueUrl=urls["orders"], **copy)
    second = receive_one(sqs, urls["orders"])
    return urls["orders"], [first, second]


def test_duplicates_of_a_hand_over_run_a_guarded_handler_once(
    short: Settings, sqs: Any, dynamodb: Any
) -> None:
    table = guard_table(dynamodb, f"idem-{uuid.uuid4().hex[:8]}")
    url, copies = _handed_over_twice(short, sqs)
    assert copies[0]["MessageId"] != copies[1]["MessageId"]
    runs: list[str] = []
    guard = consumer.Guard(table, name="orders.handle", client=dynamodb)

    @guard.once
    def handle(message: dict[str, Any]) -> dict[str, int]:
        runs.append(message["MessageId"])
        return {"charged": len(runs)}

    outcomes = [handle(m) for m in copies]  # a boto3 message: no queue URL needed
    assert runs == [copies[0]["MessageId"]]
    assert [o.ran for o in outcomes] == [True, False]
    assert outcomes[1].result == {"charged": 1}
    # A retry later is a new attempt: it runs again.
    retried = consumer.retry_later(copies[1], 0, queue_url=url, sender=Sender(short, client=sqs))
    assert retried.attempt == 1
    again = receive_one(sqs, url)
    assert handle(again).ran and len(runs) == 2


def test_powertools_reads_the_guards_record_and_the_guard_reads_powertools(
    short: Settings, sqs: Any, dynamodb: Any
) -> None:
    table = guard_table(dynamodb, f"idem-{uuid.uuid4().hex[:8]}")
    url, copies = _handed_over_twice(short, sqs)
    name = short.queue_prefix + "orders"
    runs: list[str] = []
    store = DynamoDBPersistenceLayer(table_name=table, boto3_client=dynamodb)

    @idempotent_function(
        data_keyword_argument="record",
        config=consumer.powertools_config(),
        persistence_store=store,
        key_prefix="orders.handle",
    )
    def powertools_handle(record: dict[str, Any]) -> dict[str, str]:
        runs.append("powertools")
        return {"by": "powertools"}

    guard = consumer.Guard(table, name="orders.handle", client=dynamodb)

    def ours(message: Any) -> dict[str, str]:
        runs.append("guard")
        return {"by": "guard"}

    # The guard runs the first copy; Powertools, given the second, finds its record.
    assert guard.run(copies[0], ours, queue_url=url).ran
    assert powertools_handle(record=lambda_record(copies[1], name)) == {"by": "guard"}
    assert runs == ["guard"]
    items = dynamodb.scan(TableName=table)["Items"]
    assert len(items) == 1 and items[0]["status"] == {"S": "COMPLETED"}
    # The other way round: a retried message (attempt 1), run by Powertools first.
    consumer.retry_later(copies[1], 0, queue_url=url, sender=Sender(short, client=sqs))
    retried = receive_one(sqs, url)
    assert powertools_handle(record=lambda_record(retried, name)) == {"by": "powertools"}
    outcome = guard.run(retried, ours, queue_url=url)
    assert not outcome.ran and outcome.result == {"by": "powertools"}
    assert runs == ["guard", "powertools"]


def test_a_run_in_progress_holds_copies_until_its_in_progress_expiry(
    short: Settings, sqs: Any, dynamodb: Any
) -> None:
    """A crash in progress leaves INPROGRESS behind: a copy is refused until the in-progress
    expiry, then runs."""
    table = guard_table(dynamodb, f"idem-{uuid.uuid4().hex[:8]}")
    url, copies = _handed_over_twice(short, sqs)
    now = [time.time()]
    guard = consumer.Guard(
        table, name="h", client=dynamodb, in_progress_seconds=30, clock=lambda: now[0]
    )

    class Crash(BaseException):
        pass

    def crash_without_cleanup(message: Any) -> None:
        with pytest.raises(consumer.GuardInProgress, match="leave it undeleted"):
            guard.run(copies[1], lambda m: "copy ran", queue_url=url)
        now[0] += 31  # the crashed run's in-progress expiry passes
        assert guard.run(copies[1], lambda m: "copy ran", queue_url=url).ran

    guard.run(copies[0], crash_without_cleanup, queue_url=url)


def test_a_guard_without_a_table_or_with_a_missing_one_says_what_to_do(
    settings: Settings, sqs: Any, dynamodb: Any
) -> None:
    with pytest.raises(ConfigError, match="partition key 'id'"):
        consumer.Guard(None, client=dynamodb)
    with pytest.raises(ConfigError, match="partition key 'id'"):
        consumer.Guard("", client=dynamodb)
    message = received_with_id("o-1")
    guard = consumer.Guard("no-such-table", name="h", client=dynamodb)
    with pytest.raises(consumer.GuardTableMissing, match="does not exist: create it"):
        guard.run(message, lambda m: None, queue_url="http://127.0.0.1/1/orders")


def test_a_foreign_message_needs_a_key_named_by_the_caller(
    settings: Settings, sqs: Any, dynamodb: Any
) -> None:
    table = guard_table(dynamodb, f"idem-{uuid.uuid4().hex[:8]}")
    urls = install(settings, sqs, "orders")
    for _ in range(2):
        sqs.send_message(QueueUrl=urls["orders"], MessageBody='{"order_id": "o-9"}')
    copies = [receive_one(sqs, urls["orders"]) for _ in range(2)]
    bare = consumer.Guard(table, name="h", client=dynamodb)
    with pytest.raises(Exception, match=r"without room for its id.*Give the guard a key"):
        bare.run(copies[0], lambda m: None, queue_url=urls["orders"])
    keyed = consumer.Guard(table, name="h", client=dynamodb, key=lambda m: m.received.body)
    ran = [keyed.run(c, lambda m: 1, queue_url=urls["orders"]).ran for c in copies]
    assert ran == [True, False]


def test_a_retry_on_a_fifo_queue_rejoins_its_group_after_its_delay(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    """A FIFO destination takes no per-message delay: the retry goes through its staging
    queue (or its delay queue) and the worker forwards it into the group it came from."""
    fifo = make_settings(
        max_native_delay_seconds=2, visibility_timeout_seconds=5, wait_time_seconds=1
    )
    urls = install(fifo, sqs, "orders.fifo")
    sender = Sender(fifo, client=sqs)
    sender.send("orders.fifo", "in order", delay=0, group_id="customer-9", attributes=ATTRS)
    original = receive_one(sqs, urls["orders.fifo"])
    with WorkerThread(fifo, ["orders.fifo"]):
        due = time.time() + 3.5
        done = consumer.retry_later(original, 3.5, queue_url=urls["orders.fifo"], sender=sender)
        assert done.sent is not None and done.sent.route == "delay-queue"
        [got] = Collector(sqs, urls["orders.fifo"]).until(1, timeout=20)
    assert got.at >= due and got.body == "in order"
    assert got.system["MessageGroupId"] == "customer-9"
    assert {k: got.attributes[k] for k in ATTRS} == ATTRS
    assert got.attributes[wire_format.ATTEMPT_ATTRIBUTE]["StringValue"] == "1"


def test_as_the_readme_writes_it_settings_from_the_environment(
    settings: Settings, sqs: Any, dynamodb: Any, moto_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`retry_later(message, timedelta(days=2), queue_url=url)` and `Guard("idempotency",
    name=...)` with no sender or client: both from the SQSDELAY_* variables."""
    for name, value in {
        "SQSDELAY_ENDPOINT_URL": moto_url,
        "SQSDELAY_REGION": "us-east-1",
        "SQSDELAY_QUEUE_PREFIX": settings.queue_prefix,
    }.items():
        monkeypatch.setenv(name, value)
    urls = install(settings, sqs, "orders")
    Sender(settings, client=sqs).send("orders", "tomorrow", delay=0)
    message = receive_one(sqs, urls["orders"])
    url = urls["orders"]
    done = consumer.retry_later(message, timedelta(days=2), queue_url=url)
    assert done.sent is not None and done.sent.route == "delay-queue"
    assert done.sent.delay_seconds == 2 * 86_400
    assert counts(sqs, urls["orders"]) == (0, 0, 0)
    assert sum(counts(sqs, urls["orders-delay.fifo"])) == 1
    table = guard_table(dynamodb, f"idem-{uuid.uuid4().hex[:8]}")
    guard = consumer.Guard(table, name="orders.charge")
    copy = {
        **message,
        "MessageAttributes": {
            wire_format.MESSAGE_ID_ATTRIBUTE: {
                "DataType": "String",
                "StringValue": done.message_id or "",
            }
        },
    }
    assert [guard.run(copy, lambda m: 1).ran for _ in range(2)] == [True, False]


def test_in_lambda_the_remaining_time_is_the_in_progress_expiry(dynamodb: Any) -> None:
    table = guard_table(dynamodb, f"idem-{uuid.uuid4().hex[:8]}")
    message = received_with_id("o-1")
    now = 1_800_000_000.0
    guard = consumer.Guard(table, name="h", client=dynamodb, clock=lambda: now)

    class Context:
        def get_remaining_time_in_millis(self) -> int:
            return 7_000

    def look(message: Any) -> None:
        [item] = dynamodb.scan(TableName=table)["Items"]
        assert item["in_progress_expiration"] == {"N": str(int(now * 1000) + 7_000)}

    assert guard.once(look)(message, context=Context()).ran
