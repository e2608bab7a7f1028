"""The worker as the `sqsdelay worker` process: SIGKILL under load, graceful SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any

import pytest

from sqsdelay.aws.sender import Message, Sender
from tests.conftest import wait_for
from tests.support.faultproxy import FaultProxy
from tests.support.queues import install
from tests.support.workerkit import Collector

pytestmark = pytest.mark.slow


def worker_env(env: dict[str, str], **extra: str) -> dict[str, str]:
    return {
        **env,
        "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": "2",
        "SQSDELAY_VISIBILITY_TIMEOUT_SECONDS": "2",
        "SQSDELAY_WAIT_TIME_SECONDS": "1",
        "SQSDELAY_STATS_INTERVAL_SECONDS": "1",
        **extra,
    }


class WorkerProcess(subprocess.Popen[str]):
    """`sqsdelay worker orders` with its log read as it is written: an unread pipe fills
    (64 KiB, a minute of worker.stats lines at a 1 s interval) and then stalls the worker's
    logging, and with it the worker."""

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(
            [sys.executable, "-m", "sqsdelay", "worker", "orders"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.stderr is not None
        self.lines.extend(self.stderr)  # ends when the process closes its stderr

    def log(self) -> str:
        """The whole log, once the process has exited."""
        self._reader.join(timeout=30)
        return "".join(self.lines)

    def tail(self) -> str:
        return "".join(self.lines[-20:])


def test_sigkill_again_and_again_under_load_loses_nothing(
    make_settings: Any, sqs: Any, env: dict[str, str], record_property: Any
) -> None:
    s = make_settings(max_native_delay_seconds=2)
    urls = install(s, sqs)
    total = 120
    Sender(s, client=sqs).send_batch(
        "orders", [Message(f"m{i}", delay=3 + i % 6) for i in range(total)]
    )
    dest = Collector(sqs, urls["orders"])
    wenv = worker_env(env, SQSDELAY_MAX_ATTEMPTS="1000")
    kills = 0
    proc = WorkerProcess(wenv)
    try:
        while kills < 6:
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                dest.poll(wait=1)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            kills += 1
            proc = WorkerProcess(wenv)
        dest.until_all({f"m{i}" for i in range(total)}, timeout=90)
        dest.quiet_for(3)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    counts = Counter(g.body for g in dest.got)
    duplicates = sum(counts.values()) - len(counts)
    record_property("duplicates", duplicates)
    print(f"SIGKILL x{kills}: {len(counts)}/{total} delivered, {duplicates} duplicates")
    assert set(counts) == {f"m{i}" for i in range(total)}
    errors = sqs.get_queue_attributes(QueueUrl=urls["error"], AttributeNames=["All"])
    assert errors["Attributes"]["ApproximateNumberOfMessages"] == "0"


def test_sigkill_while_the_heartbeat_keeps_a_batch_hidden_delivers_once_after_it(
    make_settings: Any, sqs: Any, env: dict[str, str], moto_url: str
) -> None:
    """The hand-over's send hangs, so the batch stays in hand and its heartbeat extends the
    short receive visibility to the visibility timeout; the worker is killed in that loop.
    The message is neither lost nor sent twice: it comes back when the extension runs out,
    and the next worker hands it over."""
    proxy = FaultProxy(moto_url)
    s = make_settings(max_native_delay_seconds=2)
    urls = install(s, sqs)
    # 2.5 s on a 2 s cycle: the hand-over waits about 0.5 s before its send, well before the
    # first heartbeat at 1 s (with 3 s the wait was about 1 s and raced the heartbeat once the
    # emulator's long poll answered at once)
    Sender(s, client=sqs).send("orders", "held", delay=2.5)
    proxy.hang("SendMessageBatch")
    extended = {
        "SQSDELAY_RECEIVE_VISIBILITY_SECONDS": "2",
        "SQSDELAY_VISIBILITY_TIMEOUT_SECONDS": "8",
    }
    proc = WorkerProcess(worker_env(env, SQSDELAY_ENDPOINT_URL=proxy.url, **extended))
    try:
        wait_for(
            lambda: proxy.seen["SendMessageBatch"] and proxy.seen["ChangeMessageVisibilityBatch"],
            timeout=30,
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        killed = time.monotonic()
        assert proxy.seen["SendMessageBatch"] == 1, "the hand-over was hanging, not sent"
    finally:
        if proc.poll() is None:
            proc.kill()
        proxy.close()
    dest = Collector(sqs, urls["orders"])
    proc = WorkerProcess(worker_env(env, **extended))
    try:
        got = dest.until(1, timeout=60)
        came_back = time.monotonic() - killed
        dest.quiet_for(3)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert [g.body for g in dest.got] == ["held"]
    # Hidden until the extension (8 s from the beat) ran out, then handed over at once.
    assert came_back <= 8 + 10, came_back
    assert got[0].body == "held"


def test_sigterm_exits_0_quickly_and_leaves_nothing_half_done(
    make_settings: Any, sqs: Any, env: dict[str, str]
) -> None:
    s = make_settings(max_native_delay_seconds=2)
    urls = install(s, sqs)
    total = 40
    Sender(s, client=sqs).send_batch(
        "orders", [Message(f"m{i}", delay=3 + i % 5) for i in range(total)]
    )
    dest = Collector(sqs, urls["orders"])
    # A 20 s long poll must not delay the stop. The visibility timeout is long enough that a
    # slow batch on a busy moto cannot reappear mid-processing (that would be an
    # at-least-once duplicate from the timeout, not from the stop).
    wenv = worker_env(
        env, SQSDELAY_WAIT_TIME_SECONDS="20", SQSDELAY_VISIBILITY_TIMEOUT_SECONDS="10"
    )
    proc = WorkerProcess(wenv)
    try:
        dest.until(5, timeout=30)
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        took = time.monotonic() - began
        stderr = proc.log()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0 and took < 30, (code, took)
    assert '"event": "worker.stopped"' in stderr and "Traceback" not in stderr
    proc = WorkerProcess(wenv)  # the rest (if the first stop left any): in the delay queue only
    try:
        # A stop of a running worker: a SIGINT while Python still imports ends the process
        # as Python does (on a loaded machine the first worker may have delivered them all).
        wait_for(lambda: '"event": "worker.started"' in "".join(proc.lines), timeout=60)
        dest.until(total, timeout=60)
        dest.quiet_for(3)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
    assert code == 0, proc.tail()
    counts = Counter(g.body for g in dest.got)
    assert set(counts) == {f"m{i}" for i in range(total)}
    assert max(counts.values()) == 1, "a graceful stop must not duplicate"
