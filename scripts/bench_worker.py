#!/usr/bin/env python3
"""Worker benchmark against the SQS emulator; prints one JSON object.

- load: delay queues with a backlog and a 1 s cycle; the worker runs for a while and its own
  request counters give requests per message per cycle (bar: <= 0.35) and throughput;
- naive: a one-message-at-a-time boto3 loop (receive 1, send, delete) on the same server;
- raw: the emulator's own batch capacity (receive 10 with the worker's attributes, send them
  on in a batch, delete batch, no logic);
- lateness: multi-cycle delays through the real worker; p50/p99/max and early deliveries;
- burst (fauxqs only): 50,000 messages over 8 destinations, all due within the same 60 s,
  loaded into the delay queues ahead of time; hand-over rate against the raw capacity, lateness,
  early/lost/duplicates, the worker's peak RSS and CPU per 1,000 messages against the raw loop's
  (`--only burst` also runs the raw loop on the worker's client settings). With
  `--short-batches K` the worker reaches fauxqs through a proxy that answers each delay-queue
  receive with 1..K messages, as SQS does (docs/short-batches.md); the issue's case is
  `--only burst --short-batches 3 --burst-messages 300 --burst-destinations 1
  --burst-window 1`;
- parking (moto only: it has Scheduler's API, and the emulator fires the schedules): one long
  delay per message, unparked, parked by the worker and parked at send, in the same run:
  SQS requests and Scheduler calls per message, early and lost messages;
- registry (moto only: it has DynamoDB): the same messages with SQSDELAY_REGISTRY off and
  dynamodb; the worker's SQS and DynamoDB requests per hop and per message, the sender's.

    .venv/bin/python scripts/bench_worker.py [--queues 8] [--per-queue 100] [--seconds 20]
        [--metrics emf|off]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from benchkit import (
    EmulatorProcess,
    async_client,
    client,
    env_for,
    fauxqs_installed,
    peak_rss_mib,
    percentile,
    run_worker,
    start_worker,
)
from botocore.config import Config

from sqsdelay import logs
from sqsdelay.aws.clients import client_kwargs
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Message, Sender
from sqsdelay.core import wire_format
from sqsdelay.core.received import SYSTEM_ATTRIBUTES
from sqsdelay.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.faultproxy import FaultProxy

FAR = {wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": "100000000"}}


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


def raw_phase(
    url: str, queues: int, per_queue: int, seconds: float, config: Config | None = None
) -> dict[str, Any]:
    """A plain batch loop (receive, send, delete) on a default aioboto3 client, or on `config`;
    the emulator's raw batch capacity, and the CPU the worker is compared with."""
    prefix = "raw-" if config is None else "rawc-"
    names = [f"r{i}" for i in range(queues)]
    urls = install(url, prefix, names, cycle=1)
    fifo = [urls[f"{n}-delay.fifo"] for n in names]
    preload(url, fifo, per_queue)
    processed = 0

    async def loop(c: Any, q: str, deadline: float) -> None:
        nonlocal processed
        while time.monotonic() < deadline:
            # the worker's calls: its attributes received and passed on, without its logic
            resp = await c.receive_message(
                QueueUrl=q,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=1,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=list(SYSTEM_ATTRIBUTES),
            )
            msgs = resp.get("Messages", [])
            if not msgs:
                continue
            await c.send_message_batch(
                QueueUrl=q,
                Entries=[
                    {
                        "Id": str(i),
                        "MessageBody": m["Body"],
                        "MessageAttributes": m.get("MessageAttributes", {}),
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
        async with async_client(url, **({} if config is None else {"config": config})) as c:
            started = time.monotonic()
            deadline = started + seconds
            await asyncio.gather(*(loop(c, q, deadline) for q in fifo for _ in range(4)))
            return time.monotonic() - started

    cpu = time.process_time()
    elapsed = asyncio.run(main())
    cpu = time.process_time() - cpu
    return {
        "messages_processed": processed,
        "seconds": round(elapsed, 2),
        "messages_per_second": round(processed / elapsed, 1),
        "cpu_seconds_per_1000_messages": round(cpu / max(1, processed) * 1000, 3),
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
    delivered = threading.Event()  # the worker stops once all are in, or at the horizon
    worker = threading.Thread(target=run_worker, args=(env, names, horizon, delivered), daemon=True)
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
    delivered.set()
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


BURST_CYCLE = 60  # every burst message is within one cycle of due: each is moved once
BURST_WINDOW = 60  # all due within this many seconds


async def preload_burst(url: str, queue_urls: list[str], dues_ms: list[int]) -> None:
    """The burst, straight into the delay queues as a sender would have sent it (the delay
    attribute and sqsdelay.DueAt), in due order, spread round-robin over the queues."""
    batches: list[tuple[str, list[dict[str, Any]]]] = []
    for start in range(0, len(dues_ms), 10):
        entries = [
            {
                "Id": str(i),
                "MessageBody": f"burst {start + i}",
                "MessageAttributes": {
                    wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": "200"},
                    wire_format.DUE_AT_ATTRIBUTE: {"DataType": "Number", "StringValue": str(due)},
                },
                "MessageGroupId": uuid.uuid4().hex,
                "MessageDeduplicationId": uuid.uuid4().hex,
            }
            for i, due in enumerate(dues_ms[start : start + 10])
        ]
        batches.append((queue_urls[(start // 10) % len(queue_urls)], entries))

    async with async_client(url) as c:

        async def sender(mine: list[tuple[str, list[dict[str, Any]]]]) -> None:
            for q, entries in mine:
                await c.send_message_batch(QueueUrl=q, Entries=entries)

        await asyncio.gather(*(sender(batches[k::16]) for k in range(16)))


async def drain_burst(
    url: str, queue_urls: list[str], count: int, deadline: float
) -> dict[str, list[float]]:
    """Receive everything from the destinations: when each body was first received, and
    how many times."""
    seen: dict[str, list[float]] = {}
    async with async_client(
        url,
        # One connection per loop: with the default 10, some loops never got one.
        config=Config(max_pool_connections=4 * len(queue_urls)),
    ) as c:

        async def loop(q: str) -> None:
            while len(seen) < count and time.monotonic() < deadline:
                resp = await c.receive_message(
                    QueueUrl=q, MaxNumberOfMessages=10, WaitTimeSeconds=1
                )
                now = time.time()
                msgs = resp.get("Messages", [])
                for m in msgs:
                    seen.setdefault(m["Body"], []).append(now)
                if msgs:
                    await c.delete_message_batch(
                        QueueUrl=q,
                        Entries=[
                            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                            for i, m in enumerate(msgs)
                        ],
                    )

        await asyncio.gather(*(loop(q) for q in queue_urls for _ in range(2)))
    return seen


def _proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def burst_phase(
    url: str,
    count: int,
    raw: dict[str, Any] | None,
    cycle: int = BURST_CYCLE,
    *,
    destinations: int = 8,
    window: float | None = None,
    short_batches: int = 0,
    latency_ms: float = 0,
    otel: str | None = None,
    lead: float | None = None,
) -> dict[str, Any]:
    """`count` messages over `destinations`, all due within the same `window` seconds (60 s
    at the default cycle), loaded into the delay queues while no worker runs; the worker
    starts as the first one falls due and has to hand over the lot. When each one became
    visible comes from the worker's own `delay.handed_over` events (logged as each send's
    answer arrives: the time plus its DelaySeconds); consumers drain the destinations to find
    early, lost and duplicated messages (their receive times also bound the lateness from
    above, lag included). `short_batches` K: the worker's receives bring 1..K messages.
    `otel`: "sdk", the worker traces with OpenTelemetry's SDK (its spans dropped, traced.py);
    "off", SQSDELAY_OTEL=off; None, as installed (with opentelemetry-api and no SDK, the
    worker makes its spans on the API's no-op tracer)."""
    names = [f"b{i}" for i in range(destinations)]
    window = BURST_WINDOW * cycle / BURST_CYCLE if window is None else window
    urls = install(url, "burst-", names, cycle=cycle)
    # The preload has `lead` seconds (half a cycle unless asked), so that all are visible
    # by then (the delay queue's own delay is a cycle).
    t0 = time.time() + cycle + (cycle / 2 if lead is None else lead)
    dues_ms = [int((t0 + window * i / count) * 1000) for i in range(count)]
    loading = time.monotonic()
    asyncio.run(preload_burst(url, [urls[f"{n}-delay.fifo"] for n in names], dues_ms))
    preload_seconds = time.monotonic() - loading
    if time.time() + cycle > t0:
        raise SystemExit(
            f"the preload took {preload_seconds:.0f} s: lower --burst-messages or raise "
            "--burst-lead"
        )
    proxy = FaultProxy(url) if short_batches or latency_ms else None
    if proxy is not None:
        if short_batches:
            proxy.short_batches(short_batches)
        proxy.latency(latency_ms)
    env = env_for(
        proxy.url if proxy else url,
        "burst-",
        max_native_delay_seconds=cycle,
        wait_time_seconds=1,
        concurrency=4,
        **({"otel": "off"} if otel == "off" else {}),
    )
    # Start the worker shortly before the burst: its start-up (imports, its first counts)
    # takes a few seconds on a busy machine, and must not count as lateness.
    time.sleep(max(0.0, t0 - 10 - time.time()))
    with tempfile.TemporaryFile("w+") as log:
        proc = start_worker(env, names, log, traced=otel == "sdk")
        cpu_start = None
        while cpu_start is None:  # its CPU from when it runs, imports and start-up aside
            time.sleep(0.05)
            log.seek(0)
            if '"worker.started"' in log.read():
                cpu_start = _proc_cpu_seconds(proc.pid)
        seen = asyncio.run(
            drain_burst(url, [urls[n] for n in names], count, time.monotonic() + 900)
        )
        cpu = _proc_cpu_seconds(proc.pid) - cpu_start
        peak_rss = peak_rss_mib(proc.pid)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.seek(0)
        events = [json.loads(x) for x in log if x.startswith("{")]
    if proxy is not None:
        proxy.close()
    stopped = next(e for e in events if e["event"] == "worker.stopped")
    spans = next((e["spans"] for e in events if e["event"] == "bench.spans"), None)
    moved = sum(n for k, n in stopped["messages"].items() if k.startswith("delay."))
    handed = [e for e in events if e["event"] == "delay.handed_over"]
    sent_at = [datetime.fromisoformat(e["timestamp"]).timestamp() for e in handed]
    visible = [t + e["remaining_seconds"] for t, e in zip(sent_at, handed, strict=True)]
    late = [max(0.0, v - e["due_at_ms"] / 1000) for v, e in zip(visible, handed, strict=True)]
    span = max(sent_at) - min(sent_at) if sent_at else float("nan")
    rate = len(handed) / max(0.001, span)
    due_by_body = {f"burst {i}": due / 1000 for i, due in enumerate(dues_ms)}
    received = [times[0] - due_by_body[body] for body, times in seen.items()]
    capacity = raw["messages_per_second"] if raw else float("nan")
    return {
        "messages": count,
        "destinations": len(names),
        "window_seconds": window,
        "receives": f"1..{short_batches} messages (proxy)" if short_batches else "as served",
        "receives_shortened": proxy.receives_shortened if proxy else 0,
        "otel": otel or "as installed",
        **({"spans_exported": spans} if spans is not None else {}),
        "receives_in_flight_max": proxy.receives_in_flight_max if proxy else 0,
        "added_latency_ms": latency_ms,
        "preload_seconds": round(preload_seconds, 1),
        "first_due_to_last_visible_seconds": round(max(visible) - t0, 2),
        "hand_over_seconds": round(span, 2),
        "hand_over_rate_per_second": round(rate, 1),
        "hand_over_rate_vs_raw_capacity": round(rate / capacity, 2),
        "lateness_p50_s": round(percentile(late, 0.5), 3),
        "lateness_p99_s": round(percentile(late, 0.99), 3),
        "lateness_max_s": round(max(late, default=float("nan")), 3),
        "consumer_lateness_p50_s": round(percentile(received, 0.5), 3),
        "consumer_lateness_p99_s": round(percentile(received, 0.99), 3),
        "early": sum(1 for x in received if x < 0),
        "lost": count - len(seen),
        "duplicates": sum(len(t) - 1 for t in seen.values()),
        "handed_over": len(handed),
        "requeued": stopped["messages"].get("delay.requeued", 0),
        "worker_events": {k: n for k, n in stopped["messages"].items() if "." not in k},
        "worker_requests": stopped["requests"],
        "worker_requests_per_message": round(stopped["requests_total"] / max(1, moved), 3),
        "worker_peak_rss_mib": round(peak_rss, 1),
        "worker_cpu_seconds_per_1000_messages": round(cpu / max(1, moved) * 1000, 3),
        **(
            {
                "raw_loop_cpu_seconds_per_1000_messages": raw["cpu_seconds_per_1000_messages"],
                "cpu_vs_raw_loop": round(
                    cpu / max(1, moved) * 1000 / raw["cpu_seconds_per_1000_messages"], 2
                ),
            }
            if raw
            else {}
        ),
    }


def worker_config() -> Config:
    """The botocore Config of the worker's SQS clients."""
    settings = Settings(endpoint_url="http://127.0.0.1:1", region="us-east-1")
    config: Config = client_kwargs(settings, validate=False)["config"]
    return config


ROLE = "arn:aws:iam::123456789012:role/sqsdelay-scheduler"
PARK_BOUNDS = (1, 5, 10, 20, 50)


def parking_speed_phase(url: str, count: int) -> dict[str, Any]:
    """Parks per second with SQSDELAY_PARK_CONCURRENCY 1 (one CreateSchedule after another,
    as before) up to 50: the sender's send_batch, and the worker parking a backlog of
    long delays from its delay queue (in-process, against the emulator in its own process)."""
    from sqsdelay.aws.sender import Message
    from sqsdelay.aws.worker import WorkerThread

    out: dict[str, Any] = {"messages": count, "sender": {}, "worker": {}}
    for bound in PARK_BOUNDS:
        prefix = f"speed{bound}-"
        install(url, prefix, ["p"], cycle=2)
        s = Settings(
            endpoint_url=url,
            region="us-east-1",
            queue_prefix=prefix,
            max_native_delay_seconds=2,
            parking="scheduler",
            scheduler_role_arn=ROLE,
            park_after_seconds=6,
            park_concurrency=bound,
            schedule_group=f"speed{bound}",
            wait_time_seconds=1,
            metrics="off",  # stdout is for the JSON result
        )
        Installer(s, client=client(url)).schedule_group(["p"])
        sender = Sender(s, client=client(url))
        started = time.monotonic()
        sender.send_batch("p", [Message(f"s{i}", delay=3 * 86_400) for i in range(count)])
        out["sender"][str(bound)] = round(count / (time.monotonic() - started), 1)
        # The worker: the same number of long delays that arrive unparked (the sender without
        # parking), each parked by the worker on its first pass.
        plain = Sender(s.model_copy(update={"parking": "off"}), client=client(url))
        plain.send_batch("p", [Message(f"w{i}", delay=3 * 86_400) for i in range(count)])
        time.sleep(2)  # the delay queue's 2 s queue delay
        with WorkerThread(s, ["p"]) as running:
            started = time.monotonic()
            while running.worker.stats.events["delay.parked"] < count:
                if time.monotonic() - started > 300:
                    raise SystemExit(f"the worker parked only {running.worker.stats.events}")
                time.sleep(0.02)
            out["worker"][str(bound)] = round(count / (time.monotonic() - started), 1)
    return out


def parking_phase(url: str, count: int, wait_time_seconds: int = 20) -> dict[str, Any]:
    """Each variant sends `count` messages delayed 14 s (7 cycles of 2 s) to its own queue
    and runs the worker until they are delivered (or a deadline). The worker long-polls as
    in production (20 s), and a stop waits for its poll in progress: a smoke run shortens
    it."""
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
        # the sender's clients, given so that their calls can be counted
        sqs, scheduler = client(url), client(url, "scheduler")
        sender = Sender(sender_settings, client=sqs, scheduler=scheduler)
        sent_calls: list[str] = []

        def record(model: Any, calls: list[str] = sent_calls, **_: Any) -> None:
            calls.append(model.name)

        for c in (sqs, scheduler):
            c.meta.events.register("before-parameter-build", record)
        env = env_for(
            url,
            prefix,
            max_native_delay_seconds=cycle,
            wait_time_seconds=wait_time_seconds,
            concurrency=1,
            **(parking if worker_parks else {}),
        )
        started = time.time()
        for i in range(count):
            sender.send("p", f"m{i}", delay=delay)
        sqs = client(url)
        results: dict[str, Any] = {}

        delivered = threading.Event()  # the worker stops once all are in, or at the deadline

        def drain(
            env: dict[str, str] = env,
            results: dict[str, Any] = results,
            delivered: threading.Event = delivered,
        ) -> None:
            results["stats"] = run_worker(env, ["p"], delay + 12, delivered)

        worker = threading.Thread(target=drain, daemon=True)
        worker.start()
        got: dict[str, float] = {}
        deadline = time.monotonic() + delay + 12
        while len(got) < count and time.monotonic() < deadline:
            resp = sqs.receive_message(QueueUrl=urls["p"], MaxNumberOfMessages=10)
            for m in resp.get("Messages", []):
                got.setdefault(m["Body"], time.time())
                sqs.delete_message(QueueUrl=urls["p"], ReceiptHandle=m["ReceiptHandle"])
            time.sleep(0.05)
        delivered.set()
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


def registry_phase(url: str, count: int, seconds: float = 40) -> dict[str, Any]:
    """The registry's extra requests: `count` messages with ids and 20 s delays over a 1 s
    cycle, sent in batches and moved by the worker process, once with the registry off and
    once on."""
    import boto3

    out: dict[str, Any] = {"messages": count, "delay_seconds": 20, "cycle_seconds": 1}
    for mode in ("off", "dynamodb"):
        prefix = f"reg-{mode}-"
        table = f"{prefix}scheduled"
        common = {"max_native_delay_seconds": 1, "registry": mode, "registry_table": table}
        s = Settings(endpoint_url=url, region="us-east-1", queue_prefix=prefix, **common)
        sqs = client(url)
        installer = Installer(s, client=sqs)
        urls = {r.spec.name.removeprefix(prefix): str(r.url) for r in installer.run(["orders"])}
        db = boto3.client(
            "dynamodb",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
        if mode == "dynamodb":
            installer.registry_table(["orders"], dynamodb=db)
        sender_calls: list[str] = []
        for c in (sqs, db):
            c.meta.events.register(
                "before-parameter-build",
                lambda model, calls=sender_calls, **_: calls.append(model.name),
            )
        sender = Sender(s, client=sqs, dynamodb=db)
        for start in range(0, count, 10):
            batch = [Message(f"m{i}", delay=20, id=f"m{i}") for i in range(start, start + 10)]
            sender.send_batch("orders", batch)
        sent_with = list(sender_calls)
        env = env_for(url, prefix, wait_time_seconds=1, concurrency=4, **common)
        stopped = run_worker(env, ["orders"], seconds)
        delivered = 0
        while got := sqs.receive_message(QueueUrl=urls["orders"], MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            delivered += len(got)
        requests = stopped["requests"]
        dynamo = {api: n for api, n in requests.items() if api in ("BatchGetItem", "UpdateItem")}
        moved = stopped["messages"].get("delay.requeued", 0)
        moved += stopped["messages"].get("delay.handed_over", 0)
        sqs_total = stopped["requests_total"] - sum(dynamo.values())
        out[mode] = {
            "delivered": delivered,
            "hops": moved,
            "worker_sqs_requests_per_hop": round(sqs_total / max(1, moved), 3),
            "worker_registry_requests": dynamo,
            "worker_registry_requests_per_hop": round(sum(dynamo.values()) / max(1, moved), 3),
            "worker_registry_requests_per_message": round(sum(dynamo.values()) / count, 3),
            "sender_requests_per_message": {
                api: round(sent_with.count(api) / count, 3) for api in sorted(set(sent_with))
            },
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
        "--burst-messages",
        type=int,
        default=50_000,
        help="messages in the burst phase, all due within 60 s (0: skip it)",
    )
    parser.add_argument(
        "--burst-cycle",
        type=int,
        default=BURST_CYCLE,
        help="the burst's cycle and window, in seconds (tiny for a smoke run)",
    )
    parser.add_argument(
        "--burst-destinations", type=int, default=8, help="destinations the burst is spread over"
    )
    parser.add_argument(
        "--burst-window",
        type=float,
        help="seconds within which the burst is due (default: the cycle's share of 60 s)",
    )
    parser.add_argument(
        "--short-batches",
        type=int,
        default=0,
        metavar="K",
        help="the burst's worker receives 1..K messages a receive (1-9), as from SQS",
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0,
        help="the burst's worker requests reach the emulator this much later (SQS's round "
        "trip: about 10-30 ms; loopback: 1-2)",
    )
    parser.add_argument(
        "--burst-lead",
        type=float,
        help="seconds the burst's preload may take (default: half the cycle); a busy "
        "machine at nice 10 took 33-123 s for 50,000",
    )
    parser.add_argument(
        "--otel",
        nargs="?",
        const="sdk",
        choices=["sdk", "off"],
        help="the burst's worker with OpenTelemetry's SDK, its spans dropped (--otel), or "
        "with SQSDELAY_OTEL=off (--otel off); without it, as installed: opentelemetry-api "
        "without an SDK makes no-op spans",
    )
    parser.add_argument(
        "--parking-wait-time-seconds",
        type=int,
        default=20,
        help="the parking phase's long poll (each variant's stop waits for it)",
    )
    parser.add_argument(
        "--metrics",
        choices=["emf", "off"],
        default="emf",
        help="the worker's SQSDELAY_METRICS (EMF lines go to /dev/null, flushed every 5 s)",
    )
    parser.add_argument(
        "--only",
        choices=["parking", "parking-speed", "burst", "lateness", "registry"],
        help="run only this phase (parking, registry: moto, --parking-messages of them; "
        "burst, with the raw capacity it is compared with, and lateness: fauxqs): quicker to "
        "repeat",
    )
    parser.add_argument(
        "--emulator",
        choices=["moto", "fauxqs", "both"],
        default="both" if fauxqs_installed() else "moto",
    )
    args = parser.parse_args()
    logs.configure("json", "WARNING")  # stdout is for the JSON result only
    shape = burst_shape(args)
    if args.only in ("parking", "parking-speed", "registry"):
        emulator = EmulatorProcess("moto")
        try:
            phase = {
                "parking": lambda url, n: parking_phase(url, n, args.parking_wait_time_seconds),
                "parking-speed": parking_speed_phase,
                "registry": registry_phase,
            }[args.only]
            print(json.dumps(phase(emulator.url, args.parking_messages), indent=2))
        finally:
            emulator.stop()
        return
    if args.only in ("burst", "lateness"):
        emulator = EmulatorProcess("fauxqs")
        try:
            if args.only == "lateness":
                out = lateness_phase(emulator.url, args.lateness_messages, 2, args.metrics)
            else:
                raw = raw_phase(emulator.url, args.queues, 400, args.seconds)
                # the same loop on the worker's client settings (no validation, fixed
                # User-Agent): what is left is the worker's own cost
                lean = raw_phase(emulator.url, args.queues, 400, args.seconds, worker_config())
                burst = burst_phase(
                    emulator.url, args.burst_messages, raw, args.burst_cycle, **shape
                )
                burst["cpu_vs_raw_loop_on_worker_client"] = round(
                    burst["worker_cpu_seconds_per_1000_messages"]
                    / lean["cpu_seconds_per_1000_messages"],
                    2,
                )
                out = {
                    "raw_batch_capacity": raw,
                    "raw_loop_on_worker_client": lean,
                    "burst": burst,
                }
            print(json.dumps(out, indent=2))
        finally:
            emulator.stop()
        return
    kinds = ["moto", "fauxqs"] if args.emulator == "both" else [args.emulator]
    print(json.dumps({kind: bench(kind, args) for kind in kinds}, indent=2))


def burst_shape(args: argparse.Namespace) -> dict[str, Any]:
    if not 0 <= args.short_batches <= 9:
        raise SystemExit("--short-batches takes 1..9 (0: receives as the emulator serves them)")
    return {
        "destinations": args.burst_destinations,
        "window": args.burst_window,
        "short_batches": args.short_batches,
        "latency_ms": args.latency_ms,
        "otel": args.otel,
        "lead": args.burst_lead,
    }


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
        if args.burst_messages and kind == "fauxqs":  # moto would take hours for 50,000
            out["burst"] = burst_phase(
                emulator.url,
                args.burst_messages,
                out["raw_batch_capacity"],
                args.burst_cycle,
                **burst_shape(args),
            )
        if kind == "moto":
            out["parking"] = parking_phase(
                emulator.url, args.parking_messages, args.parking_wait_time_seconds
            )
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
