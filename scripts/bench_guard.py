#!/usr/bin/env python3
"""The idempotency guard's DynamoDB requests per message, counted by a botocore event hook
(`before-send.dynamodb`) on the guard's client, for the sync guard (boto3) and the async one
(aioboto3), and beside them Powertools' own `idempotent_function` on the same table and
messages: a first run, a duplicate, a handler that fails, and a copy that meets a run in
progress. On the embedded emulator in a separate process; prints one JSON object.

    .venv/bin/python scripts/bench_guard.py [--messages 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import boto3
from benchkit import EmulatorProcess

from sqsdelay import consumer, logs
from sqsdelay.core import wire_format


def dynamodb(url: str) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
    )


def counted(client: Any) -> Counter[str]:
    """Every request the client sends, by operation."""
    seen: Counter[str] = Counter()

    def note(request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        name = target.decode() if isinstance(target, bytes) else str(target)
        seen[name.rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-send.dynamodb", note)
    return seen


def record(i: int, attempt: int | None = None) -> dict[str, Any]:
    """A Lambda SQS record of a handed-over message (its sqsdelay id), SQS id `copy`-unique."""
    attrs = {
        wire_format.MESSAGE_ID_ATTRIBUTE: {"dataType": "String", "stringValue": f"order-{i}"},
    }
    if attempt is not None:
        attrs[wire_format.ATTEMPT_ATTRIBUTE] = {"dataType": "Number", "stringValue": str(attempt)}
    return {
        "messageId": uuid.uuid4().hex,
        "receiptHandle": uuid.uuid4().hex,
        "body": json.dumps({"order": i}),
        "attributes": {},
        "messageAttributes": attrs,
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
        "awsRegion": "us-east-1",
    }


def per_message(seen: Counter[str], before: Counter[str], messages: int) -> dict[str, float]:
    diff = seen - before
    out = {op: round(n / messages, 3) for op, n in sorted(diff.items())}
    out["total"] = round(sum(diff.values()) / messages, 3)
    return out


def guard_cases(client: Any, table: str, messages: int) -> dict[str, Any]:
    seen = counted(client)
    guard = consumer.Guard(table, name="bench.guard", client=client)
    cases: dict[str, Any] = {}

    def case(name: str, run: Callable[[int], None]) -> None:
        before = Counter(seen)
        times = []
        for i in range(messages):
            t = time.perf_counter()
            run(i)
            times.append(time.perf_counter() - t)
        cases[name] = {
            "requests_per_message": per_message(seen, before, messages),
            "ms_median": round(statistics.median(times) * 1000, 2),
        }

    case("first_run", lambda i: guard.run(record(i), lambda r: {"ok": i}))
    case("duplicate", lambda i: guard.run(record(i), lambda r: {"ok": i}))

    def failing(i: int) -> None:
        def boom(r: object) -> None:
            raise RuntimeError("handler failed")

        with contextlib.suppress(RuntimeError):
            guard.run(record(i, attempt=1), boom)

    case("handler_fails", failing)

    def meets_run_in_progress(i: int) -> None:
        def inner(r: object) -> None:
            with contextlib.suppress(consumer.GuardInProgress):
                guard.run(record(i, attempt=2), lambda r: None)

        guard.run(record(i, attempt=2), inner)

    # Counted per message: the outer run's three requests and the copy's one.
    case("copy_meets_run_in_progress_with_its_run", meets_run_in_progress)
    return cases


async def async_guard_cases(url: str, table: str, messages: int) -> dict[str, Any]:
    """The same cases through `AsyncGuard` on an aioboto3 client."""
    import aioboto3

    session = aioboto3.Session(
        aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
    )
    async with session.client("dynamodb", endpoint_url=url) as client:
        seen = counted(client)
        guard = consumer.AsyncGuard(table, name="bench.async_guard", client=client)
        cases: dict[str, Any] = {}

        async def case(name: str, run: Callable[[int], Awaitable[object]]) -> None:
            before = Counter(seen)
            times = []
            for i in range(messages):
                t = time.perf_counter()
                await run(i)
                times.append(time.perf_counter() - t)
            cases[name] = {
                "requests_per_message": per_message(seen, before, messages),
                "ms_median": round(statistics.median(times) * 1000, 2),
            }

        await case("first_run", lambda i: guard.run(record(i), lambda r: {"ok": i}))
        await case("duplicate", lambda i: guard.run(record(i), lambda r: {"ok": i}))

        async def failing(i: int) -> None:
            def boom(r: object) -> None:
                raise RuntimeError("handler failed")

            with contextlib.suppress(RuntimeError):
                await guard.run(record(i, attempt=1), boom)

        await case("handler_fails", failing)

        async def meets_run_in_progress(i: int) -> None:
            async def inner(r: object) -> None:
                with contextlib.suppress(consumer.GuardInProgress):
                    await guard.run(record(i, attempt=2), lambda r: None)

            await guard.run(record(i, attempt=2), inner)

        await case("copy_meets_run_in_progress_with_its_run", meets_run_in_progress)
        return cases


def powertools_cases(client: Any, table: str, messages: int) -> dict[str, Any]:
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        idempotent_function,
    )

    seen = counted(client)
    store = DynamoDBPersistenceLayer(table_name=table, boto3_client=client)

    @idempotent_function(
        data_keyword_argument="record",
        config=consumer.powertools_config(),
        persistence_store=store,
        key_prefix="bench.powertools",
    )
    def handle(record: dict[str, Any]) -> dict[str, str]:
        return {"ok": "yes"}

    cases = {}
    for name in ("first_run", "duplicate"):
        before = Counter(seen)
        for i in range(messages):
            handle(record=record(i))
        cases[name] = {"requests_per_message": per_message(seen, before, messages)}
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100)
    args = parser.parse_args()
    logs.configure("json", "WARNING")
    warnings.simplefilter("ignore")  # Powertools warns that no Lambda context gives it time
    os.environ.pop("AWS_LAMBDA_FUNCTION_NAME", None)
    emulator = EmulatorProcess("moto")
    try:
        client = dynamodb(emulator.url)
        table = f"bench-idem-{uuid.uuid4().hex[:8]}"
        client.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        result = {
            "emulator": emulator.name,
            "messages": args.messages,
            "guard": guard_cases(client, table, args.messages),
            "async_guard": asyncio.run(async_guard_cases(emulator.url, table, args.messages)),
            "powertools": powertools_cases(dynamodb(emulator.url), table, args.messages),
        }
    finally:
        emulator.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
