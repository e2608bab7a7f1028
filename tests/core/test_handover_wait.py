"""The last hop to a tenth of a second: the step waits out the fraction of a second that
DelaySeconds cannot say, driven by the stub on a virtual clock. Never early, whatever the
fractions, the budget or the local clock do."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import wire_format
from sqsdelay.core.flows import drive
from sqsdelay.core.step import (
    MIN_SEND_SECONDS,
    SEND_SHARE,
    WAIT_GROUP_MS,
    StepState,
    handle,
)
from tests.support.steps import CONFIG, QF, TARGET, Clock, Q, T, message, run
from tests.support.stub import StubAws


def due_in(i: int, ms: int, **system: str) -> Any:
    """A message sent at T and due `ms` later (sqsdelay.DueAt carries the milliseconds)."""
    due = {"DataType": "Number", "StringValue": str(T + ms)}
    return message(i, -(-ms // 1000), attrs={wire_format.DUE_AT_ATTRIBUTE: due}, **system)


def arrived_at_first_receive() -> Clock:
    clock = Clock()
    clock.t = T / 1000  # the batch arrives as the broker stamps its first receive
    return clock


def lateness(stub: StubAws, dues_ms: dict[str, int], skew_s: float = 0.0) -> dict[str, float]:
    return {
        e["MessageBody"]: e["SentAt"]
        - skew_s
        + e.get("DelaySeconds", 0)
        - dues_ms[e["MessageBody"]] / 1000
        for e in stub.queues[Q.destination]
    }


def test_each_hand_over_is_sent_after_its_fraction_in_groups_of_100_ms() -> None:
    stub = StubAws()
    fractions = {1: 50, 2: 120, 3: 149, 4: 600, 5: 650, 6: 0}
    batch = [due_in(i, 3000 + ms) for i, ms in fractions.items()]
    dues = {f"body {i}": T + 3000 + ms for i, ms in fractions.items()}
    outcome = run(batch, stub, clock=arrived_at_first_receive())
    assert set(outcome.ends.values()) == {"handed-over"}
    late = lateness(stub, dues)
    assert all(0 <= x <= (WAIT_GROUP_MS + 10) / 1000 + 1e-9 for x in late.values()), late
    # One send at once (no fraction), then one per group: 50-149 ms and 600-650 ms.
    sends = [c for c in stub.calls if c.api == "SendMessageBatch"]
    assert [len(c.params["Entries"]) for c in sends] == [1, 3, 2]
    assert {e["DelaySeconds"] for e in stub.queues[Q.destination]} == {3}
    pauses = [c.params["seconds"] for c in stub.calls if c.service == "clock"]
    assert len(pauses) == 2 and sum(pauses) < 0.65


@given(
    fractions=st.lists(st.integers(0, 999), min_size=1, max_size=10),
    seconds=st.integers(0, 5),
    budget=st.floats(0.2, 60),
)
def test_never_early_and_never_past_the_budget(
    fractions: list[int], seconds: int, budget: float
) -> None:
    stub = StubAws()
    clock = arrived_at_first_receive()
    batch = [due_in(i, 1000 * seconds + ms) for i, ms in enumerate(fractions)]
    dues = {f"body {i}": T + 1000 * seconds + ms for i, ms in enumerate(fractions)}
    start = clock()
    outcome = run(batch, stub, clock=clock, budget=budget)
    assert set(outcome.ends.values()) <= {"handed-over", "held"}
    assert all(x >= 0 for x in lateness(stub, dues).values())
    # The waits end where the sends still have MIN_SEND_SECONDS of their share of the budget.
    pauses = sum(c.params["seconds"] for c in stub.calls if c.service == "clock")
    assert pauses <= max(0.0, SEND_SHARE * budget - MIN_SEND_SECONDS) + 1e-6
    assert clock() - start <= budget + 0.01 * len(stub.rounds)


def test_a_wait_the_budget_cannot_afford_rounds_up_instead() -> None:
    # A stopping worker (or a Lambda near its end) has 1.5 s: the sends may wait 0.275 s.
    stub = StubAws()
    batch = [due_in(1, 2200), due_in(2, 2700)]
    outcome = run(batch, stub, clock=arrived_at_first_receive(), budget=1.5)
    assert set(outcome.ends.values()) == {"handed-over"}
    sent = {e["MessageBody"]: e for e in stub.queues[Q.destination]}
    assert sent["body 1"]["DelaySeconds"] == 2  # waited 0.2 s
    assert sent["body 2"]["DelaySeconds"] == 3  # 2.7 s rounded up: 0.3 s late, not early
    # Measured from the arrival: the first send's round (10 ms) already passed.
    [waited] = [c.params["seconds"] for c in stub.calls if c.service == "clock"]
    assert waited == pytest.approx(0.2 - 0.01, abs=1e-6)


def test_a_jump_of_the_local_clock_never_makes_a_redelivery_early() -> None:
    """The step's waits are measured on the driver's monotonic clock; the local wall clock
    only gives `local_ms`. When it is stepped between two batches, the redelivered message
    in the second one (whose broker time comes from the offset estimate) is still on time,
    as the first receive beside it restarts the estimate."""
    for jump_s in (10.0, -10.0):
        state = StepState()
        stub = StubAws()
        clock = arrived_at_first_receive()
        run([due_in(i, 60_000 + i) for i in range(20)], stub, state=state, clock=clock)
        stub.queues.clear()
        clock.advance(30)  # broker time T + 30 s (and a little for the rounds)
        broker_now = clock()
        redelivered = due_in(
            99,
            35_300,
            ApproximateFirstReceiveTimestamp=str(T + 1000),
            ApproximateReceiveCount="2",
        )
        fresh = due_in(98, 90_000, ApproximateFirstReceiveTimestamp=str(int(broker_now * 1000)))
        flow = handle(
            [redelivered, fresh],
            queues=Q,
            park_target=TARGET,
            config=CONFIG,
            state=state,
            clock=clock,
            local_ms=int((broker_now + jump_s) * 1000),  # the wall clock was stepped
            deadline=clock() + 48,
        )
        drive(flow, stub)
        [entry] = [e for e in stub.queues[Q.destination] if e["MessageBody"] == "body 99"]
        visible = entry["SentAt"] + entry.get("DelaySeconds", 0)
        late = visible - (T / 1000 + 35.3)
        assert 0 <= late < 0.2, (jump_s, late)


def staged(i: int, delay_ms: int, first_ms: int, **system: str) -> Any:
    """A short send to a FIFO destination's staging queue: visible after its whole seconds
    (first received at T + `first_ms`), due at T + `delay_ms`."""
    attrs = {
        wire_format.GROUP_ID_ATTRIBUTE: {"DataType": "String", "StringValue": f"g{i % 2}"},
        wire_format.DELAY_MS_ATTRIBUTE: {"DataType": "String", "StringValue": str(delay_ms)},
    }
    return message(
        i, None, attrs=attrs, ApproximateFirstReceiveTimestamp=str(T + first_ms), **system
    )


@given(
    delays=st.lists(st.integers(1, 900_000), min_size=1, max_size=10),
    polled_ms=st.integers(0, 1500),
    budget=st.floats(0.2, 60),
)
def test_a_forward_waits_out_the_senders_fraction_and_is_never_early(
    delays: list[int], polled_ms: int, budget: float
) -> None:
    """The staging queue shows a message after its whole seconds; it is received up to
    `polled_ms` later. The forward is sent at its due time or after, never before, and a wait
    the budget cannot afford holds the message instead of sending it early."""
    stub = StubAws()
    clock = Clock()
    batch, dues = [], {}
    for i, ms in enumerate(delays):
        first = ms // 1000 * 1000 + polled_ms
        batch.append(staged(i, ms, first))
        dues[f"body {i}"] = (T + ms) / 1000
    clock.t = max(T + ms // 1000 * 1000 + polled_ms for ms in delays) / 1000
    # the batch arrives when its latest first receive was stamped: the others waited in it
    outcome = run(batch, stub, clock=clock, budget=budget, queues=QF)
    assert set(outcome.ends.values()) <= {"handed-over", "held"}
    for entry in stub.queues[QF.destination]:
        assert entry["SentAt"] >= dues[entry["MessageBody"]] - 1e-6, entry  # float at 1.7e9 s
        assert wire_format.DELAY_MS_ATTRIBUTE not in entry.get("MessageAttributes", {})


def test_a_forward_due_in_a_fraction_is_sent_then_and_not_before() -> None:
    stub = StubAws()
    clock = Clock()
    clock.t = (T + 2000) / 1000  # received as its two whole seconds ended
    outcome = run([staged(1, 2_400, 2_000)], stub, clock=clock, queues=QF)
    assert outcome.ends == {"id1": "handed-over"}
    [entry] = stub.queues[QF.destination]
    assert entry["SentAt"] == pytest.approx((T + 2_400) / 1000, abs=0.02)
