"""The idempotency guard against the embedded emulator over HTTP: duplicates of a direct send
(the id rides on every send), and the async guard (aioboto3) beside the sync one: the same
runs, the same requests, one table read both ways."""

from __future__ import annotations

import asyncio
import functools
import json
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aioboto3
import boto3
import pytest

from sqsdelay import consumer
from sqsdelay.aws.sender import Sender
from sqsdelay.core import wire_format
from sqsdelay.errors import ConfigError, InvalidInput
from sqsdelay.settings import Settings
from tests.support.consumerkit import (
    guard_table,
    install,
    lambda_record,
    receive_one,
    received_with_id,
    sent_twice,
)

T = TypeVar("T")
ATTRS = {"tenant": {"DataType": "String", "StringValue": "a"}}


@pytest.fixture
def table(dynamodb: Any) -> str:
    return guard_table(dynamodb, f"idem-{uuid.uuid4().hex[:8]}")


def run(coroutine: Awaitable[T]) -> T:
    async def main() -> T:
        return await coroutine

    return asyncio.run(main())


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
    with pytest.raises(InvalidInput, match=r"without room for its id.*Give the guard a key"):
        consumer.Guard(table, name="h", client=dynamodb).run(got, lambda m: None)
    keyed = consumer.Guard(
        table, name="h", client=dynamodb, key=lambda m: json.loads(m.received.body)["order_id"]
    )
    assert keyed.run(got, lambda m: 1).ran and not keyed.run(got, lambda m: 2).ran


def test_duplicates_through_the_async_guard_run_the_handler_once(
    settings: Settings, sqs: Any, table: str
) -> None:
    url = install(settings, sqs, "orders")["orders"]
    _, copies = sent_twice(settings, sqs, url, "once")
    runs: list[str] = []

    async def both() -> list[consumer.Outcome[dict[str, int]]]:
        async with consumer.AsyncGuard(table, name="orders.charge", settings=settings) as guard:

            @guard.once
            async def charge(message: Any) -> dict[str, int]:
                await asyncio.sleep(0)
                runs.append(message["MessageId"])
                return {"charged": len(runs)}

            return [await charge(c) for c in copies]

    outcomes = run(both())
    assert runs == [copies[0]["MessageId"]]
    assert [o.ran for o in outcomes] == [True, False] and outcomes[1].result == {"charged": 1}


def test_an_async_run_that_crashed_in_progress_lets_a_copy_run_after_its_in_progress_expiry(
    settings: Settings, sqs: Any, table: str
) -> None:
    url = install(settings, sqs, "orders")["orders"]
    _, copies = sent_twice(settings, sqs, url, "crash")
    now = [time.time()]
    ran: list[str] = []

    async def scenario() -> None:
        async with consumer.AsyncGuard(
            table, name="h", settings=settings, in_progress_seconds=30, clock=lambda: now[0]
        ) as guard:

            async def copy(message: Any) -> str:
                ran.append("copy")
                return "copy ran"

            async def crashed(message: Any) -> None:
                # The first run holds INPROGRESS and never ends it (its process died): ...
                with pytest.raises(consumer.GuardInProgress, match="leave it undeleted"):
                    await guard.run(copies[1], copy)
                now[0] += 29  # ... a copy is refused until its in-progress expiry ...
                with pytest.raises(consumer.GuardInProgress):
                    await guard.run(copies[1], copy)
                now[0] += 2  # ... and runs once it has passed.
                assert (await guard.run(copies[1], copy)).ran

            await guard.run(copies[0], crashed)

    run(scenario())
    assert ran == ["copy"]


def test_the_async_guard_says_what_to_do_without_a_table_a_missing_one_or_a_client(
    settings: Settings,
) -> None:
    message = received_with_id("o-1")
    with pytest.raises(ConfigError, match="partition key 'id'"):
        consumer.AsyncGuard(None, settings=settings)

    async def missing() -> None:
        async with consumer.AsyncGuard("no-such-table", name="h", settings=settings) as guard:
            await guard.run(message, lambda m: None)

    with pytest.raises(consumer.GuardTableMissing, match="does not exist: create it"):
        run(missing())

    async def unopened() -> None:
        await consumer.AsyncGuard("t", settings=settings).run(message, lambda m: None)

    with pytest.raises(ConfigError, match="async with AsyncGuard"):
        run(unopened())


