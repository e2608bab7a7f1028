#!/usr/bin/env python3
"""What `sqsdelay.taskiq` costs a taskiq publisher: the import against taskiq-aio-sqs's, and
`kiq` against plain taskiq-aio-sqs for a delay within the native delay and beyond it (which
taskiq-aio-sqs refuses: it is compared with taskiq-aio-sqs's native send), beyond it also
with the registry (SQSDELAY_REGISTRY=dynamodb), and a body of 1.1 MB, which both offload to
S3 (`s3_extended_bucket_name`): taskiq-aio-sqs within the native delay, sqsdelay beyond it.
On the embedded emulator in a separate process; prints one JSON object.

    .venv/bin/python scripts/bench_taskiq.py [--messages 200] [--large-messages 20]
                                             [--imports 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

from benchkit import EmulatorProcess, client

from sqsdelay import logs
from sqsdelay.aws.installer import Installer
from sqsdelay.settings import Settings

IMPORT = "{}import time; t = time.perf_counter(); import {}; print(time.perf_counter() - t)"


def import_seconds(module: str, runs: int, after: str = "") -> float:
    """Median wall time of the import in a fresh interpreter (cold module cache each run),
    `after` imported first and not timed."""
    times = []
    for _ in range(runs):
        code = IMPORT.format(f"import {after}; " if after else "", module)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        times.append(float(out.stdout))
    return round(statistics.median(times), 4)


LARGE = 1_100_000  # characters: over taskiq-aio-sqs's 1 MiB, so offloaded to S3


async def kiq_ms(
    cases: dict[str, tuple[Any, float]], count: int, body: int = 200
) -> dict[str, float]:
    """Median milliseconds per `kiq` of each (task, delay) case with a `body`-character
    argument, the cases interleaved: moto's cost grows with the queue's depth, which each
    send adds to."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    payload = "x" * body
    for _ in range(count):
        for name, (task, delay) in cases.items():
            kicker = task.kicker().with_labels(delay=delay)
            started = time.perf_counter()
            await kicker.kiq(payload)
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: round(statistics.median(t), 3) for name, t in times.items()}


async def bench(url: str, count: int, large_count: int) -> dict[str, Any]:
    import taskiq_aio_sqs

    from sqsdelay.taskiq import SQSBroker

    queue = f"b{uuid.uuid4().hex[:6]}"
    settings = Settings(endpoint_url=url, region="us-east-1")
    with_registry = settings.model_copy(
        update={"registry": "dynamodb", "registry_table": f"{queue}-scheduled"}
    )
    Installer(settings, client=client(url)).run([queue])
    Installer(with_registry).registry_table([queue])
    keys = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench"}
    bucket = f"{queue}-large"
    client(url, "s3").create_bucket(Bucket=bucket)
    large = {"s3_extended_bucket_name": bucket}  # a small body is sent as without it
    plain = taskiq_aio_sqs.SQSBroker(queue, endpoint_url=url, **large, **keys)
    ours = SQSBroker(queue, endpoint_url=url, sqsdelay=settings, **large, **keys)
    registered = SQSBroker(queue, endpoint_url=url, sqsdelay=with_registry, **keys)
    tasks = {}
    brokers = (("plain", plain), ("ours", ours), ("registry", registered))
    for name, broker in brokers:

        async def work(payload: str) -> None:
            del payload

        tasks[name] = broker.register_task(work, task_name="bench.work")
        await broker.startup()
    within, beyond = 60, 3600  # a minute (native) and an hour (sqsdelay)
    try:
        for task in tasks.values():  # a first send opens connections: not timed
            await task.kicker().with_labels(delay=within).kiq("warm")
        medians = await kiq_ms(
            {
                "taskiq_aio_sqs_within": (tasks["plain"], within),
                "sqsdelay_within": (tasks["ours"], within),
                "sqsdelay_beyond": (tasks["ours"], beyond),
                "sqsdelay_beyond_registry": (tasks["registry"], beyond),
            },
            count,
        )
        large_medians = await kiq_ms(
            {
                "taskiq_aio_sqs_within_large": (tasks["plain"], within),
                "sqsdelay_beyond_large": (tasks["ours"], beyond),
            },
            large_count,
            body=LARGE,
        )
    finally:
        for _, broker in brokers:
            await broker.shutdown()
    base = medians["taskiq_aio_sqs_within"]
    large_base = large_medians["taskiq_aio_sqs_within_large"]
    large_beyond = large_medians["sqsdelay_beyond_large"]
    return {
        "kiq_ms_median": medians,
        "extra_ms_vs_taskiq_aio_sqs": {
            "within": round(medians["sqsdelay_within"] - base, 3),
            "beyond": round(medians["sqsdelay_beyond"] - base, 3),
            "beyond_registry": round(medians["sqsdelay_beyond_registry"] - base, 3),
        },
        "large": {
            "body_characters": LARGE,
            "messages": large_count,
            "kiq_ms_median": large_medians,
            # the long delay's large kiq against taskiq-aio-sqs's own large kiq (both to S3),
            # and against sqsdelay's long kiq of a small body (the S3 write and the body)
            "extra_ms_beyond_vs_taskiq_aio_sqs_large": round(large_beyond - large_base, 3),
            "extra_ms_beyond_vs_small_body": round(large_beyond - medians["sqsdelay_beyond"], 3),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--large-messages", type=int, default=20)
    parser.add_argument("--imports", type=int, default=7)
    args = parser.parse_args()
    logs.configure("json", "WARNING")
    out: dict[str, Any] = {
        "import_s": {
            "taskiq_aio_sqs": import_seconds("taskiq_aio_sqs", args.imports),
            "sqsdelay.taskiq": import_seconds("sqsdelay.taskiq", args.imports),
            # what it adds: less noisy than the difference of two medians on a busy machine
            "sqsdelay.taskiq_after_taskiq_aio_sqs": import_seconds(
                "sqsdelay.taskiq", args.imports, after="taskiq_aio_sqs"
            ),
        }
    }
    emulator = EmulatorProcess("moto")
    try:
        out.update(asyncio.run(bench(emulator.url, args.messages, args.large_messages)))
        out["emulator"] = f"{emulator.name} (separate process, 127.0.0.1)"
        out["messages"] = args.messages
    finally:
        emulator.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
