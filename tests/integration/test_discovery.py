"""One worker for every delay queue under the prefix (SQSDELAY_QUEUES=*, `worker --all`),
against the moto server: new destinations picked up without a restart, deleted and
misconfigured ones dropped or skipped without a log storm, and a prefix with nothing yet."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.core import receive_loops
from sqsdelay.core.discovery import changes, delay_queues
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.cli import run
from tests.support.handovers import assert_handed_over_in_time
from tests.support.logs import capture_logs, events, logged
from tests.support.queues import install
from tests.support.workerkit import Collector, RunningWorker, load_far_off

CYCLE = 2


@pytest.fixture
def fleet(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(
        max_native_delay_seconds=CYCLE,
        visibility_timeout_seconds=3,
        wait_time_seconds=1,
        discovery_interval_seconds=1,
    )


def test_delay_queues_under_the_prefix_and_what_changed() -> None:
    listed = [
        "https://sqs/1/p-orders-delay.fifo",
        "https://sqs/1/p-orders",
        "https://sqs/1/p--delay.fifo",  # no destination name: not ours
        "https://sqs/1/q-billing-delay.fifo",  # another prefix
        "p-billing-delay.fifo",
    ]
    assert delay_queues(listed, "p-") == ["p-billing-delay.fifo", "p-orders-delay.fifo"]
    assert changes(["a", "b"], ["b", "c"]) == (["c"], ["a"])


def test_one_worker_follows_the_prefix_as_destinations_come_and_go(
    fleet: Settings, sqs: Any
) -> None:
    urls = install(fleet, sqs, "orders", "billing")
    sender = Sender(fleet, client=sqs)
    p = fleet.queue_prefix
    # a delay queue made by hand with the wrong cycle: skipped, with what install --check says
    sqs.create_queue(
        QueueName=f"{p}wrong-delay.fifo", Attributes={"FifoQueue": "true", "DelaySeconds": "0"}
    )
    out = capture_logs()
    with RunningWorker(fleet, ["*"]) as running:
        for name in ("orders", "billing"):
            sender.send(name, name, delay=CYCLE + 1)
        for name in ("orders", "billing"):
            assert [d.body for d in Collector(sqs, urls[name]).until(1, timeout=30)] == [name]
        # a new destination, while the worker runs
        created = time.monotonic()
        late = install(fleet, sqs, "late")["late"]
        sender.send("late", "late", delay=CYCLE + 1)
        Collector(sqs, late).until(1, timeout=30)
        print(f"new destination to its first hand-over: {time.monotonic() - created:.1f} s")
        # a deleted delay queue: dropped once, the others go on
        sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=f"{p}billing-delay.fifo")["QueueUrl"])
        wait_for(lambda: events(out, "queue.removed"), timeout=30)
        sender.send("orders", "after", delay=CYCLE + 1)
        assert [d.body for d in Collector(sqs, urls["orders"]).until(1, timeout=30)] == ["after"]
        refreshes = running.worker.stats.requests["ListQueues"]
        wait_for(lambda: running.worker.stats.requests["ListQueues"] >= refreshes + 2, timeout=30)
    added = sorted(e["queue"] for e in events(out, "queue.added"))
    assert added == [f"{p}{n}-delay.fifo" for n in ("billing", "late", "orders")]
    [removed] = events(out, "queue.removed")
    assert removed["queue"] == f"{p}billing-delay.fifo"
    assert not events(out, "queue.receive_failed")  # no storm from the deleted queue
    skipped = events(out, "queue.skipped")
    assert skipped and {e["queue"] for e in skipped} == {f"{p}wrong-delay.fifo"}
    assert any("DelaySeconds" in " ".join(e["problems"]) for e in skipped)
    # said at each refresh, not at each poll
    assert len(skipped) <= running.worker.stats.requests["ListQueues"]


def test_a_prefix_with_nothing_yet_is_said_once_and_watched(fleet: Settings, sqs: Any) -> None:
    out = capture_logs()
    with RunningWorker(fleet, ["*"]) as running:
        wait_for(lambda: running.worker.stats.requests["ListQueues"] >= 3, timeout=30)
        assert len(events(out, "discovery.empty")) == 1
        urls = install(fleet, sqs, "first")
        Sender(fleet, client=sqs).send("first", "x", delay=CYCLE + 1)
        Collector(sqs, urls["first"]).until(1, timeout=30)
    assert Counter(e["event"] for e in logged(out))["discovery.empty"] == 1


def test_an_empty_prefix_is_said_at_start_to_mean_the_whole_account_in_the_region(
    fleet: Settings,
) -> None:
    # A Region of its own: with no prefix the worker would drain the other tests' queues.
    alone = fleet.model_copy(update={"queue_prefix": "", "region": "eu-west-3"})
    out = capture_logs()
    with RunningWorker(alone, ["*"]) as running:
        wait_for(lambda: running.worker.stats.requests["ListQueues"] >= 1, timeout=30)
    [said] = events(out, "discovery.whole_account")
    assert said["level"] == "warning" and said["region"] == "eu-west-3"
    assert "every delay queue of the account in the Region" in said["detail"]
    prefixed = capture_logs()
    with RunningWorker(fleet, ["*"]) as running:
        wait_for(lambda: running.worker.stats.requests["ListQueues"] >= 1, timeout=30)
    assert not events(prefixed, "discovery.whole_account")


def test_worker_all_and_inspect_all_on_the_command_line(
    fleet: Settings, sqs: Any, env: dict[str, str]
) -> None:
    Installer(fleet, client=sqs).run(["orders", "billing"])
    env = {**env, "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": str(CYCLE)}
    inspect = run(env, "inspect", "--all")
    assert inspect.returncode == 0, inspect.stderr
    p = fleet.queue_prefix
    assert f"{p}orders-delay.fifo" in inspect.stdout and f"{p}billing-delay.fifo" in inspect.stdout
    both = run(env, "worker", "orders", "*")
    assert both.returncode == 2 and "stands alone" in both.stderr
    # `worker --all` and SQSDELAY_QUEUES=*, as the README writes them: the worker finds both
    # destinations and stops on SIGTERM
    quick = {"SQSDELAY_DISCOVERY_INTERVAL_SECONDS": "1", "SQSDELAY_WAIT_TIME_SECONDS": "1"}
    for args, extra in ((["--all"], {}), ([], {"SQSDELAY_QUEUES": "*"})):
        worker = subprocess.Popen(
            [sys.executable, "-m", "sqsdelay", "worker", *args],
            env={**env, **quick, **extra},
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: list[str] = []
        try:
            assert worker.stderr is not None
            while sum('"queue.added"' in x for x in lines) < 2:
                line = worker.stderr.readline()
                assert line, "the worker ended: " + "".join(lines[-5:])
                lines.append(line)
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=60) == 0


def test_a_busy_queue_takes_spare_polls_never_another_queues(
    fleet: Settings, sqs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Room for 8 long polls, 6 queues: the busy one may add one loop (8 - 6, less the
    eighth kept for queues found later), not its 3 more; the others still hand over, none
    early (how late depends on how busy the machine is: moto serves every queue)."""
    monkeypatch.setattr(receive_loops, "DISCOVERY_POLLS", 8)
    names = ["busy", "a", "b", "c", "d", "e"]
    urls = install(fleet, sqs, *names)
    busy = urls["busy-delay.fifo"]
    load_far_off(sqs, busy, 100)
    sender = Sender(fleet, client=sqs)
    out = capture_logs("DEBUG")  # every hop's delay.requeued
    with RunningWorker(fleet, ["*"], concurrency=4) as running:
        w = running.worker
        wait_for(lambda: len(w.queues) == len(names), timeout=30)
        wait_for(lambda: w.stats.events["delay.requeued"] >= 100, timeout=60)
        due, collectors = {}, {n: Collector(sqs, urls[n]) for n in names[1:]}
        sends = {}  # message id, the clock around the send
        for n in names[1:]:
            due[n] = time.time() + CYCLE + 1
            sent = sender.send(n, n, delay=CYCLE + 1)
            sends[n] = (sent.message_id, due[n] - CYCLE - 1, time.time())
        deadline = time.monotonic() + 30
        while any(not c.got for c in collectors.values()) and time.monotonic() < deadline:
            for c in collectors.values():
                c.poll()  # all of them in turn: each arrival is timed alike
        [busy_loops] = [q.peak_loops for q in w.queues if q.trio.requested == "busy"]
    assert busy_loops == 2
    late = {n: c.got[0].at - due[n] for n, c in collectors.items() if c.got}
    # A poll the busy queue took shows in busy_loops, a starved queue in a missing arrival;
    # a cycle (2 s) late in the worker's own figures, which a busy machine cannot move.
    assert len(late) == 5 and all(-0.1 < x < 5 for x in late.values()), late
    hops = logged(out)
    for message_id, before, after in sends.values():
        assert_handed_over_in_time(
            hops, message_id, delay=CYCLE + 1, cycle=CYCLE, sent_between=(before, after)
        )
