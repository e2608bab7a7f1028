"""The batch step with the registry (SQSDELAY_REGISTRY=dynamodb), driven by the stub: the
records decide what is dropped, moved or claimed, whatever the registry answers."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqsdelay.core import registry, wirenames
from sqsdelay.core.decision import Limits
from sqsdelay.core.step import StepConfig, StepState
from tests.core.test_step import DAY, Clock, Q, T, message, run
from tests.support.stub import StubAws

TABLE = "sqsdelay-scheduled"
CONFIG = StepConfig(limits=Limits(), call_timeout=10, registry_table=TABLE)


def keyed(i: int, delay: int, **system: str) -> Any:
    ident = {wirenames.MESSAGE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": f"k{i}"}}
    return message(i, delay, attrs=ident, **system)


def item(i: int, state: str, due_ms: int, *, moved: bool = False, claimed_by: str = "") -> Any:
    record = registry.Record(Q.destination, f"k{i}", due_ms, state, "delay-queue", True, moved)  # type: ignore[arg-type]
    return {
        **registry.key(Q.destination, record.message_id),
        "destination": {"S": record.destination},
        "message_id": {"S": record.message_id},
        "due_ms": {"N": str(due_ms)},
        "state": {"S": state},
        "route": {"S": "delay-queue"},
        "sent": {"BOOL": True},
        "moved": {"BOOL": moved},
        **({"claimed_by": {"S": claimed_by}} if claimed_by else {}),
    }


def test_a_cancelled_message_is_dropped_a_moved_one_follows_its_record() -> None:
    stub = StubAws()
    stub.items = {
        f"{Q.destination}/k1": item(1, "cancelled", T + 5_000),
        f"{Q.destination}/k2": item(2, "scheduled", T + 2 * DAY * 1000, moved=True),
        f"{Q.destination}/k3": item(3, "scheduled", T + 5_000),
        f"{Q.destination}/k4": item(4, "handed-over", T + 5_000, claimed_by="someone-else"),
    }
    batch = [keyed(1, 5), keyed(2, 5), keyed(3, 5), keyed(4, 5), keyed(5, 5)]
    outcome = run(batch, stub, config=CONFIG)
    assert outcome.ends == {
        "id1": "cancelled",
        "id2": "requeued",  # moved two days later: back into the loop, not handed over
        "id3": "handed-over",
        "id4": "dropped",  # another copy was handed over
        "id5": "handed-over",  # no record (NServiceBus, or sent without the registry)
    }
    assert sorted(stub.deleted[Q.delay]) == [f"rh{i}" for i in range(1, 6)]
    assert [e["MessageBody"] for e in stub.queues[Q.destination]] == ["body 3", "body 5"]
    requeued = stub.queues[Q.delay][0]["MessageAttributes"]
    assert requeued[wirenames.DUE_AT_ATTRIBUTE]["StringValue"] == str(T + 2 * DAY * 1000)
    assert stub.items[f"{Q.destination}/k3"]["state"] == {"S": "handed-over"}
    assert stub.count("UpdateItem") == 1  # one claim: k3 (k5 has no record)


def test_a_registry_that_does_not_answer_holds_and_never_dead_letters() -> None:
    stub = StubAws()
    stub.items = {f"{Q.destination}/k1": item(1, "scheduled", T + 5_000)}
    stub.throttle("BatchGetItem", times=1)
    state, clock = StepState(), Clock()
    first = run([keyed(1, 5)], stub, config=CONFIG, state=state, clock=clock)
    assert first.ends == {"id1": "held"} and first.held[0].reason == "registry unavailable"
    assert stub.queues[Q.destination] == [] and stub.queues["error"] == []
    clock.advance(0.2)  # backing off: the next batch does not even ask
    second = run([keyed(1, 5)], stub, config=CONFIG, state=state, clock=clock)
    assert second.ends == {"id1": "held"} and stub.count("BatchGetItem") == 1
    clock.advance(5)
    third = run([keyed(1, 5)], stub, config=CONFIG, state=state, clock=clock)
    assert third.ends == {"id1": "handed-over"}


STATES = st.sampled_from(["none", "scheduled", "moved", "cancelled", "mine", "other"])
FAULT = st.sampled_from([None, "throttle", "timeout", "drop"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(STATES, st.integers(0, 40)), min_size=1, max_size=10), FAULT, FAULT)
def test_no_cancelled_message_is_ever_sent_and_every_record_ends_once(
    recs: list[tuple[str, int]], read_fault: str | None, claim_fault: str | None
) -> None:
    stub = StubAws()
    for api, fault in (("BatchGetItem", read_fault), ("UpdateItem", claim_fault)):
        if fault is not None:
            getattr(stub, fault)(api)
    batch = []
    for i, (kind, delay) in enumerate(recs):
        batch.append(keyed(i, delay))
        due = T + delay * 1000
        if kind in ("scheduled", "moved", "cancelled"):
            state = "cancelled" if kind == "cancelled" else "scheduled"
            moved_due = due + (7_000 if delay % 2 else -3_000)
            stub.items[f"{Q.destination}/k{i}"] = item(
                i, state, moved_due if kind == "moved" else due, moved=kind == "moved"
            )
        elif kind in ("mine", "other"):
            claimant = f"id{i}" if kind == "mine" else "another-copy"
            stub.items[f"{Q.destination}/k{i}"] = item(i, "handed-over", due, claimed_by=claimant)
    outcome = run(batch, stub, config=CONFIG)
    assert set(outcome.ends) == {m.message_id for m in batch}
    sent = {e["MessageBody"] for e in stub.queues[Q.destination]}
    for i, (kind, _) in enumerate(recs):
        record = stub.items.get(f"{Q.destination}/k{i}")
        if f"body {i}" in sent and record is not None:
            # Handed over only by the copy that holds the claim, and never once cancelled.
            assert record["state"]["S"] == "handed-over" and record["claimed_by"]["S"] == f"id{i}"
        if kind in ("cancelled", "other"):
            assert f"body {i}" not in sent
    assert stub.queues["error"] == []  # a registry fault never dead-letters


ANY_VALUE = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=20),
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=5), max_size=3),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["DataType", "StringValue", "BinaryValue"]), ANY_VALUE),
        min_size=1,
        max_size=10,
    )
)
def test_whatever_a_producer_wrote_as_the_id_every_record_ends_once(
    values: list[dict[str, Any]],
) -> None:
    """NServiceBus.MessageId is the registry's key: any value a producer put there (not a
    string, too long, binary) is looked up only when it is a valid id, and never stops the
    batch."""
    stub = StubAws()
    batch = [
        message(i, 5, attrs={wirenames.MESSAGE_ID_ATTRIBUTE: value})
        for i, value in enumerate(values)
    ]
    outcome = run(batch, stub, config=CONFIG)
    assert set(outcome.ends) == {m.message_id for m in batch}
    asked = [
        k["id"]["S"]
        for c in stub.calls
        if c.api == "BatchGetItem"
        for k in next(iter(c.params["RequestItems"].values()))["Keys"]
    ]
    for key in asked:
        registry.check_message_id(key.split("/", 1)[1])  # only valid ids were looked up
