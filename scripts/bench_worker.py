#!/usr/bin/env python3
"""Worker benchmark against the SQS emulator; prints one JSON object.

- load: delay queues with a backlog and a 1 s cycle; the worker runs for a while and its own
  request counters give requests per message per cycle (bar: <= 0.35) and throughput;
- naive: a one-message-at-a-time boto3 loop (receive 1, send, delete) on the same server;
- raw: the emulator's own batch capacity (receive 10, send batch, delete batch, no logic);
- lateness: multi-cycle delays through the real worker; p50/p99/max and early deliveries;
- parking (moto only: it has Scheduler's API, and the emulator fires the schedules): one long
  delay per message, unparked, parked by the worker and parked at send, in the same run:
  SQS requests and Scheduler calls per message, early and lost messages.

    .venv/bin/python scripts/bench_worker.py [--queues 8] [--per-queue 100] [--seconds 20]
        [--metrics emf|off]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
import uuid
from datetime import datetime
from typing import Any

import aioboto3
from benchkit import EmulatorProcess, client, env_for, fauxqs_installed, percentile, run_worker

from sqsdelay import logs
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.core import wirenames
from sqsdelay.settings import Settings

FAR = {wirenames.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": "100000000"}}


def install(url: str, prefix: str, queues: list[str], cycle: int) -> dict[str, str]:
    s = Settings(
        endpoint_url=url, region="us-east-1", queue_prefix=prefix, max_native_delay_seconds=cycle
    )
    reports = Installer(s, client=client(url)).run(queues)
    return {r.spec.name.removeprefix(prefix): str(r.url) for r in reports}


def preload(url: str, queue_urls: list[str], per_queue: int) -> None:
    sqs = client(url)
    for q in queue_urls:
        for start in range(0, per_queue, 10):
            entries = [
                {
                    "Id": str(i),
                    "MessageBody": f"load {i}",
                    "MessageAttributes": FAR,
                    "MessageGroupId": uuid.uuid4().hex,
                    "MessageDeduplicationId": uuid.uuid4().hex,
                }
                for i in range(start, min(per_queue, start + 10))
            ]
            sqs.send_message_batch(QueueUrl=q, Entries=entries)


def load_phase(
    url: str, queues: int, per_queue: int, seconds: float, metrics: str
) -> dict[str, Any]:
    names = [f"q{i}" for i in range(queues)]
    urls = install(url, "load-", names, cycle=1)
    preload(url, [urls[f"{n}-delay.fifo"] for n in names], per_queue)
    stopped = run_worker(
        env_for(
            url,
            "load-",
            max_native_delay_seconds=1,
            wait_time_seconds=1,
            concurrency=4,
            stats_interval_seconds=5,
            metrics=metrics,
        ),
        names,
        seconds,
    )
    processed = sum(v for k, v in stopped["messages"].items() if k.startswith("delay."))
    t0 = datetime.fromisoformat(stopped["started_at"])
    t1 = datetime.fromisoformat(stopped["stopped_at"])
    elapsed = (t1 - t0).total_seconds()
    return {
        "messages_processed": processed,
        "seconds": round(elapsed, 2),
        "messages_per_second": round(processed / elapsed, 1),
        "requests": stopped["requests"],
        "requests_per_message_cycle": round(stopped["requests_total"] / max(1, processed), 3),
    }


def naive_phase(url: str, queues: int, per_queue: int, seconds: float) -> dict[str, Any]:
    names = [f"n{i}" for i in range(queues)]
    urls = install(url, "naive-", names, cycle=1)
    fifo = [urls[f"{n}-delay.fifo"] for n in names]
    preload(url, fifo, per_queue)
    sqs = client(url)
    processed = requests = 0
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    while time.monotonic() < deadline:
        for q in fifo:
            resp = sqs.receive_message(
                QueueUrl=q,
                MaxNumberOfMessages=1,
                WaitTimeSeconds=0,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            )
            requests += 1
            for m in resp.get("Messages", []):
                sqs.send_message(
                    QueueUrl=q,
                    MessageBody=m["Body"],
                    MessageAttributes=FAR,
                    MessageGroupId=uuid.uuid4().hex,
                    MessageDeduplicationId=uuid.uuid4().hex,
                )
                sqs.delete_message(QueueUrl=q, ReceiptHandle=m["ReceiptHandle"])
                requests += 2
                processed += 1
    elapsed = time.monotonic() - started
    return {
        "messages_processed": processed,
        "seconds": round(elapsed, 2),
        "messages_per_second": round(processed / elapsed, 1),
        "requests_per_message_cycle": round(requests / max(1, processed), 3),
    }


def raw_phase(url: str, queues: int, per_queue: int, seconds: float) -> dict[str, Any]:
    names = [f"r{i}" for i in range(queues)]
    urls = install(url, "raw-", names, cycle=1)
    fifo = [urls[f"{n}-delay.fifo"] for n in names]
    preload(url, fifo, per_queue)
    processed = 0

    async def loop(c: Any, q: str, deadline: float) -> None:
        nonlocal processed
        while time.monotonic() < deadline:
            resp = await c.receive_message(QueueUrl=q, MaxNumberOfMessages=10, WaitTimeSeconds=1)
            msgs = resp.get("Messages", [])
            if not msgs:
                continue
            await c.send_message_batch(
                QueueUrl=q,
                Entries=[
                    {
                        "Id": str(i),
                        "MessageBody": m["Body"],
                        "MessageGroupId": uuid.uuid4().hex,
                        "MessageDeduplicationId": uuid.uuid4().hex,
                    }
                    for i, m in enumerate(msgs)
                ],
            )
            await c.delete_message_batch(
                QueueUrl=q,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)
                ],
            )
            processed += len(msgs)

    async def main() -> float:
        async with aioboto3.Session().client(
            "sqs",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        ) as c:
            started = time.monotonic()
            deadline = started + seconds
            await asyncio.gather(*(loop(c, q, deadline) for q in fifo for _ in range(4)))
            return time.monotonic() - started

    elapsed = asyncio.run(main())
    return {
        "messages_processed": processed,
        "seconds": round(elapsed, 2),
        "messages_per_second": round(processed / elapsed, 1),
    }


def lateness_phase(url: str, count: int, cycle: int, metrics: str) -> dict[str, Any]:
    names = [f"l{i}" for i in range(4)]
    urls = install(url, "late-", names, cycle=cycle)
    s = Settings(
        endpoint_url=url, region="us-east-1", queue_prefix="late-", max_native_delay_seconds=cycle
    )
    sender = Sender(s, client=client(url))
    due: dict[str, float] = {}
    delays = [cycle + 1 + (i * 7919 % (4 * cycle * 1000)) / 1000 for i in range(count)]
    env = env_for(
        url,
        "late-",
        max_native_delay_seconds=cycle,
        wait_time_seconds=1,
        stats_interval_seconds=5,
        metrics=metrics,
    )
    results: list[float] = []
    deliveries: dict[str, int] = {}
    horizon = max(delays) + 15
    worker = threading.Thread(target=run_worker, args=(env, names, horizon), daemon=True)
    worker.start()
    for i, d in enumerate(delays):
        body = f"late {i}"
        due[body] = time.time() + d
        sender.send(names[i % 4], body, delay=d)
    sqs = client(url)
    deadline = time.monotonic() + horizon
    while len(deliveries) < count and time.monotonic() < deadline:
        for n in names:
            resp = sqs.receive_message(QueueUrl=urls[n], MaxNumberOfMessages=10, WaitTimeSeconds=0)
            now = time.time()
            for m in resp.get("Messages", []):
                deliveries[m["Body"]] = deliveries.get(m["Body"], 0) + 1
                if deliveries[m["Body"]] == 1:
                    results.append(now - due[m["Body"]])
                sqs.delete_message(QueueUrl=urls[n], ReceiptHandle=m["ReceiptHandle"])
        time.sleep(0.02)
    worker.join()
    return {
        "messages": count,
        "delivered": len(deliveries),
        "cycle_seconds": cycle,
        "delay_range_seconds": [round(min(delays), 1), round(max(delays), 1)],
        "duplicates": sum(deliveries.values()) - len(deliveries),
        "early": sum(1 for x in results if x < 0),
        "lateness_p50_s": round(percentile(results, 0.5), 3),
        "lateness_p99_s": round(percentile(results, 0.99), 3),
        "lateness_max_s": round(max(results, default=float("nan")), 3),
    }


ROLE = "arn:aws:iam::123456789012:role/sqsdelay-scheduler"


def parking_phase(url: str, count: int) -> dict[str, Any]:
    """Each variant sends `count` messages delayed 14 s (7 cycles of 2 s) to its own queue
    and runs the worker until they are delivered (or a deadline)."""
    cycle, delay = 2, 14
    parking = {"parking": "scheduler", "scheduler_role_arn": ROLE, "park_after_seconds": 6}
    out: dict[str, Any] = {"cycle_seconds": cycle, "delay_seconds": delay, "messages": count}
    for variant, sender_parks, worker_parks in (
        ("unparked", False, False),
        ("parked_by_worker", False, True),
        ("parked_at_send", True, True),
    ):
        prefix = f"park-{variant}-"
        urls = install(url, prefix, ["p"], cycle=cycle)
        base = Settings(
            endpoint_url=url,
            region="us-east-1",
            queue_prefix=prefix,
            max_native_delay_seconds=cycle,
        )
        if worker_parks:
            installer = Installer(Settings(**{**base.model_dump(), **parking}), client=client(url))
            installer.schedule_group(["p"])
        sender_settings = Settings(**{**base.model_dump(), **(parking if sender_parks else {})})
        sender = Sender(sender_settings, client=client(url))
        sent_calls: list[str] = []

        def record(model: Any, calls: list[str] = sent_calls, **_: Any) -> None:
            calls.append(model.name)

        for c in (sender._client, sender.scheduler):
            c.meta.events.register("before-parameter-build", record)
        env = env_for(
            url,
            prefix,
            max_native_delay_seconds=cycle,
            wait_time_seconds=20,
            concurrency=1,
            **(parking if worker_parks else {}),
        )
        started = time.time()
        for i in range(count):
            sender.send("p", f"m{i}", delay=delay)
        sqs = client(url)
        results: dict[str, Any] = {}

        def drain(env: dict[str, str] = env, results: dict[str, Any] = results) -> None:
            results["stats"] = run_worker(env, ["p"], delay + 12)

        worker = threading.Thread(target=drain, daemon=True)
        worker.start()
        got: dict[str, float] = {}
        deadline = time.monotonic() + delay + 12
        while time.monotonic() < deadline:
            resp = sqs.receive_message(QueueUrl=urls["p"], MaxNumberOfMessages=10)
            for m in resp.get("Messages", []):
                got.setdefault(m["Body"], time.time())
                sqs.delete_message(QueueUrl=urls["p"], ReceiptHandle=m["ReceiptHandle"])
            time.sleep(0.05)
        worker.join()
        stats = results["stats"]
        requests = dict(stats["requests"])
        for name in sent_calls:
            requests[f"sender.{name}"] = requests.get(f"sender.{name}", 0) + 1
        schedules = sum(n for k, n in requests.items() if k.endswith("CreateSchedule"))
        scheduler_calls = sum(n for k, n in requests.items() if "Schedule" in k)
        parked = stats["messages"].get("delay.parked", 0) + (
            sum(1 for c in sent_calls if c == "CreateSchedule")
        )
        # Scheduler's own SendMessage back to the delay queue: one per parked message.
        sqs_total = sum(n for k, n in requests.items() if "Schedule" not in k) + parked
        final_hop = requests.get("ReceiveMessage", 0) / max(
            1, stats["messages"].get("delay.handed_over", 1)
        )
        out[variant] = {
            "delivered": len(got),
            "lost": count - len(got),
            "early": sum(1 for t in got.values() if t < started + delay),
            "requests": requests,
            "sqs_requests_per_message": round(sqs_total / count, 2),
            "scheduler_calls_per_message": round(scheduler_calls / count, 2),
            "schedules_per_message": round(schedules / count, 2),
            "sends_and_deletes_per_message": round(
                sum(
                    n
                    for k, n in requests.items()
                    if k.endswith(("SendMessage", "SendMessageBatch", "DeleteMessageBatch"))
                )
                / count,
                2,
            ),
            "receives_per_handed_over_message": round(final_hop, 2),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument(
        "--per-queue",
        type=int,
        default=0,
        help="backlog per queue (default: 100 on moto, 400 on fauxqs)",
    )
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--lateness-messages", type=int, default=200)
    parser.add_argument("--parking-messages", type=int, default=50)
    parser.add_argument(
        "--metrics",
        choices=["emf", "off"],
        default="emf",
        help="the worker's SQSDELAY_METRICS (EMF lines go to /dev/null, flushed every 5 s)",
    )
    parser.add_argument(
        "--only", choices=["parking"], help="run only this phase (moto): quicker to repeat"
    )
    parser.add_argument(
        "--emulator",
        choices=["moto", "fauxqs", "both"],
        default="both" if fauxqs_installed() else "moto",
    )
    args = parser.parse_args()
    logs.configure("json", "WARNING")  # stdout is for the JSON result only
    if args.only == "parking":
        emulator = EmulatorProcess("moto")
        try:
            print(json.dumps(parking_phase(emulator.url, args.parking_messages), indent=2))
        finally:
            emulator.stop()
        return
    kinds = ["moto", "fauxqs"] if args.emulator == "both" else [args.emulator]
    print(json.dumps({kind: bench(kind, args) for kind in kinds}, indent=2))


def bench(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    emulator = EmulatorProcess(kind)
    # moto's request cost grows with queue depth, so it gets a shallow backlog
    per_queue = args.per_queue or (100 if kind == "moto" else 400)
    try:
        out: dict[str, Any] = {"emulator": f"{emulator.name} (separate process, 127.0.0.1)"}
        out["metrics"] = args.metrics
        out["worker"] = load_phase(emulator.url, args.queues, per_queue, args.seconds, args.metrics)
        out["naive_loop"] = naive_phase(emulator.url, args.queues, per_queue, args.seconds)
        out["raw_batch_capacity"] = raw_phase(emulator.url, args.queues, per_queue, args.seconds)
        out["lateness"] = lateness_phase(
            emulator.url, args.lateness_messages, cycle=2, metrics=args.metrics
        )
        if kind == "moto":
            out["parking"] = parking_phase(emulator.url, args.parking_messages)
    finally:
        emulator.stop()
    w = out["worker"]["messages_per_second"]
    out["requests_per_message_cycle"] = out["worker"]["requests_per_message_cycle"]
    out["speedup_vs_naive"] = round(w / max(0.1, out["naive_loop"]["messages_per_second"]), 2)
    out["fraction_of_raw_capacity"] = round(
        w / max(0.1, out["raw_batch_capacity"]["messages_per_second"]), 2
    )
    return out


if __name__ == "__main__":
    main()
