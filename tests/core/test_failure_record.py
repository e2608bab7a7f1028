"""The failure record (core/failure_record.py): what poison writes, replay reads back."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import failure_record, message_shape, quotas, wire_format
from sqsdelay.core.failure_record import Replay, plan_replay
from sqsdelay.core.received import Received
from sqsdelay.core.types import Attributes

DELAY_QUEUE = "p-orders-delay.fifo"
foreign_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True).filter(
    lambda name: name not in wire_format.OWN_ATTRIBUTES
)
foreign = st.dictionaries(
    foreign_names,
    st.text(min_size=1, max_size=30).map(message_shape.string_attribute),
    max_size=6,
)


def written(received: Received, reason: str = "bad") -> Received:
    attrs = failure_record.attributes(received, reason, DELAY_QUEUE, quotas.MAX_MESSAGE_BYTES)
    return Received("e1", "r1", received.body, attrs)


@given(
    others=foreign,
    delay=st.integers(0, 10**9),
    due=st.none() | st.integers(0, 10**15),
    body=st.text(max_size=200),
)
def test_whatever_a_producer_wrote_replay_restores(
    others: Attributes, delay: int, due: int | None, body: str
) -> None:
    attrs = {**others, wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute(str(delay))}
    if due is not None:
        attrs[wire_format.DUE_AT_ATTRIBUTE] = message_shape.number_attribute(due)
    plan = plan_replay(written(Received("m", "r", body, attrs)), DELAY_QUEUE)
    # ... and a replay carries its token: the error-queue message's id (issue 58).
    token = {wire_format.REPLAY_ATTRIBUTE: message_shape.string_attribute("e1")}
    assert plan == Replay(DELAY_QUEUE, {**attrs, **token})


def test_the_record_folds_our_attributes_and_keeps_the_reason() -> None:
    attrs = {
        wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute("x"),
        "keep": message_shape.string_attribute("k"),
    }
    out = written(Received("m", "r", "b", attrs, {"ApproximateReceiveCount": "3"}), "why")
    assert set(out.attributes) == {"keep", wire_format.FAILURE_ATTRIBUTE}
    record = json.loads(out.attributes[wire_format.FAILURE_ATTRIBUTE]["StringValue"])
    assert record == {
        "reason": "why",
        "queue": DELAY_QUEUE,
        "delay_seconds": "x",
        "due_at": None,
        "receive_count": 3,
    }
    assert "no valid delay to restore (why)" in str(plan_replay(out, DELAY_QUEUE))


def test_a_message_with_no_room_keeps_its_attributes_and_cannot_be_replayed() -> None:
    body = "x" * (quotas.MAX_MESSAGE_BYTES - 100)
    attrs = {wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute("60")}
    out = failure_record.attributes(
        Received("m", "r", body, attrs), "r", DELAY_QUEUE, quotas.MAX_MESSAGE_BYTES
    )
    assert out == attrs
    assert "no sqsdelay.Failure record" in str(plan_replay(Received("e", "r", body, out), "q"))


def test_a_record_of_another_queue_or_not_json_is_skipped() -> None:
    attrs = {wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute("60")}
    out = written(Received("m", "r", "b", attrs))
    assert plan_replay(out, "other-delay.fifo") == f"belongs to {DELAY_QUEUE!r}"
    broken = {wire_format.FAILURE_ATTRIBUTE: message_shape.string_attribute("{")}
    assert plan_replay(Received("m", "r", "b", broken), DELAY_QUEUE) == (
        "sqsdelay.Failure record is not JSON"
    )
