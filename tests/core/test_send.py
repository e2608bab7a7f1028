"""What a send is (core/send.py's `plan`), without a queue: the route, the target, the
attributes the worker reads, the group and deduplication id, and the refusals."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import identity, message_shape, wire_format
from sqsdelay.core.delays import whole_seconds
from sqsdelay.core.quotas import MAX_MESSAGE_BYTES
from sqsdelay.core.send import Message, PlannedSend, SendLimits, plan
from sqsdelay.errors import InvalidDelay, InvalidMessage, MessageDelayTooLong, TooManyAttributes

LIMITS = SendLimits(
    queue_prefix="p-",
    max_delay_seconds=10 * 365 * 86_400,
    max_native_delay_seconds=900,
    unrestricted=True,
    wire_format="raw",
    max_message_bytes=MAX_MESSAGE_BYTES,
    install_hint=lambda queue: f"sqsdelay install {queue}",
)
NOW = 1_700_000_000.25


def string(attributes: dict[str, object], name: str) -> object:
    return attributes[name]["StringValue"]  # type: ignore[index]


@given(delay=st.integers(0, 900))
def test_a_delay_within_the_cycle_goes_straight_to_the_destination(delay: int) -> None:
    sent = plan("orders", Message("b", delay=delay, id="m1"), LIMITS, now=NOW)
    assert (sent.route, sent.queue, sent.delay_seconds) == ("direct", "p-orders", delay)
    assert sent.request.get("DelaySeconds", 0) == delay
    # Only the id, as NServiceBus sets it on every send: the consumer's guard keys on it.
    assert sent.request["MessageAttributes"] == {
        wire_format.MESSAGE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": "m1"}
    }
    assert sent.nservicebus_message_id == sent.message_id == "m1"


def attrs_of(count: int) -> dict[str, object]:
    return {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(count)}


@given(
    count=st.integers(0, 10),
    delay=st.integers(0, 900),
    fifo=st.booleans(),
    mode=st.sampled_from(["raw", "nservicebus"]),
)
def test_a_direct_send_carries_the_id_when_there_is_room_and_is_never_refused_for_it(
    count: int, delay: int, fifo: bool, mode: str
) -> None:
    limits = replace(LIMITS, wire_format=mode)  # type: ignore[arg-type]
    queue, group = ("orders.fifo", "g") if fifo else ("orders", None)
    message = Message(
        "b",
        delay=0 if fifo else delay,
        id="m1",
        attributes=attrs_of(count),
        group_id=group,
        message_type="Shop.Order" if mode == "nservicebus" else None,
    )
    sent = plan(queue, message, limits, now=NOW)
    attrs = sent.request.get("MessageAttributes", {})
    assert sent.route == "direct" and {f"a{i}" for i in range(count)} <= set(attrs)
    if count < 10:
        assert string(attrs, wire_format.MESSAGE_ID_ATTRIBUTE) == "m1"
        assert sent.nservicebus_message_id == "m1"
    else:  # the caller's ten: sent as given, the guard then asks for a key
        assert wire_format.MESSAGE_ID_ATTRIBUTE not in attrs and len(attrs) == 10
        assert sent.nservicebus_message_id is None


def test_a_direct_send_at_the_size_limit_goes_without_the_id() -> None:
    body = "x" * (MAX_MESSAGE_BYTES - 10)
    sent = plan("orders", Message(body, delay=5, id="m1"), LIMITS, now=NOW)
    assert "MessageAttributes" not in sent.request and sent.nservicebus_message_id is None
    assert sent.size_bytes == len(body)


def test_the_delay_queue_and_staging_routes_refuse_a_message_without_room_for_the_id() -> None:
    with pytest.raises(TooManyAttributes):
        plan("orders", Message("b", delay=5000, attributes=attrs_of(9)), LIMITS, now=NOW)
    with pytest.raises(TooManyAttributes):
        plan(
            "orders.fifo",
            Message("b", delay=5, attributes=attrs_of(9), group_id="g"),
            LIMITS,
            now=NOW,
        )


@given(millis=st.integers(900_001, 10**11))
def test_a_longer_delay_goes_to_the_delay_queue_with_what_the_worker_reads(millis: int) -> None:
    delay = timedelta(milliseconds=millis)
    sent = plan("orders", Message("b", delay=delay, id="m1"), LIMITS, now=NOW)
    seconds = whole_seconds(millis)
    attrs = sent.request["MessageAttributes"]
    assert (sent.route, sent.queue, sent.delay_seconds) == (
        "delay-queue",
        "p-orders-delay.fifo",
        seconds,
    )
    assert string(attrs, wire_format.DELAY_ATTRIBUTE) == str(seconds)
    # one group per message, named by its id, as NServiceBus names it
    assert sent.request["MessageGroupId"] == string(attrs, wire_format.MESSAGE_ID_ATTRIBUTE)
    due = int(NOW * 1000) + millis
    assert sent.request["MessageDeduplicationId"] == identity.send_dedup_id_of_due("m1", NOW, due)
    # the due time to the millisecond (the last hop is exact; it tells the send's copies
    # apart from an earlier send's of the id), which the fraction of a second gave before
    assert attrs[wire_format.DUE_AT_ATTRIBUTE]["StringValue"] == str(due)
    assert wire_format.DELAY_MS_ATTRIBUTE not in attrs


def test_a_fifo_destination_gets_its_group_and_a_key_of_this_send() -> None:
    now = plan("orders.fifo", Message("b", delay=0, id="m1", group_id="g"), LIMITS, now=NOW)
    assert (now.queue, now.request["MessageGroupId"]) == ("p-orders.fifo", "g")
    later = plan("orders.fifo", Message("b", delay=30, id="m1", group_id="g"), LIMITS, now=NOW)
    assert later.queue == "p-orders-fifo-staging" and later.request["DelaySeconds"] == 30
    assert string(later.request["MessageAttributes"], wire_format.GROUP_ID_ATTRIBUTE) == "g"


def test_a_delay_longer_than_the_maximum_asks_whether_it_was_milliseconds() -> None:
    with pytest.raises(InvalidDelay, match="was it given in milliseconds"):
        plan("orders", Message("b", delay=LIMITS.max_delay_seconds + 1), LIMITS, now=NOW)


def test_without_unrestricted_delays_a_long_one_says_how_to_install() -> None:
    limits = replace(LIMITS, unrestricted=False)
    with pytest.raises(MessageDelayTooLong, match="sqsdelay install orders"):
        plan("orders", Message("b", delay=901), limits, now=NOW)


def test_our_own_attributes_cannot_be_given() -> None:
    own = {wire_format.DUE_AT_ATTRIBUTE: {"DataType": "Number", "StringValue": "1"}}
    with pytest.raises(InvalidMessage, match="is set by sqsdelay"):
        plan("orders", Message("b", delay=1, attributes=own), LIMITS, now=NOW)


# ---- a caller's deduplication id (issue 58, 10) ----

DEDUP = wire_format.DEDUPLICATION_ID_ATTRIBUTE


def test_a_deduplication_id_rides_each_route_into_a_fifo_destination() -> None:
    """At once: SQS's MessageDeduplicationId itself. Delayed: an attribute the forward turns
    into it; the delay queue's own key stays the send's (a botocore retry's copy is dropped
    there, a new send is not), so nothing about a send without one changes."""

    def sent(delay: float, dedup: str | None = "task-7") -> PlannedSend:
        message = Message("b", delay=delay, id="m1", group_id="g", deduplication_id=dedup)
        return plan("orders.fifo", message, LIMITS, now=NOW)

    now, staged, looped = sent(0), sent(5), sent(3600)
    assert now.request["MessageDeduplicationId"] == "task-7"
    assert DEDUP not in now.request.get("MessageAttributes", {})
    for p in (staged, looped):
        assert string(p.request["MessageAttributes"], DEDUP) == "task-7"
    assert "MessageDeduplicationId" not in staged.request
    looped_key = identity.send_dedup_id_of_due("m1", NOW, int(NOW * 1000) + 3_600_000)
    assert looped.request["MessageDeduplicationId"] == looped_key
    for delay in (0, 5, 3600):  # without one: as before
        assert DEDUP not in sent(delay, None).request.get("MessageAttributes", {})


@pytest.mark.parametrize("dedup", ["", "x" * 129, "with space", "é", "tab\t"])
def test_a_deduplication_id_sqs_would_refuse_is_refused_before_sending(dedup: str) -> None:
    message = Message("b", delay=5, group_id="g", deduplication_id=dedup)
    with pytest.raises(InvalidMessage, match="1 to 128 letters, digits or ASCII punctuation"):
        plan("orders.fifo", message, LIMITS, now=NOW)


@pytest.mark.parametrize("delay", [0, 5, 3600])
def test_a_standard_destination_refuses_a_deduplication_id_as_sqs_does(delay: int) -> None:
    """SQS refuses MessageDeduplicationId on a standard queue (InvalidParameterValue, "not
    valid for this queue type"): refused at once, saying what to do, whatever the route."""
    message = Message("b", delay=delay, deduplication_id="task-7")
    with pytest.raises(InvalidMessage, match="FIFO destination") as raised:
        plan("orders", message, LIMITS, now=NOW)
    assert "docs/consumers.md" in str(raised.value)


def test_a_caller_may_not_set_the_attribute_itself() -> None:
    attrs = {DEDUP: {"DataType": "String", "StringValue": "task-7"}}
    with pytest.raises(InvalidMessage, match="set by sqsdelay"):
        plan("orders.fifo", Message("b", delay=5, group_id="g", attributes=attrs), LIMITS, now=NOW)


@pytest.mark.parametrize(("delay", "most"), [(5, 7), (3600, 6)])
def test_no_room_for_the_deduplication_id_is_refused_saying_how_many_fit(
    delay: int, most: int
) -> None:
    """Staging: the group, the id and the deduplication id; the delay queue: the delay too.
    Without room the forward could not keep it: refused, not sent without."""

    def attrs(n: int) -> dict[str, object]:
        return {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(n)}

    def message(n: int, dedup: str | None = "task-7") -> Message:
        return Message("b", delay=delay, group_id="g", attributes=attrs(n), deduplication_id=dedup)

    plan("orders.fifo", message(most), LIMITS, now=NOW)
    plan("orders.fifo", message(most + 1, None), LIMITS, now=NOW)  # room without it
    with pytest.raises(TooManyAttributes, match=f"at most {most} attributes of your own"):
        plan("orders.fifo", message(most + 1), LIMITS, now=NOW)


def test_a_send_a_millisecond_later_is_planned_as_for_that_delay() -> None:
    """`registry.put` answers `due-taken` when the id's earlier, ended send had this due
    time: the send goes a millisecond later, every field as `plan` makes it for that delay."""
    from sqsdelay.core.send import a_millisecond_later

    for millis in (3_600_000, 3_600_999):
        first = plan(
            "orders", Message("b", delay=timedelta(milliseconds=millis), id="m1"), LIMITS, now=NOW
        )
        later = plan(
            "orders",
            Message("b", delay=timedelta(milliseconds=millis + 1), id="m1"),
            LIMITS,
            now=NOW,
        )
        assert a_millisecond_later(first, NOW) == later


def test_a_body_at_the_size_limit_goes_through_the_delay_queue_without_its_due_time() -> None:
    """The due time gives way to the body, as to the caller's attributes (issue 58 added it to
    the delay-queue send: a body that fitted before must still fit)."""
    roomy = plan("orders", Message("x" * 1000, delay=3600, id="m1"), LIMITS, now=NOW)
    attrs = dict(roomy.request["MessageAttributes"])
    del attrs[wire_format.DUE_AT_ATTRIBUTE]
    exact = replace(LIMITS, max_message_bytes=message_shape.message_size("x" * 1000, attrs))
    tight = plan("orders", Message("x" * 1000, delay=3600, id="m1"), exact, now=NOW)
    assert wire_format.DUE_AT_ATTRIBUTE not in tight.request["MessageAttributes"]
    assert tight.size_bytes == exact.max_message_bytes
