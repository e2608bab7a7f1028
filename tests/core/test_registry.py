"""The registry's requests and answers (core/registry.py), without DynamoDB: what `put`
writes is read back whole, a foreign item is not a record, and a claim's answer says who won."""

from __future__ import annotations

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
)


def written(record: Record) -> dict[str, Any]:
    """The item `put` asks DynamoDB to write (its one call, answered with success)."""
    flow = registry.put(TABLE, record, now_ms=1, timeout=1.0)
    [call] = next(flow)
    with pytest.raises(StopIteration) as done:
        flow.send([Reply()])
    assert done.value.value is True and call.api == "PutItem"
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
    assert done.value.value is False
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
