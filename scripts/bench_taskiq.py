#!/usr/bin/env python3
"""What `sqsdelay.taskiq` costs a taskiq publisher: the import against taskiq-aio-sqs's, and
`kiq` against plain taskiq-aio-sqs for a delay within the native delay and beyond it (which
taskiq-aio-sqs refuses: it is compared with taskiq-aio-sqs's native send), beyond it also
with the registry (SQSDELAY_REGISTRY=dynamodb). On the embedded
emulator in a separate process; prints one JSON object.

    .venv/bin/python scripts/bench_taskiq.py [--messages 200] [--imports 7]
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


async def kiq_ms(cases: dict[str, tuple[Any, float]], count: int) -> dict[str, float]:
    """Median milliseconds per `kiq` of each (task, delay) case, the cases interleaved:
    moto's cost grows with the queue's depth, which each send adds to."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(count):
        for name, (task, delay) in cases.items():
            kicker = task.kicker().with_labels(delay=delay)
            started = time.perf_counter()
            await kicker.kiq("x" * 200)
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: round(statistics.median(t), 3) for name, t in times.items()}


async def bench(url: str, count: int) -> dict[str, Any]:
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
    plain = taskiq_aio_sqs.SQSBroker(queue, endpoint_url=url, **keys)
    ours = SQSBroker(queue, endpoint_url=url, sqsdelay=settings, **keys)
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
    finally:
        for _, broker in brokers:
            await broker.shutdown()
    base = medians["taskiq_aio_sqs_within"]
    return {
        "kiq_ms_median": medians,
        "extra_ms_vs_taskiq_aio_sqs": {
            "within": round(medians["sqsdelay_within"] - base, 3),
            "beyond": round(medians["sqsdelay_beyond"] - base, 3),
            "beyond_registry": round(medians["sqsdelay_beyond_registry"] - base, 3),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
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
        out.update(asyncio.run(bench(emulator.url, args.messages)))
        out["emulator"] = f"{emulator.name} (separate process, 127.0.0.1)"
        out["messages"] = args.messages
    finally:
        emulator.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
