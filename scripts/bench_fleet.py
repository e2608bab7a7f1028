#!/usr/bin/env python3
"""One worker for a fleet of destinations (`sqsdelay worker --all`); prints one JSON object.

Against fauxqs (its counts are exact, so the counts' lag is set to 1 s) with a compressed
cycle:
- before: every delay queue empty, the idle rule off (the lag setting above the cycle):
  what an idle queue costs when it is long-polled;
- fleet: the same queues with the idle rule on, ACTIVE of them fed with multi-cycle delays
  that a consumer times on arrival (lateness p50/p99, early, lost, duplicates); a new
  destination is installed while the worker runs, with one message: the time from `install`
  to `queue.added` and to its hand-over. Requests per idle queue per hour are the worker's
  GetQueueAttributes (less one configuration check per queue found) and its receives, over
  the queues and the run; the model is 3600 / (cycle - lag - margin) for the idle rule and
  180 for one 20 s long poll at a time, at the test cycle and at 900 s with the default lag.
- fifo: FIFO destinations (`<name>.fifo`), delays from a tenth of a second to three cycles of
  `--fifo-cycle` in 20 message groups: lateness p50/p99 at the destinations (the staging hop
  included), then the same through a TCP proxy that loses `--fifo-cut-share` of the worker's
  answers after the call took effect (tests/support/faultproxy.py), so hand-overs, forwards
  and deletes are retried: duplicates (the deduplication id should leave none), lost, early;
  and, to compare, standard destinations under the same faults.

    cd scripts && ../.venv/bin/python bench_fleet.py [--destinations 1000] [--active 10]
        [--messages 400] [--cycle 90] [--before-seconds 60] [--fifo-messages 300]
        [--fifo-cycle 10] [--fifo-cut-share 0.05] [--fifo-only]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchkit import EmulatorProcess, client, env_for, peak_rss_mib, percentile, start_worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sqsdelay import logs
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.core import idle, quotas
from sqsdelay.settings import Settings
from tests.support.faultproxy import FaultProxy

PREFIX = "fleet-"
LAG = 1  # fauxqs's counts are exact
WORKER_SETTINGS: dict[str, Any] = {"wait_time_seconds": 20, "discovery_interval_seconds": 10}


def settings(url: str, cycle: int, prefix: str = PREFIX) -> Settings:
    return Settings(
        endpoint_url=url, region="us-east-1", queue_prefix=prefix, max_native_delay_seconds=cycle
    )


def install(url: str, cycle: int, names: list[str], prefix: str = PREFIX) -> dict[str, str]:
    reports = Installer(settings(url, cycle, prefix), client=client(url)).run(names)
    return {r.spec.requested: str(r.url) for r in reports if r.spec.role == "destination"}


class Consumer:
    """Short-polls the destination queues (`urls`, which may grow) every 20 ms in a thread:
    each body's arrival times, and its message group where it has one."""

    def __init__(self, url: str, urls: dict[str, str]) -> None:
        self.urls = urls
        self.arrived: dict[str, list[float]] = {}
        self.groups: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(client(url),), daemon=True)
        self._thread.start()

    def _run(self, sqs: Any) -> None:
        while not self._stop.is_set():
            for q in list(self.urls.values()):
                got = sqs.receive_message(
                    QueueUrl=q,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=0,
                    MessageSystemAttributeNames=["MessageGroupId"],
                )
                now = time.time()
                for m in got.get("Messages", []):
                    self.arrived.setdefault(m["Body"], []).append(now)
                    if "MessageGroupId" in m.get("Attributes", {}):
                        self.groups[m["Body"]] = m["Attributes"]["MessageGroupId"]
                    sqs.delete_message(QueueUrl=q, ReceiptHandle=m["ReceiptHandle"])
            time.sleep(0.02)

    def wait_for(self, due: dict[str, float], timeout: float, linger: float = 0) -> None:
        """Until every body of `due` arrived (or `timeout`), then `linger` more; stops."""
        deadline = time.monotonic() + timeout
        while len(self.arrived) < len(due) and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(linger)
        self._stop.set()
        self._thread.join()

    def figures(self, due: dict[str, float], besides: str = "") -> dict[str, Any]:
        """Delivered, lost, duplicates, early and lateness of `due`'s bodies (`besides` is
        left out of the delivered and the lateness, not of the lost)."""
        timed = [b for b in due if b in self.arrived and b != besides]
        late = [self.arrived[b][0] - due[b] for b in timed]
        return {
            "delivered": len(timed),
            "lost": sum(1 for b in due if b not in self.arrived),
            "duplicates": sum(len(v) - 1 for v in self.arrived.values()),
            "early": sum(1 for x in late if x < 0),
            "lateness_p50_s": round(percentile(late, 0.5), 3),
            "lateness_p99_s": round(percentile(late, 0.99), 3),
            "lateness_max_s": round(max(late, default=float("nan")), 3),
        }


