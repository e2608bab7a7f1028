"""The deduplication id of a send into a FIFO destination (core/fifo_dedup.py): which key each
route takes, and that whatever a producer wrote into the attributes the forward reads, it
gets a key SQS takes, never an exception. The keys' values and their promises across copies
of one send are tested beside the other ids (tests/core/test_identity.py), and through the
worker's decisions (tests/core/test_decision.py)."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import fifo_dedup, message_shape, wire_format
from sqsdelay.core.types import Attributes, AttributeValue

DUE = 1_700_000_005_000
DEDUP = wire_format.DEDUPLICATION_ID_ATTRIBUTE
REPLAY = wire_format.REPLAY_ATTRIBUTE
ID = {wire_format.MESSAGE_ID_ATTRIBUTE: message_shape.string_attribute("order-1")}
SQS_ID_CHARACTERS = frozenset(string.ascii_letters + string.digits + string.punctuation)


def test_the_claims_key_keeps_its_value() -> None:
    """Part of the wire format from its first release (issue 58): a worker of a later version
    must derive the same key from the same staging message."""
    key = fifo_dedup.forward_dedup_id_of_claim("order-1", DUE, "sqs-1")
    assert key == "a4d34fe3b103ab4c31b08f3bea5a8bec86fbfe415f4252ccf10743d6a6b06b93"


def test_a_direct_send_takes_the_callers_id_else_the_id_and_due_time() -> None:
    assert fifo_dedup.direct_key("order-1", DUE, "task-7") == "task-7"
    assert fifo_dedup.direct_key("order-1", DUE, None) == fifo_dedup.forward_dedup_id(
        "order-1", DUE
    )


def test_a_claiming_hand_over_leaves_its_claims_key_first_and_the_due_time_alone_next() -> None:
    claimed, plain = fifo_dedup.staging_key_attributes(ID, DUE, "sqs-1")
    key = fifo_dedup.forward_dedup_id_of_claim("order-1", DUE, "sqs-1")
    assert claimed[DEDUP]["StringValue"] == key
    assert claimed[wire_format.DUE_AT_ATTRIBUTE] == plain[wire_format.DUE_AT_ATTRIBUTE]
    assert DEDUP not in plain  # the fallback when one more attribute does not fit
    # No claim (the registry off, or no record), a caller's own id, or no id of ours to
    # claim by: the due time only, the caller's id kept as it came.
    assert [DEDUP in a for a in fifo_dedup.staging_key_attributes(ID, DUE, None)] == [False]
    given = {**ID, DEDUP: message_shape.string_attribute("task-7")}
    (kept,) = fifo_dedup.staging_key_attributes(given, DUE, "sqs-1")
    assert kept[DEDUP]["StringValue"] == "task-7"
    assert len(list(fifo_dedup.staging_key_attributes({}, DUE, "sqs-1"))) == 1


def test_the_forward_takes_a_carried_id_then_the_due_time_then_the_content() -> None:
    replay = {REPLAY: message_shape.string_attribute("e-1")}
    carried = {DEDUP: message_shape.string_attribute("task-7")}
    key = fifo_dedup.forward_key
    assert key("order-1", "b", carried, DUE) == ("task-7", None)
    assert key("order-1", "b", {**carried, **replay}, DUE) == (
        fifo_dedup.forward_dedup_id_given("task-7", "e-1"),
        None,
    )
    assert key("order-1", "b", replay, DUE) == (
        fifo_dedup.forward_dedup_id_of_replay("order-1", DUE, "e-1"),
        None,
    )
    assert key("order-1", "b", {}, DUE) == (fifo_dedup.forward_dedup_id("order-1", DUE), None)
    assert key("order-1", "b", {}, None) == (
        fifo_dedup.forward_dedup_id_by_content("order-1", "b", {}),
        None,
    )


producer_values = st.one_of(
    st.text(max_size=300).map(message_shape.string_attribute),
    st.builds(
        lambda t, v: {"DataType": t, "StringValue": v},
        st.sampled_from(["String", "Number", "String.x", "Binary"]),
        st.text(max_size=50),
    ),
    st.binary(max_size=20).map(lambda b: {"DataType": "Binary", "BinaryValue": b}),
)


@given(producer_values, producer_values, st.one_of(st.none(), st.integers(0, 2**63)))
def test_whatever_a_producer_wrote_the_forward_has_a_key_sqs_takes(
    dedup: AttributeValue, replay: AttributeValue, due: int | None
) -> None:
    attributes: Attributes = {DEDUP: dedup, REPLAY: replay}
    key, ignored = fifo_dedup.forward_key("order-1", "body", attributes, due)
    assert 1 <= len(key) <= 128 and set(key) <= SQS_ID_CHARACTERS
    carried = dedup.get("StringValue")
    if ignored is not None:  # said why, and not the producer's value
        assert DEDUP in ignored and key != carried