def test_the_sync_and_async_guards_read_each_others_records(
    settings: Settings, sqs: Any, dynamodb: Any, table: str, moto_url: str
) -> None:
    url = install(settings, sqs, "orders")["orders"]
    sync_guard = consumer.Guard(table, name="orders.charge", client=dynamodb)
    _, first = sent_twice(settings, sqs, url, "one")
    _, second = sent_twice(settings, sqs, url, "two")
    runs: list[str] = []

    def by_sync(message: Any) -> dict[str, str]:
        runs.append("sync")
        return {"by": "sync"}

    async def by_async(message: Any) -> dict[str, str]:
        runs.append("async")
        return {"by": "async"}

    async def scenario() -> list[Any]:
        session = aioboto3.Session()
        async with session.client(
            "dynamodb", endpoint_url=moto_url, region_name="us-east-1"
        ) as client:
            guard = consumer.AsyncGuard(table, name="orders.charge", client=client)
            assert sync_guard.run(first[0], by_sync).ran  # the sync guard writes ...
            seen = await guard.run(first[1], by_async)  # ... the async one reads
            wrote = await guard.run(second[0], by_async)  # the async guard writes ...
            return [seen, wrote, sync_guard.run(second[1], by_sync)]  # ... the sync one reads

    seen, wrote, read = run(scenario())
    assert (seen.ran, seen.result) == (False, {"by": "sync"})
    assert wrote.ran and (read.ran, read.result) == (False, {"by": "async"})
    assert runs == ["sync", "async"]


def _recorded(client: Any, into: list[tuple[str, dict[str, Any]]]) -> None:
    def note(request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        name = target.decode() if isinstance(target, bytes) else str(target)
        into.append((name.rsplit(".", 1)[-1], json.loads(request.body)))

    client.meta.events.register("before-send.dynamodb", note)


def test_the_async_guard_makes_the_sync_guards_requests(
    settings: Settings, sqs: Any, dynamodb: Any, moto_url: str
) -> None:
    """Per message, a first run, a duplicate and a failing handler: the same operations with
    the same parameters (the table's name aside), on a fixed clock."""
    tables = [guard_table(dynamodb, f"idem-{uuid.uuid4().hex[:8]}") for _ in range(2)]
    url = install(settings, sqs, "orders")["orders"]
    _, copies = sent_twice(settings, sqs, url, "x")
    _, failing = sent_twice(settings, sqs, url, "y")
    clock: Callable[[], float] = lambda: 1_800_000_000.0  # noqa: E731
    sync_requests: list[tuple[str, dict[str, Any]]] = []
    sync_client = boto3.client("dynamodb", endpoint_url=moto_url, region_name="us-east-1")
    _recorded(sync_client, sync_requests)
    sync_guard = consumer.Guard(tables[0], name="n", client=sync_client, clock=clock)

    def boom(message: Any) -> None:
        raise RuntimeError("handler failed")

    sync_guard.run(copies[0], lambda m: {"ok": 1})
    sync_guard.run(copies[1], lambda m: {"ok": 1})
    with pytest.raises(RuntimeError):
        sync_guard.run(failing[0], boom)

    async_requests: list[tuple[str, dict[str, Any]]] = []

    async def scenario() -> None:
        async with consumer.AsyncGuard(tables[1], name="n", settings=settings, clock=clock) as g:
            _recorded(g.caller.clients["dynamodb"], async_requests)
            await g.run(copies[0], lambda m: {"ok": 1})
            await g.run(copies[1], lambda m: {"ok": 1})
            with pytest.raises(RuntimeError):
                await g.run(failing[0], boom)

    run(scenario())
    operations = Counter(op for op, _ in sync_requests)
    assert operations == {"PutItem": 3, "UpdateItem": 1, "DeleteItem": 1}
    assert [(op, {**body, "TableName": "t"}) for op, body in async_requests] == [
        (op, {**body, "TableName": "t"}) for op, body in sync_requests
    ]


class _SlowUpdates:
    """An aioboto3 DynamoDB client whose UpdateItem (the guard's completion) waits until the
    test lets it go: a run can be cancelled while it records its success."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.entered = asyncio.Event()
        self.proceed = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def update_item(self, **params: Any) -> Any:
        self.entered.set()
        await self.proceed.wait()
        return await self._client.update_item(**params)


def test_a_run_cancelled_while_it_records_its_success_still_records_it(
    table: str, moto_url: str
) -> None:
    """The handler's work is done when its completion is written: a cancellation then (a
    worker shutting down) must not leave the record INPROGRESS, or a copy runs it again."""
    copies = [received_with_id("o-cancel"), received_with_id("o-cancel")]
    runs: list[str] = []

    async def charge(message: Any) -> str:
        runs.append(message["MessageId"])
        return "charged"

    async def scenario() -> consumer.Outcome[str]:
        session = aioboto3.Session()
        async with session.client(
            "dynamodb", endpoint_url=moto_url, region_name="us-east-1"
        ) as client:
            slow = _SlowUpdates(client)
            guard = consumer.AsyncGuard(table, name="h", client=slow, in_progress_seconds=600)
            first = asyncio.create_task(guard.run(copies[0], charge))
            await asyncio.wait_for(slow.entered.wait(), 30)  # the completion is under way
            first.cancel()
            await asyncio.sleep(0)  # the cancellation reaches the run first
            slow.proceed.set()
            with pytest.raises(asyncio.CancelledError):
                await first
            return await guard.run(copies[1], charge)

    second = run(scenario())
    assert runs == [copies[0]["MessageId"]]
    assert (second.ran, second.result) == (False, "charged")


def test_the_sync_guard_refuses_an_async_handler_and_releases_its_record(
    dynamodb: Any, table: str
) -> None:
    """An `async def` given to the sync guard never ran: it must not be stored as COMPLETED
    (the message would be deleted unprocessed). ConfigError, and the next copy runs."""
    message = received_with_id("o-async")
    guard = consumer.Guard(table, name="h", client=dynamodb)

    async def charge(message: Any) -> str:
        return "never"

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the coroutine is closed, not left un-awaited
        with pytest.raises(ConfigError, match="use AsyncGuard"):
            guard.run(message, charge)
        with pytest.raises(ConfigError, match="use AsyncGuard"):
            guard.run(message, lambda m: charge(m))  # an awaitable from a plain function
    assert dynamodb.scan(TableName=table)["Items"] == []  # released
    assert guard.run(message, lambda m: "sync").ran


def test_the_callers_key_is_not_asked_when_the_message_has_its_id(
    dynamodb: Any, table: str
) -> None:
    """The id wins over key=: a key that fails on some bodies fails no run the id serves."""
    guard = consumer.Guard(
        table, name="h", client=dynamodb, key=lambda m: json.loads(m.received.body)["order_id"]
    )
    message = received_with_id("o-7", body="not json")
    assert guard.run(message, lambda m: 1).ran
    assert not guard.run(received_with_id("o-7", body="not json"), lambda m: 2).ran


def _charge(message: Any, *, amount: int) -> dict[str, int]:
    return {"charged": amount}


class Charger:
    """A handler that is a callable object: no `__qualname__` of its own."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, message: Any) -> dict[str, int]:
        self.runs += 1
        return {"charged": self.runs}


