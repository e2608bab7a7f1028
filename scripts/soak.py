#!/usr/bin/env python3
"""A long run under faults: steady mixed load, cut answers, SIGKILLs and a clock step.

    make bench-deps   # fauxqs, once
    cd scripts && ../.venv/bin/python soak.py [--minutes 60] [--rate 4] [--cycle 5]

fauxqs serves SQS; a moto server serves the registry's DynamoDB (fauxqs has none). The
worker process talks to both through one fault proxy that routes by API and loses about
`--cut-share` of the answers (the call took effect, the worker never heard). The worker is
killed with SIGKILL every `--kill-every` seconds and restarted at once; the life running at
half time steps its clock by `--clock-step` seconds halfway through (time-machine, inside
that process only). The load: sends at `--rate` per second over four destinations; a fifth
go straight to the destination with DelaySeconds, the rest loop over the FIFO cycle for up
to `--longest-cycles` (36) cycles; about one in ten looping messages is cancelled and one in
twenty rescheduled later. Parking is off: fauxqs has no EventBridge Scheduler. After the
sending time, the run waits for every message still due, then prints one JSON object.

Lateness beyond seconds is expected only after a kill: a message the killed life had in
hand waits for the visibility its heartbeat extended, or for its registry claim's lease
(docs/registry.md, case 4).

Early: delivered before the due time the soak asked for (or moved to). Duplicates are split
by `docs/registry.md`'s cases: a kill within two seconds of the first delivery (a crash
between the send and its mark, case 5) and hand-over answers lost by the proxy (case 6).
RSS is read from /proc after `--warm-up` seconds of each worker life and before its end.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from benchkit import EmulatorProcess, client, env_for, percentile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.settings import Settings
from tests.support.faultproxy import FaultProxy

PREFIX = "soak-"
TABLE = "soak-scheduled"
DESTINATIONS = ["orders", "billing", "reminders", "sagas"]
DYNAMODB_APIS = {"BatchGetItem", "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query"}

# The worker life: the stepped clock starts in a timer thread, so the step lands while the
# worker is busy (time-machine patches time.time at the C level, for every thread).
WORKER = """
import os, sys, threading, time
at = os.environ.pop("SOAK_CLOCK_STEP_AT", None)
if at is not None:
    import time_machine
    step = float(os.environ.pop("SOAK_CLOCK_STEP_S"))
    def jump():
        time_machine.travel(time.time() + step, tick=True).start()
        print('{"event": "soak.clock_stepped"}', file=sys.stderr, flush=True)
    timer = threading.Timer(float(at), jump)
    timer.daemon = True
    timer.start()
