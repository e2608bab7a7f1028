#!/usr/bin/env python3
"""Bulk cancel by tag (`cancel --tag`, docs/operator-controls.md): N messages sent with one
tag (and as many untagged beside them), then cancelled by it; the time of the count (dry
run) and of the cancel, and the DynamoDB requests of each, by operation, counted by a
botocore hook (`before-send.dynamodb`) on the sender's client. On the embedded emulator in
a separate process; prints one JSON object.

    .venv/bin/python scripts/bench_bulk_cancel.py [--messages 10000]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=10, help="SQSDELAY_PARK_CONCURRENCY")
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
        seen = counted(dynamodb)
        sender = Sender(settings, client=sqs, dynamodb=dynamodb)
        n = args.messages
        tagged = [Message("b", delay=3600, tags={"customer": "42"}) for _ in range(n)]
        plain = [Message("b", delay=3600) for _ in range(n)]

        def send_all() -> None:
            for batch in (tagged, plain):
                for start in range(0, n, 100):
                    sender.send_batch("orders", batch[start : start + 100])

        _, sent = timed(seen, send_all)
        tag = ("customer", "42")
        counted_only, dry = timed(seen, lambda: sender.cancel_tagged("orders", tag, dry_run=True))
        done, cancel = timed(seen, lambda: sender.cancel_tagged("orders", tag))
        out = {
            "emulator": emulator.name,
            "messages_tagged": n,
            "messages_untagged": n,
            "concurrency": args.concurrency,
            "send_both": sent,
            "dry_run": {**dry, "matched": counted_only.matched},
            "cancel": {**cancel, "matched": done.matched, **done.outcomes},
        }
        print(json.dumps(out, indent=2))
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