class AsyncCharger(Charger):
    async def __call__(self, message: Any) -> dict[str, int]:  # type: ignore[override]
        return super().__call__(message)


def _prefixes(dynamodb: Any, table: str) -> set[str]:
    items = dynamodb.scan(TableName=table)["Items"]
    return {item["id"]["S"].split("#", 1)[0] for item in items}


def test_a_partial_or_a_callable_object_runs_guarded_with_or_without_a_name(
    dynamodb: Any, table: str
) -> None:
    """Issue 58 (7): `run` read the handler's `__qualname__` eagerly, so a `functools.partial`
    or a callable object raised AttributeError, even with `name=`. Without a name, a partial is
    named by its function and a callable object by its class."""
    charger = Charger()
    partial = functools.partial(_charge, amount=7)
    named = consumer.Guard(table, name="orders.charge", client=dynamodb)
    assert named.run(received_with_id("p-named"), partial).result == {"charged": 7}
    assert named.run(received_with_id("c-named"), charger).ran
    assert not named.run(received_with_id("c-named"), charger).ran  # a copy: once
    unnamed = consumer.Guard(table, client=dynamodb)
    assert unnamed.run(received_with_id("p"), partial).ran
    assert not unnamed.run(received_with_id("p"), functools.partial(partial)).ran  # same name
    assert unnamed.run(received_with_id("c"), charger).result == {"charged": 2}
    assert not unnamed.run(received_with_id("c"), Charger()).ran  # the class names it
    assert charger.runs == 2
    module = __name__
    assert _prefixes(dynamodb, table) == {
        "orders.charge",
        f"test-func.{module}._charge",
        f"test-func.{module}.Charger",
    }


def test_the_async_guard_runs_a_partial_or_a_callable_object_with_or_without_a_name(
    settings: Settings, dynamodb: Any, table: str
) -> None:
    async def scenario() -> list[Any]:
        outcomes = []
        for name in ("orders.charge", None):
            async with consumer.AsyncGuard(table, name=name, settings=settings) as guard:
                tag = name or "unnamed"
                outcomes += [
                    await guard.run(
                        received_with_id(f"p-{tag}"), functools.partial(_charge, amount=3)
                    ),
                    await guard.run(received_with_id(f"c-{tag}"), AsyncCharger()),
                    await guard.run(received_with_id(f"c-{tag}"), AsyncCharger()),
                ]
        return outcomes

    outcomes = run(scenario())
    assert [(o.ran, o.result) for o in outcomes] == [
        (True, {"charged": 3}),
        (True, {"charged": 1}),
        (False, {"charged": 1}),
    ] * 2
    assert _prefixes(dynamodb, table) == {
        "orders.charge",
        f"test-func.{__name__}._charge",
        f"test-func.{__name__}.AsyncCharger",
    }
