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
from tests.support.workerkit import Collector, RunningWorker

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
    with RunningWorker(s, ["orders"]) as running:
        stats = running.worker.stats
        wait_for(lambda: stats.requests["GetQueueAttributes"] >= 2, timeout=20)
        # two checks 6 s apart; 1 s long polls would have made about six receives
        assert stats.requests["ReceiveMessage"] <= 2
        sent = time.time()
        Sender(s, client=sqs).send("orders", "on time", delay=CYCLE + 3)
        (got,) = Collector(sqs, url).until(1, timeout=40)
    late = got.at - (sent + CYCLE + 3)
    assert 0 <= late < 1.5, late
