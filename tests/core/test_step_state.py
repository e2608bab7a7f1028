"""What lasts from batch to batch (core/step_state.py): the messages in hand and the newest
handle of each, and a batch's time budget shared out among its phases."""

from __future__ import annotations

from sqsdelay.core.step_state import PARK_SHARE, SEND_SHARE, Budget, StepState
from tests.support.steps import message


def test_a_message_already_in_hand_is_a_copy_whose_handle_is_the_newest() -> None:
    state = StepState()
    first = [message(1, 60), message(2, 60)]
    assert state.take(first) == (first, [])
    again = message(1, 60)
    again = type(again)(again.message_id, "rh1-newer", again.body, again.attributes, again.system)
    fresh, copies = state.take([again, message(3, 60)])
    assert [m.message_id for m in fresh] == ["id3"] and copies == [again]
    # SQS deletes or hides a message received again only by its newest handle
    assert state.handle_of(first[0]) == "rh1-newer" and state.handle_of(first[1]) == "rh2"


def test_a_message_let_go_is_fresh_again_with_its_own_handle() -> None:
    state = StepState()
    m = message(1, 60)
    state.take([m])
    state.take([m])
    state.let_go([m])
    assert state.in_hand == set() and state.newest == {}
    assert state.take([m]) == ([m], []) and state.handle_of(m) == "rh1"


def test_each_breaker_is_its_own() -> None:
    state = StepState()
    state.sends.failure("orders", 0)
    assert state.scheduler.retry_in("orders", 0) == state.registry.retry_in("orders", 0) == 0


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_a_phase_ends_at_its_share_and_a_call_gets_its_limit_or_what_is_left() -> None:
    clock = Clock(100.0)
    budget = Budget(clock, deadline=140.0, call_timeout=10.0)
    assert 0 < PARK_SHARE < SEND_SHARE < 1  # parking first, then the sends, then the rest
    assert (budget.end(PARK_SHARE), budget.end(SEND_SHARE), budget.end()) == (120, 134, 140)
    assert budget.timeout(PARK_SHARE) == 10  # the call timeout, while a phase has time
    clock.t = 115.0
    assert budget.timeout(PARK_SHARE) == 5 and budget.timeout() == 10
    clock.t = 125.0
    assert budget.timeout(PARK_SHARE) <= 0  # parking's time is up: no call starts
    assert budget.timeout(SEND_SHARE) == 9
