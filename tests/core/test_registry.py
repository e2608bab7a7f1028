"""The registry's requests and answers (core/registry.py), without DynamoDB: what `put`
writes is read back whole, a foreign item is not a record, and a claim's answer says who won."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import registry
from sqsdelay.core.flows import Fault, Reply
from sqsdelay.core.registry import Record
from sqsdelay.errors import RegistryError

TABLE = "sqsdelay-registry"
records = st.builds(
    Record,
    destination=st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    message_id=st.text(min_size=1, max_size=40),
    due_ms=st.integers(0, 10**15),
    state=st.just("scheduled"),
    route=st.sampled_from(["delay-queue", "parked"]),
    send_due_ms=st.integers(0, 10**15),
)


def written(record: Record) -> dict[str, Any]:
    """The item `put` asks DynamoDB to write (its one call, answered with success)."""
    flow = registry.put(TABLE, record, now_ms=1, timeout=1.0)
    [call] = next(flow)
    with pytest.raises(StopIteration) as done:
        flow.send([Reply()])
    assert done.value.value == "written" and call.api == "PutItem"
    return dict(call.params["Item"])


@given(records)
def test_what_put_writes_is_read_back_as_the_same_record(record: Record) -> None:
    assert registry.record_of(written(record)) == record


def test_a_foreign_or_broken_item_is_not_a_record() -> None:
    item = written(Record("orders", "m1", 10, "scheduled", "parked"))
    assert registry.record_of({**item, "state": {"S": "lost"}}) is None
    assert registry.record_of({**item, "due_ms": {"N": "soon"}}) is None
    assert registry.record_of({k: v for k, v in item.items() if k != "destination"}) is None


def test_a_duplicate_put_sends_nothing_and_a_failed_one_raises() -> None:
    record = Record("orders", "m1", 10, "scheduled", "parked")
    flow = registry.put(TABLE, record, now_ms=1, timeout=1.0)
    next(flow)
    with pytest.raises(StopIteration) as done:
        flow.send([Reply(fault=Fault("ConditionalCheckFailedException"))])
    assert done.value.value == "duplicate"
    # The id's earlier send ended (here: cancelled) with this due time: a millisecond later.
    record = replace(record, send_due_ms=10)
    ended = {**written(record), "state": {"S": "cancelled"}}
    flow = registry.put(TABLE, record, now_ms=1, timeout=1.0)
    next(flow)
    with pytest.raises(StopIteration) as done:
        flow.send([Reply(fault=Fault("ConditionalCheckFailedException", item=ended))])
    assert done.value.value == "due-taken"
    flow = registry.put(TABLE, record, now_ms=1, timeout=1.0)
    next(flow)
    with pytest.raises(RegistryError):
        flow.send([Reply(fault=Fault("ProvisionedThroughputExceededException", status=400))])


def item(**fields: Any) -> dict[str, Any]:
    base = written(Record("orders", "m1", 10, "scheduled", "delay-queue"))
    return {**base, **fields}


@pytest.mark.parametrize(
    ("fault", "claim"),
    [
        (None, "claimed"),
        (Fault("ThrottlingException"), "failed"),
        (Fault("ConditionalCheckFailedException"), "cancelled"),  # the item is gone
        (
            Fault("ConditionalCheckFailedException", item=item(state={"S": "cancelled"})),
            "cancelled",
        ),
        (Fault("ConditionalCheckFailedException", item=item()), "moved"),
        (
            Fault(
                "ConditionalCheckFailedException",
                item=item(state={"S": "handed-over"}, claimed_by={"S": "sqs-1"}),
            ),
            "in-hand",
        ),
        (
            Fault(
                "ConditionalCheckFailedException",
                item=item(state={"S": "handed-over"}, claimed_by={"S": "sqs-2"}),
            ),
            "duplicate",
        ),
    ],
)
def test_a_claims_answer_says_who_won(fault: Fault | None, claim: str) -> None:
    assert registry.claimed(fault, "sqs-1")[0] == claim


def test_a_copy_of_an_earlier_send_of_the_id_is_told_apart_by_its_due_time() -> None:
    """Found by `make test-model` (issue 58): a cancelled copy, still in the delay queue when
    its id was sent again, met the new send's record and was delivered in its place. A
    record knows the due times its own copies can carry: the send's, and each reschedule's."""
    sent = Record("orders", "m1", 10_000, "scheduled", "parked", send_due_ms=10_000)
    record = registry.record_of(written(sent))
    assert record is not None
    assert record.of_generation(10_000) and not record.of_generation(9_000)
    moved = replace(record, due_ms=20_000, moved=True, moved_dues=frozenset({15_000, 20_000}))
    assert all(moved.of_generation(d) for d in (10_000, 15_000, 20_000))
    assert not moved.of_generation(12_000)
    # No due time carried (no room for it), or a record written before: as before, its own.
    assert moved.of_generation(None)
    assert replace(moved, send_due_ms=0).of_generation(12_000)


def test_a_reschedule_adds_its_due_time_to_those_the_copies_may_carry() -> None:
    flow = registry.reschedule(TABLE, "orders", "m1", 20_000, now_ms=1, timeout=1.0)
    [call] = next(flow)
    assert "ADD moved_dues :dues" in call.params["UpdateExpression"]
    assert call.params["ExpressionAttributeValues"][":dues"] == {"NS": ["20000"]}
