"""What the step counts for the metrics: ends per destination, lateness, due windows."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import metrics
from sqsdelay.core.metrics import Tally, lateness_ms, window
from sqsdelay.core.step import StepState
from tests.support.steps import DAY, Clock, Q, message, run
from tests.support.stub import StubAws

HOUR_MS = 3_600_000


def test_due_windows_have_inclusive_upper_bounds() -> None:
    assert window(0) == window(HOUR_MS) == "DueWithin1h"
    assert window(HOUR_MS + 1) == window(24 * HOUR_MS) == "DueWithin1d"
    assert window(24 * HOUR_MS + 1) == window(30 * 24 * HOUR_MS) == "DueWithin30d"
    assert window(30 * 24 * HOUR_MS + 1) == window(10**15) == "DueLater"


@given(st.integers(-(10**12), 10**12), st.integers(0, 900), st.integers(-(10**12), 10**12))
def test_lateness_is_never_negative_and_exact_when_late(sent: int, delay: int, due: int) -> None:
    late = lateness_ms(sent_ms=sent, delay_seconds=delay, due_ms=due)
    assert late >= 0
    assert late == max(0, sent + delay * 1000 - due)


def test_take_returns_what_was_counted_and_starts_again() -> None:
    tally = Tally()
    tally.moved("orders", "delay.handed_over")
    tally.moved("orders", "delay.park_skipped")  # not an end: not a metric
    tally.handed_over("orders", 12)
    tally.calls[("sqs", "SendMessageBatch")] += 2
    taken = tally.take()
    assert taken.counts == {("orders", "HandedOver"): 1}
    assert taken.lateness == {"orders": [12]} and taken.calls[("sqs", "SendMessageBatch")] == 2
    assert not tally and taken.destinations() == ["orders"]


def test_every_metric_name_has_a_unit() -> None:
    names = {*metrics.DESTINATION_METRICS, *metrics.API_METRICS, metrics.LATENESS}
    backlog = {metrics.BACKLOG_VISIBLE, metrics.BACKLOG_DUE}
    assert names | {metrics.CLOCK_OFFSET} | backlog == set(metrics.UNITS)


def test_the_step_counts_each_end_its_lateness_and_due_window() -> None:
    stub = StubAws()
    state, clock = StepState(), Clock()
    batch = [message(1, 5), message(2, 3 * DAY), message(3, 40 * DAY), message(4, "x")]
    outcome = run(batch, stub, state=state, clock=clock, target=None)
    assert outcome.ends == {
        "id1": "handed-over",
        "id2": "requeued",
        "id3": "requeued",
        "id4": "dead-lettered",
    }
    tally = state.stats.tally.take()
    assert tally.counts == {
        (Q.destination, "HandedOver"): 1,
        (Q.destination, "Requeued"): 2,
        (Q.destination, "DeadLettered"): 1,
        # Parking was due (3 days left), but there was no park target: both fell back.
        (Q.destination, "SchedulerFallbacks"): 2,
        (Q.destination, "DueWithin30d"): 1,
        (Q.destination, "DueLater"): 1,
    }
    # Due at T + 5 s and sent with DelaySeconds 5, counted from the first receive at T. The
    # local clock runs 0.5 s ahead of the broker's, which the offset estimate takes out; the
    # send's round took 10 ms: visible 10 ms late, on the broker's clock.
    [late] = tally.lateness[Q.destination]
    assert late == pytest.approx(10, abs=1)


def test_held_messages_are_counted_and_a_failed_send_has_no_lateness() -> None:
    stub = StubAws()
    stub.fail("SendMessageBatch", "InternalError", status=500, queue=Q.destination)
    state = StepState()
    outcome = run([message(1, 5), message(2, 6)], stub, state=state)
    assert set(outcome.ends.values()) == {"held"}
    tally = state.stats.tally.take()
    assert tally.counts == {(Q.destination, "Held"): 2}
    assert not tally.lateness