sys.argv = ["sqsdelay", "worker", *sys.argv[1:]]
from sqsdelay.cli import main
main()
"""


@dataclass
class Scheduled:
    destination: str
    due: float
    looping: bool
    cancelled: bool = False
    deliveries: list[float] = field(default_factory=list)


@dataclass
class Life:
    proc: subprocess.Popen[str]
    log: Any
    started: float
    rss_start_mib: float | None = None
    rss_end_mib: float | None = None


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.random = random.Random(args.seed)
        self.sqs_emulator = EmulatorProcess("fauxqs")
        self.moto = EmulatorProcess("moto")
        routes = {b"DynamoDB_": self.moto.url}
        self.faulty = FaultProxy(self.sqs_emulator.url, routes=routes)
        self.clean = FaultProxy(self.sqs_emulator.url, routes=routes)  # the sender's way
        common = {
            "region": "us-east-1",
            "queue_prefix": PREFIX,
            "max_native_delay_seconds": args.cycle,
            "registry": "dynamodb",
            "registry_table": TABLE,
        }
        self.settings = Settings(endpoint_url=self.clean.url, **common)
        self.env = env_for(self.faulty.url, PREFIX, stats_interval_seconds=5, **common)
        self.messages: dict[str, Scheduled] = {}
        self.lock = threading.Lock()
        self.lives: list[Life] = []
        self.kill_times: list[float] = []
        self.stop_consuming = threading.Event()

    # -- set-up ------------------------------------------------------------------------
    def install(self) -> dict[str, str]:
        sqs = client(self.clean.url)
        installer = Installer(self.settings, client=sqs)
        reports = installer.run(DESTINATIONS)
        db = boto3.client(
            "dynamodb",
            endpoint_url=self.clean.url,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
        installer.registry_table(DESTINATIONS, dynamodb=db)
        self.sender = Sender(self.settings, client=sqs, dynamodb=db)
        return {r.spec.name.removeprefix(PREFIX): str(r.url) for r in reports}

    # -- the worker's lives -----------------------------------------------------------
    def start_worker(self, step_at: float | None) -> None:
        env = dict(self.env)
        if step_at is not None:
            env["SOAK_CLOCK_STEP_AT"] = str(step_at)
            env["SOAK_CLOCK_STEP_S"] = str(self.args.clock_step)
        log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (kept for the life; read at the end)
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, *DESTINATIONS],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
        )
        self.lives.append(Life(proc, log, time.monotonic()))

    def kill_worker(self) -> None:
        life = self.lives[-1]
        life.rss_end_mib = rss_mib(life.proc.pid)
        life.proc.send_signal(signal.SIGKILL)
        life.proc.wait(timeout=30)
        self.kill_times.append(time.time())

    def sample_rss(self) -> None:
        life = self.lives[-1]
        if life.rss_start_mib is None and time.monotonic() - life.started >= self.args.warm_up:
            life.rss_start_mib = rss_mib(life.proc.pid)

    # -- the load ----------------------------------------------------------------------
    def send_one(self) -> tuple[str, Scheduled]:
        cycle, longest = self.args.cycle, self.args.longest_cycles
        kind = self.random.random()
        if kind < 0.2:
            delay = self.random.uniform(0.5, cycle)
        elif kind < 0.8:
            delay = self.random.uniform(cycle + 1, min(8, longest) * cycle)
        else:
            delay = self.random.uniform(min(8, longest) * cycle, longest * cycle)
        destination = self.random.choice(DESTINATIONS)
        message_id = uuid.uuid4().hex
        sent_at = time.time()
        self.sender.send(destination, message_id, delay=delay, id=message_id)
        entry = Scheduled(destination, sent_at + delay, looping=delay > cycle)
        with self.lock:
            self.messages[message_id] = entry
        return message_id, entry

    def cancel(self, message_id: str) -> None:
        entry = self.messages[message_id]
        with self.lock:  # marked first: the consumer may see the delivery before the answer
            entry.cancelled = True
        outcome = self.sender.cancel(entry.destination, message_id)
        with self.lock:
            entry.cancelled = outcome == "cancelled"

    def reschedule(self, message_id: str, later: float) -> None:
        entry = self.messages[message_id]
        new_delay = max(1.0, entry.due - time.time()) + later
        outcome, due_ms = self.sender.reschedule(entry.destination, message_id, delay=new_delay)
        if outcome == "rescheduled":
            with self.lock:
                entry.due = due_ms / 1000

    # -- the destinations' consumer ------------------------------------------------------
    def consume(self, url: str) -> None:
        sqs = client(self.sqs_emulator.url)
        while not self.stop_consuming.is_set():
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
            now = time.time()
            messages = got.get("Messages", [])
            with self.lock:
                for m in messages:
                    self.messages[m["Body"]].deliveries.append(now)
            if messages:
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(messages)
                    ],
                )

    def outstanding(self) -> int:
        with self.lock:
            return sum(1 for e in self.messages.values() if not e.cancelled and not e.deliveries)

    # -- the run -----------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        args = self.args
        urls = self.install()
        consumers = [
            threading.Thread(target=self.consume, args=(urls[d],), daemon=True)
            for d in DESTINATIONS
        ]
        for t in consumers:
            t.start()
        self.faulty.cut_responses(args.cut_share, seed=args.seed)
        start = time.monotonic()
        send_until = start + args.minutes * 60
        step_time = start + args.minutes * 30
        stepped = False
        events: list[tuple[float, int, str, str, float]] = []
        counter = 0
        sent = 0
        next_kill = start + args.kill_every
        self.start_worker(None)
        drain_deadline = send_until + args.longest_cycles * args.cycle + args.drain_seconds
        while True:
            now = time.monotonic()
            if now < send_until and sent < (now - start) * args.rate:
                message_id, entry = self.send_one()
                sent += 1
                delay = entry.due - time.time()
                if entry.looping and delay > 3 * args.cycle:
                    draw = self.random.random()
                    at = now + self.random.uniform(0.2, 0.8) * delay
                    if draw < 0.1:
                        heapq.heappush(events, (at, counter, "cancel", message_id, 0.0))
                    elif draw < 0.15:
                        later = self.random.uniform(5, 30)
                        heapq.heappush(events, (at, counter, "reschedule", message_id, later))
                    counter += 1
                continue
            while events and events[0][0] <= now:
                _, _, kind, message_id, later = heapq.heappop(events)
                if kind == "cancel":
                    self.cancel(message_id)
                else:
                    self.reschedule(message_id, later)
            if now >= next_kill:
                self.kill_worker()
                next_kill = now + args.kill_every
                step_at = None
                if not stepped and step_time < next_kill:
                    # Halfway through the life that holds half time: the stepped clock
                    # then runs for half a life, not for the instant before a kill.
                    step_at, stepped = args.kill_every / 2, True
                self.start_worker(step_at)
            self.sample_rss()
            if now >= send_until and (self.outstanding() == 0 or now >= drain_deadline):
                break
            time.sleep(0.05)
        time.sleep(2)  # the last hand-overs' copies, if any, reach the consumer
        self.stop_consuming.set()
        return self.report(start, sent)

    def report(self, start: float, sent: int) -> dict[str, Any]:
        last = self.lives[-1]
        last.rss_end_mib = rss_mib(last.proc.pid)
        last.proc.send_signal(signal.SIGTERM)
        last.proc.wait(timeout=60)
        stats = [self.last_stats(life) for life in self.lives]
        requests: Counter[str] = Counter()
        hops = 0
        for s in stats:
            requests.update(s.get("requests", {}))
            hops += sum(
                s.get("messages", {}).get(k, 0) for k in ("delay.requeued", "delay.handed_over")
            )
        sqs_requests = sum(n for api, n in requests.items() if api not in DYNAMODB_APIS)
        lateness, early, duplicates, cancelled_delivered, lost = [], 0, 0, 0, 0
        by_kill = late_after_kill = 0
        for entry in self.messages.values():
            if entry.cancelled:
                cancelled_delivered += bool(entry.deliveries)
                continue
            if not entry.deliveries:
                lost += 1
                continue
            first = min(entry.deliveries)
            lateness.append(first - entry.due)
            # A kill between a claim and its send holds the message for the claim's lease.
            if first - entry.due > 15 and any(
                entry.due - 60 <= k <= first for k in self.kill_times
            ):
                late_after_kill += 1
            early += first < entry.due
            extra = len(entry.deliveries) - 1
            duplicates += extra
            if extra and any(-2 <= k - first <= 2 for k in self.kill_times):
                by_kill += extra
        lost_answers = self.lost_handover_answers()
        starts = [life.rss_start_mib for life in self.lives if life.rss_start_mib]
        ends = [life.rss_end_mib for life in self.lives if life.rss_start_mib and life.rss_end_mib]
        offsets = [s.get("offset_ms") for s in stats if s.get("offset_ms") is not None]
        steps_seen = sum(self.count_lines(life, '"soak.clock_stepped"') for life in self.lives)
        return {
            "emulator": f"{self.sqs_emulator.name} + moto 5.2.5 (DynamoDB)",
            "minutes": self.args.minutes,
            "seconds": round(time.monotonic() - start, 1),
            "cycle_seconds": self.args.cycle,
            "messages": sent,
            "delivered": sum(1 for e in self.messages.values() if e.deliveries),
            "cancelled": sum(1 for e in self.messages.values() if e.cancelled),
            "lost": lost,
            "early": early,
            "duplicates": duplicates,
            "duplicates_within_2s_of_a_kill": by_kill,
            "handover_entries_with_lost_answers": lost_answers,
            "cancelled_delivered": cancelled_delivered,
            "lateness_p50_s": round(percentile(lateness, 0.5), 3),
            "lateness_p99_s": round(percentile(lateness, 0.99), 3),
            "lateness_max_s": round(max(lateness, default=float("nan")), 3),
            "late_over_15s_after_a_kill": late_after_kill,
            "kills": len(self.kill_times),
            "faults": self.faulty.responses_cut,
            "faulty_requests": self.faulty.requests,
            "clock_step_seconds": self.args.clock_step,
            "clock_steps_seen": steps_seen,
            "rss_start_mib": round(min(starts), 1) if starts else None,
            "rss_end_mib": round(max(ends), 1) if ends else None,
            "lives": [
                {"rss_start_mib": life.rss_start_mib, "rss_end_mib": life.rss_end_mib}
                for life in self.lives
            ],
            "offset_ms_last_per_life": offsets,
            "hops": hops,
            "requests_per_message_cycle": round(sqs_requests / max(1, hops), 3),
            "registry_requests_per_hop": round(
                sum(n for api, n in requests.items() if api in DYNAMODB_APIS) / max(1, hops), 3
            ),
        }

    @staticmethod
    def last_stats(life: Life) -> dict[str, Any]:
        """A life's last `worker.stats` (or `worker.stopped`): its counters are cumulative."""
        life.log.seek(0)
        found: dict[str, Any] = {}
        for line in life.log:
            if line.startswith("{") and ('"worker.stats"' in line or '"worker.stopped"' in line):
                found = json.loads(line)
        return found

    @staticmethod
    def count_lines(life: Life, marker: str) -> int:
        life.log.seek(0)
        return sum(1 for line in life.log if marker in line)

    def lost_handover_answers(self) -> int:
        """Entries of hand-over sends (to a destination, not a delay queue) whose answers the
        proxy cut: each may be delivered twice (docs/registry.md, case 6)."""
        return sum(self.faulty.cut_hand_over_bodies().values())

    def close(self) -> None:
        for proxy in (self.faulty, self.clean):
            proxy.close()
        for emulator in (self.sqs_emulator, self.moto):
            emulator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--rate", type=float, default=4, help="sends per second")
    parser.add_argument("--cycle", type=int, default=5, help="SQSDELAY_MAX_NATIVE_DELAY_SECONDS")
    parser.add_argument(
        "--longest-cycles", type=int, default=36, help="the longest delay, in cycles (2 or more)"
    )
    parser.add_argument("--cut-share", type=float, default=0.10)
    parser.add_argument("--kill-every", type=float, default=180, help="seconds")
    parser.add_argument("--clock-step", type=float, default=30, help="seconds (+ or -)")
    parser.add_argument("--warm-up", type=float, default=30, help="seconds of each life")
    parser.add_argument("--drain-seconds", type=float, default=120)
    parser.add_argument("--seed", type=int, default=1)
    soak = Soak(parser.parse_args())
    try:
        print(json.dumps(soak.run(), indent=2))
    finally:
        soak.close()


if __name__ == "__main__":
    main()
