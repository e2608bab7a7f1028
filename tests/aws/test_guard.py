"""The idempotency guard's run (aws/guard.py) against an in-memory table: the claim, the
handler between it and its end, the copy that finds a completed or running record, a
Lambda context's remaining time, and which handler names the records. The requests
themselves are core/idempotency.py's (tests/core/test_idempotency.py); the guard against
the emulator and aioboto3 is tests/integration/test_consumer_guard.py."""

from __future__ import annotations

import asyncio
import functools
import json
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sqsdelay.aws.guard import AsyncGuard, Guard, _handler_name
from sqsdelay.core import wire_format
from sqsdelay.errors import GuardInProgress

NOW = 1_800_000_000.0


class Table:
    """A DynamoDB client, as far as the guard calls it: a claim is refused (with the record
    that won, ALL_OLD) whenever the key is taken; the tests never let a record expire."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.apis: list[str] = []

    def put_item(self, **p: Any) -> dict[str, Any]:
        self.apis.append("PutItem")
        key = p["Item"]["id"]["S"]
        if key in self.items:
            error = {"Code": "ConditionalCheckFailedException", "Message": "taken"}
            raise ClientError({"Error": error, "Item": self.items[key]}, "PutItem")
        self.items[key] = dict(p["Item"])
        return {}

    def update_item(self, **p: Any) -> dict[str, Any]:
        self.apis.append("UpdateItem")
        values = p["ExpressionAttributeValues"]
        self.items[p["Key"]["id"]["S"]].update(
            status=values[":status"], data=values[":response_data"], expiration=values[":expiry"]
        )
        return {}

    def delete_item(self, **p: Any) -> dict[str, Any]:
        self.apis.append("DeleteItem")
        self.items.pop(p["Key"]["id"]["S"], None)
        return {}


class AsyncTable:
    """The same table behind an aioboto3 client's awaitable methods."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.table, name)

        async def call(**p: Any) -> Any:
            return method(**p)

        return call


def record(message_id: str = "order-7") -> dict[str, Any]:
    """A Lambda SQS record whose message carries sqsdelay's id."""
    return {
        "messageId": "sqs-1",
        "receiptHandle": "rh-1",
        "body": "charge order 7",
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {
            wire_format.MESSAGE_ID_ATTRIBUTE: {"dataType": "String", "stringValue": message_id}
        },
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
    }


def guard(table: Table, **options: Any) -> Guard:
    return Guard("guard", client=table, clock=lambda: NOW, **options)


def test_a_first_run_claims_runs_and_completes_and_a_copy_gets_its_result_unrun() -> None:
    table, ran = Table(), []

    def handler(message: dict[str, Any]) -> dict[str, int]:
        ran.append(message["body"])
        return {"charged": 7}

    g = guard(table)
    first = g.run(record(), handler)
    assert (first.ran, first.result) == (True, {"charged": 7})
    assert table.apis == ["PutItem", "UpdateItem"]  # two calls on a first run
    [stored] = table.items.values()
    assert stored["status"]["S"] == "COMPLETED" and json.loads(stored["data"]["S"]) == first.result
    copy = g.run(record(), handler)
    assert (copy.ran, copy.result) == (False, {"charged": 7})
    assert table.apis[2:] == ["PutItem"] and ran == ["charge order 7"]  # one call, not run
    assert g.run(record("order-8"), handler).ran  # another message: another record


def test_a_handler_that_raises_releases_its_record_so_the_next_copy_runs() -> None:
    table = Table()
    g = guard(table)

    def fails(_message: object) -> None:
        raise RuntimeError("partner down")

    with pytest.raises(RuntimeError, match="partner down"):
        g.run(record(), fails)
    assert table.apis == ["PutItem", "DeleteItem"] and table.items == {}
    assert g.run(record(), lambda _m: "ok").ran


def test_a_copy_that_arrives_while_a_run_is_in_progress_is_refused_and_runs_nothing() -> None:
    table = Table()
    g = guard(table, name="orders")  # one prefix for both handlers: one record
    refused: list[str] = []

    def handler(message: object) -> str:
        with pytest.raises(GuardInProgress, match="leave it undeleted") as info:
            g.run(message, lambda _m: pytest.fail("a copy ran while the first was running"))
        refused.append(str(info.value))
        return "done"

    assert g.run(record(), handler).result == "done"
    assert len(refused) == 1 and table.apis == ["PutItem", "PutItem", "UpdateItem"]


def test_a_lambda_contexts_remaining_time_is_the_runs_in_progress_expiry() -> None:
    table = Table()
    context = SimpleNamespace(get_remaining_time_in_millis=lambda: 4_321)
    guard(table, in_progress_seconds=60).run(record(), lambda _m: None, context=context)
    guard(table, in_progress_seconds=60).run(record("other"), lambda _m: None)
    expiries = sorted(int(i["in_progress_expiration"]["N"]) for i in table.items.values())
    assert expiries == [int(NOW * 1000) + 4_321, int(NOW * 1000) + 60_000]


def _charge(message: object, amount: int) -> int:
    return amount


class Charger:
    def __call__(self, message: object) -> int:
        return 1


def test_a_wrapped_handler_is_named_by_the_function_it_wraps_and_an_object_by_its_class() -> None:
    nested = functools.partial(functools.partial(_charge, amount=1))
    assert _handler_name(nested) == (__name__, "_charge")
    assert _handler_name(Charger()) == (__name__, "Charger")
    table = Table()
    g = guard(table)
    g.run(record(), functools.partial(_charge, amount=1))
    # the same function through another partial: the same record, so not run again
    assert not g.run(record(), functools.partial(_charge, amount=2)).ran
    # `name=` is the records' prefix: another name, another record
    assert guard(table, name="refunds").run(record(), functools.partial(_charge, amount=2)).ran


def test_the_async_guard_awaits_a_coroutine_handler_and_writes_what_the_sync_one_reads() -> None:
    table = Table()

    async def handler(message: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        return message["body"].upper()

    async def run() -> Any:
        g = AsyncGuard("guard", client=AsyncTable(table), clock=lambda: NOW, name="charge")
        return await g.run(record(), handler)

    outcome = asyncio.run(run())
    assert (outcome.ran, outcome.result) == (True, "CHARGE ORDER 7")
    again = guard(table, name="charge").run(record(), lambda _m: pytest.fail("ran twice"))
    assert (again.ran, again.result) == (False, "CHARGE ORDER 7")
