#!/usr/bin/env python3
"""Bulk cancel by tag (`cancel --tag`, docs/operator-controls.md): N messages with one tag
(and as many untagged beside them), then cancelled by it; the time of the count (dry run)
and of the cancel, and the DynamoDB requests of each, by operation, counted by a botocore
hook (`before-send.dynamodb`) on the sender's client. On the embedded emulator in a
separate process; prints one JSON object.

By default the messages are *seeded*: their records and tag items are written as a send
writes them (`registry.item_of`, `message_tags.tag_items`), marked sent, in BatchWriteItem
calls, without their SQS messages: the cancel reads and writes only the registry, and
moto's FIFO queue slows down with its depth (20,000 sends took over 25 minutes before
reaching half). `--send` sends them for real (the sender's requests per send are counted
then too).

    .venv/bin/python scripts/bench_bulk_cancel.py [--messages 10000] [--send]
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections import Counter
from typing import Any

import boto3
from benchkit import EmulatorProcess

from sqsdelay import logs
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Message, Sender
from sqsdelay.core import message_tags, registry
from sqsdelay.settings import Settings


def client(service: str, url: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
    )


def counted(dynamodb: Any) -> Counter[str]:
    seen: Counter[str] = Counter()

    def note(request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        name = target.decode() if isinstance(target, bytes) else str(target)
        seen[name.rsplit(".", 1)[-1]] += 1

    dynamodb.meta.events.register("before-send.dynamodb", note)
    return seen


def timed(seen: Counter[str], what: Any) -> tuple[Any, dict[str, Any]]:
    before = Counter(seen)
    started = time.perf_counter()
    result = what()
    seconds = time.perf_counter() - started
    diff = seen - before
    return result, {
        "seconds": round(seconds, 2),
        "dynamodb_requests": dict(sorted(diff.items())),
        "dynamodb_requests_total": sum(diff.values()),
    }


def seed(dynamodb: Any, settings: Settings, n: int) -> None:
    """N tagged and N untagged records (and the tagged ones' tag items), as sent."""
    table, destination = str(settings.registry_table_name()), f"{settings.queue_prefix}orders"
    now_ms = int(time.time() * 1000)
    tags = (("customer", "42"),)
    items: list[dict[str, Any]] = []
    for i in range(2 * n):
        ident = f"m-{i:06d}"
        tagged = i % 2 == 0
        record = registry.Record(
            destination,
            ident,
            now_ms + 3_600_000 + i,
            "scheduled",
            "delay-queue",
            tags=("customer=42",) if tagged else (),
        )
        item = registry.item_of(record, now_ms)
        item["sent"] = {"BOOL": True}
        items.append(item)
        if tagged:
            expires = record.due_ms // 1000 + registry.KEEP_AFTER_DUE_SECONDS
            items += message_tags.tag_items(destination, ident, tags, expires)
    for start in range(0, len(items), 25):
        chunk = [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]
        left = {table: chunk}
        while left:
            left = dynamodb.batch_write_item(RequestItems=left).get("UnprocessedItems") or {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=10, help="SQSDELAY_PARK_CONCURRENCY")
    parser.add_argument("--send", action="store_true", help="send them instead of seeding")
    args = parser.parse_args()
    logs.configure("json", "WARNING")
    emulator = EmulatorProcess("moto")
    try:
        prefix = f"b{uuid.uuid4().hex[:6]}-"
        settings = Settings(
            endpoint_url=emulator.url,
            region="us-east-1",
            queue_prefix=prefix,
            registry="dynamodb",
            registry_table=f"{prefix}scheduled",
            park_concurrency=args.concurrency,
        )
        sqs, dynamodb = client("sqs", emulator.url), client("dynamodb", emulator.url)
        installer = Installer(settings, client=sqs)
        installer.run(["orders"])
        installer.registry_table(["orders"], dynamodb=dynamodb)
        n = args.messages
        if not args.send:
            started = time.perf_counter()
            seed(dynamodb, settings, n)
            sent: dict[str, Any] = {"seeded_seconds": round(time.perf_counter() - started, 2)}
        seen = counted(dynamodb)
        sender = Sender(settings, client=sqs, dynamodb=dynamodb)
        tagged = [Message("b", delay=3600, tags={"customer": "42"}) for _ in range(n)]
        plain = [Message("b", delay=3600) for _ in range(n)]

        def send_all() -> None:
            for batch in (tagged, plain):
                for start in range(0, n, 100):
                    sender.send_batch("orders", batch[start : start + 100])

        if args.send:
            _, sent = timed(seen, send_all)
        tag = ("customer", "42")
        counted_only, dry = timed(seen, lambda: sender.cancel_tagged("orders", tag, dry_run=True))
        done, cancel = timed(seen, lambda: sender.cancel_tagged("orders", tag))
        out = {
            "emulator": emulator.name,
            "messages_tagged": n,
            "messages_untagged": n,
            "concurrency": args.concurrency,
            "setup": "sent" if args.send else "seeded",
            "send_both": sent,
            "dry_run": {**dry, "matched": counted_only.matched},
            "cancel": {**cancel, "matched": done.matched, **done.outcomes},
        }
        print(json.dumps(out, indent=2))
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
