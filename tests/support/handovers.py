"""The worker's own account of a message's way, read from its JSON events: how many times it
was requeued, and the due time and delay its hand-over carried. The worker computes these
from broker timestamps, so a busy machine cannot move them; a lateness timed by a test's
clock it can (3.3 s seen at load 15), which hides a compressed cycle of 1 or 2 s late."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def read(path: Path) -> list[dict[str, Any]]:
    """The events in a worker's log file (SQSDELAY_LOG_FILE); other lines are skipped."""
    if not path.exists():
        return []
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.startswith("{")]
    return [x for x in lines if "event" in x]


def most_requeues(delay: float, cycle: float) -> int:
    """Requeues of a message sent `delay` s ahead through the delay queue: it is first seen a
    cycle after the send, then a cycle after each requeue, and handed over at the first
    sighting with at most a cycle left. A worker that sees it late only makes fewer."""
    return max(0, math.ceil(delay / cycle) - 2)


def assert_no_hop_late(
    events: list[dict[str, Any]], message_id: str | None = None, *, cycle: float
) -> None:
    """Each hand-over carried at most a cycle (DelaySeconds and the wait), each requeue had
    more than a cycle left: a requeue with less comes back after the message is due, and a
    hand-over a cycle late needs one of the two. `message_id` None: every message."""
    for e in events:
        if message_id not in (None, e.get("message_id")):
            continue
        if e["event"] == "delay.handed_over":
            carried = e["remaining_seconds"] * 1000 + e["wait_ms"]
            assert 0 <= carried <= cycle * 1000, e
        elif e["event"] == "delay.requeued":  # a redelivery's figure is reckoned later
            assert e["receive_count"] > 1 or e["remaining_seconds"] > cycle, e


def assert_handed_over_in_time(
    events: list[dict[str, Any]],
    message_id: str | None,
    *,
    delay: float,
    cycle: float,
    sent_between: tuple[float, float],
) -> None:
    """The message was handed over, its due time the send's (broker time, which lies between
    the test's clock readings around the send), after no more requeues than its delay needs,
    with no hop late (`assert_no_hop_late`). `message_id` None: the log's only message."""
    mine = [e for e in events if message_id in (None, e.get("message_id"))]
    handed = [e for e in mine if e["event"] == "delay.handed_over"]
    requeued = [e for e in mine if e["event"] == "delay.requeued"]
    assert handed, (message_id, [e["event"] for e in mine])
    low = math.floor(sent_between[0] * 1000) + round(delay * 1000) - 1
    high = math.ceil(sent_between[1] * 1000) + round(delay * 1000) + 1
    for h in handed:
        assert low <= h["due_at_ms"] <= high, (message_id, h, low, high)
    assert len(requeued) <= most_requeues(delay, cycle), (message_id, len(requeued), delay)
    assert_no_hop_late(mine, cycle=cycle)
