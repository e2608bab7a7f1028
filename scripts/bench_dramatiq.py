#!/usr/bin/env python3
"""What `sqsdelay.dramatiq` costs a Dramatiq publisher: the import, and `enqueue` against
plain dramatiq-sqs for a delay within the native delay and beyond it (which dramatiq-sqs
refuses: it is compared with dramatiq-sqs's native send). On the embedded emulator in a
separate process; prints one JSON object.

    .venv/bin/python scripts/bench_dramatiq.py [--messages 200] [--imports 5]
"""

from __future__ import annotations

import argparse
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

IMPORT = "import time; t = time.perf_counter(); import {}; print(time.perf_counter() - t)"


def import_seconds(module: str, runs: int) -> float:
    """Median wall time of the import in a fresh interpreter (cold module cache each run)."""
    times = []
    for _ in range(runs):
        code = IMPORT.format(module)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        times.append(float(out.stdout))
    return round(statistics.median(times), 4)


def enqueue_ms(cases: dict[str, tuple[Any, int]], message: Any, count: int) -> dict[str, float]:
    """Median milliseconds per enqueue of each (broker, delay) case, the cases interleaved:
    moto's cost grows with the queue's depth, which each send adds to."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(count):
        for name, (broker, delay) in cases.items():
            started = time.perf_counter()
            broker.enqueue(message.copy(message_id=str(uuid.uuid4())), delay=delay)
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: round(statistics.median(t), 3) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--imports", type=int, default=5)
    args = parser.parse_args()
    logs.configure("json", "WARNING")
    out: dict[str, Any] = {
        "import_s": {
            "dramatiq_sqs": import_seconds("dramatiq_sqs", args.imports),
            "sqsdelay.dramatiq": import_seconds("sqsdelay.dramatiq", args.imports),
        }
    }
    import dramatiq
    import dramatiq_sqs

    from sqsdelay.dramatiq import SQSBroker

    emulator = EmulatorProcess("moto")
    try:
        boto = {
            "endpoint_url": emulator.url,
            "region_name": "us-east-1",
            "aws_access_key_id": "bench",
            "aws_secret_access_key": "bench",
        }
        namespace = f"b{uuid.uuid4().hex[:6]}"
        settings = Settings(endpoint_url=emulator.url, region="us-east-1")
        Installer(settings, client=client(emulator.url)).run([f"{namespace}_default"])
        plain = dramatiq_sqs.SQSBroker(namespace=namespace, **boto)
        ours = SQSBroker(namespace=namespace, sqsdelay=settings, **boto)
        for broker in (plain, ours):
            broker.declare_queue("default")
        message = dramatiq.Message(
            queue_name="default", actor_name="a", args=("x" * 200,), kwargs={}, options={}
        )
        within, beyond = 60_000, 3_600_000  # a minute (native) and an hour (sqsdelay)
        out["enqueue_ms_median"] = enqueue_ms(
            {
                "dramatiq_sqs_within": (plain, within),
                "sqsdelay_within": (ours, within),
                "sqsdelay_beyond": (ours, beyond),
            },
            message,
            args.messages,
        )
        count = args.messages
        medians = out["enqueue_ms_median"]
        base = medians["dramatiq_sqs_within"]
        out["extra_ms_vs_dramatiq_sqs"] = {
            "within": round(medians["sqsdelay_within"] - base, 3),
            "beyond": round(medians["sqsdelay_beyond"] - base, 3),
        }
        out["emulator"] = f"{emulator.name} (separate process, 127.0.0.1)"
        out["messages"] = count
    finally:
        emulator.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
