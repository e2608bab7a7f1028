"""Pausing a destination on the emulator with a fleet of two workers (docs/operator-controls.md):
nothing is handed over while it is paused, and after the resume every message is delivered at
once, none early, none lost. Also the commands, and a FIFO destination's forwards."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import pytest

from sqsdelay.aws.operations import pause_states, set_paused
from sqsdelay.aws.sender import Sender
from sqsdelay.errors import QueueMissing
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.cli import run
from tests.support.logs import capture_logs, events
from tests.support.queues import install
from tests.support.workerkit import Collector, RunningWorker

CYCLE = 2
CHECK = 1  # SQSDELAY_PAUSE_CHECK_SECONDS


@pytest.fixture
def fast(make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch) -> Settings:
    # Held far longer than the test: what is delivered promptly after the resume was released
    # by the worker that held it, not back at the end of its hold (one 2 s cycle by default).
    monkeypatch.setenv("SQSDELAY_PAUSE_HOLD_SECONDS", "120")
    return make_settings(
        max_native_delay_seconds=CYCLE,
        visibility_timeout_seconds=3,
        wait_time_seconds=1,
        pause_check_seconds=CHECK,
    )


def _held(workers: list[RunningWorker]) -> int:
    return sum(w.worker.stats.events["delay.held_paused"] for w in workers)


def _fleet_pause_and_resume(fast: Settings, sqs: Any, destination: str, **send: Any) -> None:
    urls = install(fast, sqs, destination)
    sender = Sender(fast, client=sqs)
    out = capture_logs()
    set_paused(fast, destination, True)
    assert [s.paused for s in pause_states(fast, [destination])] == [True]
    count = 20
    due: dict[str, float] = {}
    with ExitStack() as stack:
        workers = [stack.enter_context(RunningWorker(fast, [destination])) for _ in range(2)]
        for i in range(count):
            delay = CYCLE + 1 + (i % 4)  # through the delay queue, due in 3..6 s
            sent = time.time()
            sender.send(destination, f"m{i}", delay=delay, **send)
            due[f"m{i}"] = sent + delay
        got = Collector(sqs, urls[destination])
        # Each one is received and held once it is due: every one by the end
        wait_for(lambda: _held(workers) >= count, timeout=30)
        quiet_until = time.monotonic() + 2 * CHECK + 1  # a few reads of the tag later, still
        while time.monotonic() < quiet_until:
            got.poll(wait=1)
        assert got.got == [], "a paused destination got a message"
        resumed_at = time.time()
        set_paused(fast, destination, False)
        delivered = got.until(count, timeout=15)
    bodies = [d.body for d in delivered]
    assert sorted(bodies) == sorted(due), "lost or duplicated"
    for d in delivered:
        assert d.at >= due[d.body] - 0.05, f"{d.body} early"
    # released by the workers that held them, not by the end of a 120 s hold
    assert max(d.at for d in delivered) - resumed_at < 2 * CHECK + 8
    assert events(out, "destination.resumed")
    # both workers took part (messages spread over two receivers) or one held them all:
    # either way every hold was released by its holder
    released = sum(e.get("released", 0) for e in events(out, "destination.resumed"))
    assert released == _held(workers)


def test_a_fleet_of_two_hands_nothing_over_while_paused_and_all_after(
    fast: Settings, sqs: Any
) -> None:
    _fleet_pause_and_resume(fast, sqs, "orders")


def test_a_fifo_destination_is_paused_too(fast: Settings, sqs: Any) -> None:
    _fleet_pause_and_resume(fast, sqs, "orders.fifo", group_id="g")


def test_forwards_from_staging_wait_while_paused(fast: Settings, sqs: Any) -> None:
    """A FIFO destination paused with messages already in its staging queue: the forwards
    are held too, and go after the resume."""
    urls = install(fast, sqs, "jobs.fifo")
    sender = Sender(fast, client=sqs)
    with RunningWorker(fast, ["jobs.fifo"]) as running:
        set_paused(fast, "jobs.fifo", True)
        # a read of the tag happens with a batch: one that is not paused yet is fine too
        sender.send("jobs.fifo", "a", delay=CYCLE + 1, group_id="g")
        wait_for(lambda: running.worker.stats.events["delay.held_paused"] >= 1, timeout=20)
        got = Collector(sqs, urls["jobs.fifo"])
        got.poll(wait=1)
        assert got.got == []
        set_paused(fast, "jobs.fifo", False)
        [d] = got.until(1, timeout=15)
    assert d.body == "a"


def test_the_commands(env: dict[str, str], fast: Settings, sqs: Any) -> None:
    install(fast, sqs, "orders", "billing")
    paused = run(env, "pause", "orders")
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout)["paused"] is True
    shown = run(env, "paused", "orders", "billing")
    assert shown.returncode == 0, shown.stderr
    lines = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [(x["destination"], x["paused"]) for x in lines] == [
        ("orders", True),
        ("billing", False),
    ]
    assert lines[0]["since"].endswith("Z")
    every = run(env, "paused", "--all")
    assert every.returncode == 0, every.stderr
    found = {(x["destination"], x["paused"]) for x in map(json.loads, every.stdout.splitlines())}
    assert found == {(f"{fast.queue_prefix}orders", True), (f"{fast.queue_prefix}billing", False)}
    resumed = run(env, "resume", "orders")
    assert resumed.returncode == 0, resumed.stderr
    assert [s.paused for s in pause_states(fast, ["orders"])] == [False]
    missing = run(env, "pause", "nowhere")
    assert missing.returncode == 1
    assert "install nowhere" in missing.stderr
    with pytest.raises(QueueMissing):
        set_paused(fast, "nowhere", True)
    assert run(env, "paused").returncode == 2