class Worker:
    """`sqsdelay worker --all` (or on `queues`) in its own process, its JSON events in a
    temporary file."""

    def __init__(self, env: dict[str, str], queues: tuple[str, ...] = ("--all",)) -> None:
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed by stop()
        self.proc = start_worker(env, list(queues), self.log)

    def events(self) -> list[dict[str, Any]]:
        self.log.seek(0)
        out = [json.loads(x) for x in self.log if x.startswith("{")]
        self.log.seek(0, 2)
        return out

    def wait_for(self, event: str, timeout: float, **fields: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events():
                if e["event"] == event and all(e.get(k) == v for k, v in fields.items()):
                    return e
            time.sleep(0.2)
        raise SystemExit(f"no {event} {fields} within {timeout} s")

    def stop(self) -> tuple[dict[str, Any], float]:
        rss = peak_rss_mib(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=90)
        stopped = next(e for e in self.events() if e["event"] == "worker.stopped")
        started = next(e for e in self.events() if e["event"] == "worker.started")
        seconds = _seconds(stopped["timestamp"]) - _seconds(started["timestamp"])
        self.log.close()
        return {**stopped, "seconds": seconds}, rss


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def idle_rate(stopped: dict[str, Any], queues: int, active: int) -> dict[str, float]:
    """Requests per idle queue per hour: every count check but the one per queue found, and
    the receives of the idle queues (all receives when none is active)."""
    requests = stopped["requests"]
    checks = requests.get("GetQueueAttributes", 0) - queues
    receives = requests.get("ReceiveMessage", 0) if active == 0 else 0
    hours = stopped["seconds"] / 3600
    return {
        "count_checks": round(checks / queues / hours, 1),
        "receives": round(receives / queues / hours, 1),
        "total": round((checks + receives) / queues / hours, 1),
    }


def before_phase(url: str, cycle: int, queues: int, seconds: float) -> dict[str, Any]:
    env = env_for(
        url,
        PREFIX,
        max_native_delay_seconds=cycle,
        idle_counts_lag_seconds=300,  # more than the cycle: the rule is off
        metrics="off",
        wait_time_seconds=WORKER_SETTINGS["wait_time_seconds"],
    )
    worker = Worker(env)
    worker.wait_for("worker.started", 60)
    time.sleep(seconds)
    stopped, rss = worker.stop()
    return {
        "seconds": round(stopped["seconds"], 1),
        "requests_per_idle_queue_hour": idle_rate(stopped, queues, 0),
        "worker_peak_rss_mib": round(rss, 1),
    }


def fleet_phase(
    url: str, cycle: int, names: list[str], active: int, messages: int
) -> dict[str, Any]:
    env = env_for(
        url,
        PREFIX,
        max_native_delay_seconds=cycle,
        idle_counts_lag_seconds=LAG,
        stats_interval_seconds=10,
        metrics="off",
        **WORKER_SETTINGS,
    )
    busy = names[:active]
    urls = install(url, cycle, busy)
    sender = Sender(settings(url, cycle), client=client(url))
    worker = Worker(env)
    worker.wait_for("worker.started", 60)
    due: dict[str, float] = {}
    consumer = Consumer(url, urls)
    # the delays: spread over two cycles after the first, sent over the first cycle
    spread = [cycle + 1 + (i * 7919 % (2 * cycle * 1000)) / 1000 for i in range(messages)]
    started = time.monotonic()
    created: dict[str, float] = {}
    for i, d in enumerate(spread):
        target = started + i * cycle / messages
        time.sleep(max(0.0, target - time.monotonic()))
        body = f"m{i}"
        due[body] = time.time() + d
        sender.send(busy[i % active], body, delay=d)
        if i == messages // 4:  # a new destination, while the worker runs
            created["at"] = time.time()
            urls.update(install(url, cycle, ["newcomer"]))
            due["newcomer"] = time.time() + cycle + 1
            sender.send("newcomer", "newcomer", delay=cycle + 1)
    added = worker.wait_for("queue.added", 60, queue=f"{PREFIX}newcomer-delay.fifo")
    consumer.wait_for(due, 3 * cycle + 60)
    stopped, rss = worker.stop()
    first = consumer.arrived.get("newcomer", [float("nan")])[0]
    return {
        "seconds": round(stopped["seconds"], 1),
        "active_queues": active,
        "messages": messages,
        "delay_range_seconds": [round(min(spread), 1), round(max(spread), 1)],
        **consumer.figures(due, besides="newcomer"),
        "requests_per_idle_queue_hour": idle_rate(stopped, len(names), active),
        "requests": stopped["requests"],
        "worker_peak_rss_mib": round(rss, 1),
        "new_destination": {
            "discovery_interval_seconds": WORKER_SETTINGS["discovery_interval_seconds"],
            "install_to_queue_added_s": round(_seconds(added["timestamp"]) - created["at"], 2),
            "install_to_first_hand_over_s": round(first - created["at"], 2),
            "its_delay_seconds": cycle + 1,
            "lateness_s": round(first - due["newcomer"], 3),
        },
    }


FIFO_PREFIX = "fifo-"
FIFO_GROUPS = 20


def fifo_phase(
    url: str, cycle: int, messages: int, cut_share: float, *, fifo: bool = True
) -> dict[str, Any]:
    """One run of the FIFO route (or, for comparison, the standard one), the worker's calls
    through the fault proxy."""
    run = f"{'fifo' if fifo else 'standard'}-{int(cut_share * 1000)}-"
    destinations = [f"{run}{i}" + (".fifo" if fifo else "") for i in range(5)]
    proxy = FaultProxy(url)
    proxy.cut_responses(cut_share, seed=1)
    env = env_for(
        proxy.url,
        FIFO_PREFIX,
        max_native_delay_seconds=cycle,
        visibility_timeout_seconds=10,  # what a lost answer leaves in flight comes back soon
        call_timeout_seconds=2,
        metrics="off",
        wait_time_seconds=WORKER_SETTINGS["wait_time_seconds"],
    )
    urls = install(url, cycle, destinations, FIFO_PREFIX)
    sender = Sender(settings(url, cycle, FIFO_PREFIX), client=client(url))
    worker = Worker(env, tuple(destinations))
    worker.wait_for("worker.started", 60)
    due: dict[str, float] = {}
    consumer = Consumer(url, urls)
    # a third short (through the staging queue), the rest through the FIFO delay queue
    spread = [0.1 + (i * 7919 % (3 * cycle * 1000)) / 1000 for i in range(messages)]
    started = time.monotonic()
    for i, d in enumerate(spread):
        time.sleep(max(0.0, started + i * cycle / messages - time.monotonic()))
        body = f"m{i}"
        due[body] = time.time() + d
        group = f"g{i % FIFO_GROUPS}" if fifo else None
        sender.send(destinations[i % len(destinations)], body, delay=d, group_id=group)
    consumer.wait_for(due, 3 * cycle + 60, linger=5)  # late copies, if any
    stopped, _ = worker.stop()
    groups = consumer.groups
    return {
        "cut_share": cut_share,
        "answers_cut": proxy.responses_cut,
        "worker_requests": proxy.requests,
        "messages": messages,
        "short_delays": sum(1 for d in spread if d <= cycle),
        **consumer.figures(due),
        "wrong_group": sum(1 for b, g in groups.items() if g != f"g{int(b[1:]) % FIFO_GROUPS}")
        if fifo
        else None,
        "worker_messages": stopped["messages"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--destinations", type=int, default=1000)
    ap.add_argument("--active", type=int, default=10)
    ap.add_argument("--messages", type=int, default=400)
    ap.add_argument("--cycle", type=int, default=90)
    ap.add_argument("--before-seconds", type=float, default=60)
    ap.add_argument("--fifo-messages", type=int, default=300)
    ap.add_argument("--fifo-cycle", type=int, default=10)
    ap.add_argument("--fifo-cut-share", type=float, default=0.05)
    ap.add_argument("--fifo-only", action="store_true", help="only the FIFO runs")
    ap.add_argument("--wait-time-seconds", type=int, default=20, help="the workers' long polls")
    ap.add_argument("--discovery-interval", type=int, default=10, help="seconds (fleet phase)")
    args = ap.parse_args()
    global WORKER_SETTINGS  # every worker of the run polls and discovers this way
    WORKER_SETTINGS = {
        "wait_time_seconds": args.wait_time_seconds,
        "discovery_interval_seconds": args.discovery_interval,
    }
    logs.configure("json", "WARNING")
    emulator = EmulatorProcess("fauxqs")
    try:
        cut = args.fifo_cut_share
        fifo = {
            "clean": fifo_phase(emulator.url, args.fifo_cycle, args.fifo_messages, 0.0),
            "faults": fifo_phase(emulator.url, args.fifo_cycle, args.fifo_messages, cut),
            # the same faults on standard destinations: what the deduplication id saves
            "standard_faults": fifo_phase(
                emulator.url, args.fifo_cycle, args.fifo_messages, cut, fifo=False
            ),
        }
        if args.fifo_only:
            print(json.dumps({"emulator": emulator.name, "fifo": fifo}, indent=2))
            return
        names = [f"d{i:04d}" for i in range(args.destinations)]
        t0 = time.monotonic()
        install(emulator.url, args.cycle, names)
        installed = time.monotonic() - t0
        before = before_phase(emulator.url, args.cycle, len(names), args.before_seconds)
        fleet = fleet_phase(emulator.url, args.cycle, names, args.active, args.messages)
    finally:
        emulator.stop()
    test_period = idle.check_period(args.cycle, LAG)
    prod_period = idle.check_period(quotas.MAX_NATIVE_DELAY_SECONDS, 60)
    assert test_period is not None and prod_period is not None
    long_polls = 3600 / quotas.LONG_POLL_SECONDS
    print(
        json.dumps(
            {
                "emulator": emulator.name,
                "destinations": args.destinations,
                "cycle_seconds": args.cycle,
                "install_seconds": round(installed, 1),
                "before": before,
                "fleet": fleet,
                "fifo": fifo,
                "model_requests_per_idle_queue_hour": {
                    "long_polled": long_polls,
                    "idle_rule_at_test_cycle": round(3600 / test_period, 1),
                    "idle_rule_at_900s_default_lag": round(3600 / prod_period, 1),
                    "ratio_at_900s": round(quotas.LONG_POLL_SECONDS / prod_period, 4),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
