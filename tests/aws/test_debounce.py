"""Debounce by key (issue 61, 2; core/debounce.py), stub-driven on a virtual clock: any
order of sends leaves the key's last body pending, due at its send + debounce but never
past the window's first send + max_wait, every replaced generation cancelled, and two
sends racing call by call leave exactly one of theirs pending."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqsdelay.aws.sender import Sender
from sqsdelay.core import debounce, registry, wire_format
from sqsdelay.core.flows import Flow, drive
from sqsdelay.core.send import Message, SendResult
from sqsdelay.errors import ConfigError, InvalidDelay, InvalidInput
from sqsdelay.settings import Settings
from tests.support.stub import StubAws

CYCLE = 1  # SQSDELAY_MAX_NATIVE_DELAY_SECONDS
DEBOUNCE_MS = 5_000
KEY = "user-7"


class World:
    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.stub = StubAws()
        self.settings = Settings(
            region="us-east-1",
            queue_prefix="",
            registry="dynamodb",
            registry_table="reg",
            max_native_delay_seconds=CYCLE,
        )
        self.sender = Sender(self.settings, caller=self.stub, clock=lambda: self.now).flows

    def flow(self, body: str, max_wait_ms: int | None) -> Flow[SendResult]:
        wait = timedelta(milliseconds=max_wait_ms) if max_wait_ms is not None else None
        message = Message(body, id=KEY, debounce=timedelta(milliseconds=DEBOUNCE_MS), max_wait=wait)
        return self.sender.send_flow("orders", message)

    def send(self, body: str, max_wait_ms: int | None) -> SendResult:
        return drive(self.flow(body, max_wait_ms), self.stub)

    def records(self) -> dict[str, registry.Record]:
        found = (registry.record_of(i) for i in self.stub.items.values())
        return {r.message_id: r for r in found if r is not None}

    def bodies(self) -> dict[str, str]:
        """Each sent message's body by its id (the generation's)."""
        out = {}
        for m in self.stub.queues["orders-delay.fifo"]:
            ident = m["MessageAttributes"][wire_format.MESSAGE_ID_ATTRIBUTE]["StringValue"]
            out[ident] = m["MessageBody"]
        return out

    def window(self) -> debounce.Window | None:
        return debounce.window_of(self.stub.items[f"debounce:orders/{KEY}"])


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=0, max_value=8_000), min_size=1, max_size=12),
    max_wait_ms=st.one_of(st.none(), st.integers(min_value=1_001, max_value=20_000)),
)
def test_any_order_of_sends_leaves_the_last_body_pending_never_past_max_wait(
    gaps: list[int], max_wait_ms: int | None
) -> None:
    world = World()
    # The model: the pending generation (body, due), its window's cap, and what was sealed
    # (no longer movable when the next send came: delivered as it was).
    pending: tuple[str, int] | None = None
    cap: int | None = None
    sealed: list[tuple[str, int]] = []
    for i, gap in enumerate(gaps):
        world.now += gap / 1000
        now_ms = int(world.now * 1000)
        body = f"b{i}"
        if pending is not None and pending[1] - now_ms > CYCLE * 1000:
            due = now_ms + DEBOUNCE_MS if cap is None else min(now_ms + DEBOUNCE_MS, cap)
        else:
            if pending is not None:
                sealed.append(pending)
            cap = now_ms + max_wait_ms if max_wait_ms is not None else None
            due = now_ms + DEBOUNCE_MS if cap is None else min(now_ms + DEBOUNCE_MS, cap)
        pending = (body, due)
        result = world.send(body, max_wait_ms)
        assert result.message_id == f"{KEY}#{i + 1}" and result.route == "delay-queue"
    bodies = world.bodies()
    scheduled = sorted(
        (bodies[r.message_id], r.due_ms) for r in world.records().values() if r.state == "scheduled"
    )
    assert pending is not None
    assert scheduled == sorted([*sealed, pending])
    window = world.window()
    assert window is not None and window.generation == len(gaps)
    assert bodies[window.message_id] == pending[0] and window.due_ms == pending[1]
    # Every generation is recorded and sent once; the replaced ones are cancelled.
    states = [r.state for r in world.records().values()]
    assert len(states) == len(gaps) == len(bodies)
    assert states.count("cancelled") == len(gaps) - len(sealed) - 1


class Stepper:
    """A send's flow advanced one round of calls at a time."""

    def __init__(self, flow: Flow[SendResult], stub: StubAws) -> None:
        self.flow, self.stub = flow, stub
        self.calls: list[Any] | None = next(flow)
        self.result: SendResult | None = None

    def step(self) -> None:
        assert self.calls is not None
        replies = self.stub(self.calls)
        try:
            self.calls = self.flow.send(replies)
        except StopIteration as stop:
            self.calls, self.result = None, stop.value


@settings(max_examples=80, deadline=None)
@given(order=st.lists(st.booleans(), min_size=30, max_size=30), first=st.booleans())
def test_two_sends_racing_leave_exactly_one_of_theirs_pending(
    order: list[bool], first: bool
) -> None:
    world = World()
    if first:  # a pending generation both of them replace
        world.send("old", None)
    a = Stepper(world.flow("a", None), world.stub)
    b = Stepper(world.flow("b", None), world.stub)
    committed: list[str] = []

    def transacted(stepper: Stepper, body: str) -> None:
        before = len([c for c in world.stub.calls if c.api == "TransactWriteItems"])
        items = dict(world.stub.items)
        stepper.step()
        made = [c for c in world.stub.calls if c.api == "TransactWriteItems"][before:]
        if made and world.stub.items != items and body not in committed:
            committed.append(body)

    for pick_a in [*order, *[True] * 20, *[False] * 20]:
        one, body = (a, "a") if pick_a else (b, "b")
        if one.calls is not None:
            transacted(one, body)
    assert a.result is not None and b.result is not None
    scheduled = [r for r in world.records().values() if r.state == "scheduled"]
    assert len(scheduled) == 1  # exactly one pending, the other and the old cancelled
    [pending] = scheduled
    window = world.window()
    assert window is not None and window.message_id == pending.message_id
    assert world.bodies()[pending.message_id] == committed[-1]  # the last to commit wins
    assert window.generation == (3 if first else 2)


def test_bad_debounce_input_is_refused_before_any_call() -> None:
    world = World()
    for options, error, words in (
        ({"debounce": 5}, InvalidInput, "needs the key"),
        ({"id": "k", "debounce": 1}, InvalidDelay, "longer than"),
        ({"id": "k", "debounce": 5, "max_wait": 1}, InvalidDelay, "max_wait"),
        ({"id": "k", "debounce": 5, "delay": 5}, InvalidInput, "instead of delay"),
        ({"id": "k", "max_wait": 5}, InvalidInput, "goes with debounce"),
        ({"id": "k" * 113, "debounce": 5}, InvalidInput, "at most 112"),
    ):
        with pytest.raises(error, match=words):
            drive(world.sender.send_flow("orders", Message("b", **options)), world.stub)
    with pytest.raises(InvalidInput, match="one message at a time"):
        drive(
            world.sender.send_batch_flow("orders", [Message("b", id="k", debounce=5)], True),
            world.stub,
        )
    plain = Sender(
        world.settings.model_copy(update={"registry": "off"}), caller=world.stub, clock=lambda: 0.0
    ).flows
    with pytest.raises(ConfigError, match="needs the registry"):
        drive(plain.send_flow("orders", Message("b", id="k", debounce=5)), world.stub)
    assert world.stub.calls == []
