"""Pausing a destination (core/pause.py): the step holds a paused destination's hand-overs
and forwards for the longest visibility and goes on with the rest; the tag is read at most
once a period, a failed read keeps the last known state and is said once; a resume
releases what was held, in due order, ten at a time."""

from __future__ import annotations

from typing import Any

from sqsdelay.core import pause
from sqsdelay.core.decision import Limits
from sqsdelay.core.flows import Call, Fault, Reply, drive
from sqsdelay.core.step import StepState
from tests.support.logs import capture_logs, events
from tests.support.steps import QF, T, message, run
from tests.support.stub import StubAws

TAGS = "ListQueueTags"


def paused_state() -> StepState:
    state = StepState()
    state.pauses.observed("orders-delay.fifo", {pause.PAUSED_TAG: "2026-01-01T00:00:00Z"}, 0.0)
    return state


def test_a_paused_destination_gets_nothing_its_requeues_go_on() -> None:
    stub = StubAws()
    state = paused_state()
    # due now (a hand-over), in 5 s (a hand-over with DelaySeconds), in a day (parked)
    received = [message(1, 0), message(2, 5), message(4, 86_400)]
    outcome = run(received, stub, state=state)
    assert outcome.ends == {"id1": "held", "id2": "held", "id4": "parked"}
    # without parking, a message not yet due is requeued as always
    assert run([message(3, 86_400)], stub, state=state, target=None).ends == {"id3": "requeued"}
    sent = [c for c in stub.calls if c.api == "SendMessageBatch"]
    assert [c.queue for c in sent] == ["orders-delay.fifo"]  # the requeue only
    hides = [c for c in stub.calls if c.api == "ChangeMessageVisibilityBatch"]
    timeouts = {
        e["ReceiptHandle"]: e["VisibilityTimeout"] for c in hides for e in c.params["Entries"]
    }
    cycle = Limits().max_native_delay_seconds  # one cycle: no faster than a requeue
    assert timeouts == {"rh1": cycle, "rh2": cycle} and cycle == 900
    assert state.pauses.held("orders-delay.fifo") == 2
    assert state.stats.events["delay.held_paused"] == 2


def test_a_paused_fifo_destination_holds_its_forwards_in_staging() -> None:
    stub = StubAws()
    state = StepState()
    state.pauses.observed(pause.tag_queue(QF), {pause.PAUSED_TAG: "x"}, 0.0)
    assert pause.tag_queue(QF) == "orders-delay-fifo.fifo"
    attrs = {"sqsdelay.GroupId": {"DataType": "String", "StringValue": "g"}}
    outcome = run([message(1, None, attrs=attrs)], stub, state=state, queues=QF)
    assert outcome.ends == {"id1": "held"}
    assert stub.count("SendMessageBatch") == 0
    [held] = state.pauses.take(pause.tag_queue(QF))
    assert held.queue == "orders-fifo-staging" and held.handle == "rh1"


def test_not_paused_nothing_changes() -> None:
    stub = StubAws()
    outcome = run([message(1, 0)], stub)
    assert outcome.ends == {"id1": "handed-over"}


def answer(tags: dict[str, str] | None, log: list[Call]) -> Any:
    """A caller that answers ListQueueTags with `tags` (None: a failure) and every
    ChangeMessageVisibilityBatch with success, noting the calls."""

    def call(calls: list[Call]) -> list[Reply]:
        log.extend(calls)
        out = []
        for c in calls:
            if c.api == TAGS:
                out.append(Reply({"Tags": tags}) if tags is not None else Reply(fault=Fault("X")))
            else:
                out.append(Reply({"Successful": [], "Failed": []}))
        return out

    return call


def test_the_tag_is_read_once_a_period_per_queue() -> None:
    pauses = pause.Pauses(check_seconds=30)
    calls: list[Call] = []
    paused = answer({pause.PAUSED_TAG: "t"}, calls)
    drive(pause.refresh(pauses, ["a", "a", "b"], 100.0, 5), paused)
    assert [c.queue for c in calls] == ["a", "b"]
    assert pauses.paused("a") and pauses.paused("b")
    drive(pause.refresh(pauses, ["a"], 129.0, 5), paused)
    assert len(calls) == 2  # not stale yet
    drive(pause.refresh(pauses, ["a"], 130.0, 5), answer({}, calls))
    assert len(calls) == 3 and not pauses.paused("a") and pauses.paused("b")


def test_a_failed_read_keeps_the_last_state_and_is_said_once() -> None:
    pauses = pause.Pauses(check_seconds=1)
    out = capture_logs()
    drive(pause.refresh(pauses, ["a"], 0.0, 5), answer({pause.PAUSED_TAG: "t"}, []))
    for now in (1.0, 2.0, 3.0):
        drive(pause.refresh(pauses, ["a"], now, 5), answer(None, []))
        assert pauses.paused("a")
    assert len(events(out, "destination.pause_read_failed")) == 1
    drive(pause.refresh(pauses, ["a"], 4.0, 5), answer({}, []))
    assert not pauses.paused("a")
    drive(pause.refresh(pauses, ["a"], 5.0, 5), answer(None, []))
    assert len(events(out, "destination.pause_read_failed")) == 2  # a new failure: said again


def test_a_resume_releases_what_is_held_in_due_order_ten_at_a_time() -> None:
    pauses = pause.Pauses(check_seconds=1)
    pauses.observed("a", {pause.PAUSED_TAG: "t"}, 0.0)
    dues = [T + (i * 7919) % 25 * 1000 for i in range(25)]
    for i, due in enumerate(dues):
        pauses.hold("a", f"m{i}", pause.Held("a", f"rh{i}", due))
    calls: list[Call] = []
    resumed = drive(pause.refresh(pauses, ["a"], 5.0, 5), answer({}, calls))
    assert resumed == ["a"]
    changes = [c for c in calls if c.api == "ChangeMessageVisibilityBatch"]
    assert [len(c.params["Entries"]) for c in changes] == [10, 10, 5]
    order = [int(e["ReceiptHandle"][2:]) for c in changes for e in c.params["Entries"]]
    assert [dues[i] for i in order] == sorted(dues)
    assert {e["VisibilityTimeout"] for c in changes for e in c.params["Entries"]} == {0}
    assert pauses.held("a") == 0 and pauses.holding() == []


def test_pause_and_resume_are_a_tag_and_its_removal() -> None:
    calls: list[Call] = []
    assert drive(pause.set_paused("q", True, "2026-11-28T09:00:00Z"), answer({}, calls)) is None
    assert drive(pause.set_paused("q", False, ""), answer({}, calls)) is None
    assert calls[0].api == "TagQueue"
    assert calls[0].params == {"Tags": {pause.PAUSED_TAG: "2026-11-28T09:00:00Z"}}
    assert calls[1].api == "UntagQueue" and calls[1].params == {"TagKeys": [pause.PAUSED_TAG]}
    assert drive(pause.read("q"), answer({pause.PAUSED_TAG: "t", "x": "y"}, [])) == {
        pause.PAUSED_TAG: "t",
        "x": "y",
    }
    assert isinstance(drive(pause.read("q"), answer(None, [])), Fault)


def test_a_hold_is_one_cycle_unless_the_setting_says_longer() -> None:
    state = paused_state()
    state.pauses.hold_seconds = 3_600
    stub = StubAws()
    run([message(1, 0)], stub, state=state)
    [hide] = [c for c in stub.calls if c.api == "ChangeMessageVisibilityBatch"]
    assert hide.params["Entries"][0]["VisibilityTimeout"] == 3_600
