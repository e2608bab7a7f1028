"""An empty delay queue is checked (GetQueueAttributes) instead of long-polled, against the
moto server, and a message sent to it is still handed over on time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.core.idle import check_period
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.handovers import assert_handed_over_in_time
from tests.support.logs import capture_logs, logged
from tests.support.workerkit import Collector, RunningWorker, load_far_off

CYCLE = 8  # with no lag allowed for (moto's counts are exact): a check every 6 s


def test_an_empty_queue_is_checked_not_polled_and_nothing_is_late(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    s = make_settings(
        max_native_delay_seconds=CYCLE,
        wait_time_seconds=1,
        visibility_timeout_seconds=3,
        idle_counts_lag_seconds=0,
    )
    assert check_period(CYCLE, 0) == 6
    reports = Installer(s, client=sqs).run(["orders"])
    url = next(str(r.url) for r in reports if r.spec.role == "destination")
    out = capture_logs("DEBUG")  # every hop's delay.requeued
    with RunningWorker(s, ["orders"]) as running:
        stats = running.worker.stats
        wait_for(lambda: stats.requests["GetQueueAttributes"] >= 2, timeout=20)
        # two checks 6 s apart; 1 s long polls would have made about six receives
        assert stats.requests["ReceiveMessage"] <= 2
        sent = time.time()
        message_id = Sender(s, client=sqs).send("orders", "on time", delay=CYCLE + 3).message_id
        around = (sent, time.time())
        (got,) = Collector(sqs, url).until(1, timeout=40)
    hops = logged(out)  # no requeue, and at most the 3 s left carried in the hand-over
    assert_handed_over_in_time(hops, message_id, delay=CYCLE + 3, cycle=CYCLE, sent_between=around)
    late = got.at - (sent + CYCLE + 3)
    # A cycle (8 s) late shows; a check missed (a period, 6 s, less the 3 s the message has
    # left when visible) does not, nor on a busy machine (3.3 s seen) could it at this cycle.
    assert 0 <= late < 5.0, late


def test_a_queue_of_far_off_delays_is_long_polled_and_read_once_a_period(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    """It always holds something (delayed, then visible and requeued): long polls, and its
    counts read at most once a period, not after every empty poll (1 s polls here)."""
    s = make_settings(
        max_native_delay_seconds=CYCLE,
        wait_time_seconds=1,
        visibility_timeout_seconds=3,
        idle_counts_lag_seconds=0,
    )
    reports = Installer(s, client=sqs).run(["orders"])
    delay_url = next(str(r.url) for r in reports if r.spec.role == "delay")
    load_far_off(sqs, delay_url, 1)
    with RunningWorker(s, ["orders"]) as running:
        stats = running.worker.stats
        started = time.monotonic()
        wait_for(lambda: stats.requests["ReceiveMessage"] >= 10, timeout=30)
        reads, seconds = stats.requests["GetQueueAttributes"], time.monotonic() - started
    assert reads <= seconds / 6 + 2, (reads, seconds)  # the first, and one each 6 s
