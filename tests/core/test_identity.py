"""A message's identity (core/identity.py): the values are the wire format's, and each key
keeps its promise (stable across copies of one send, new for a new send, within SQS's limits)."""

from __future__ import annotations

import json
import string
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import fifo_dedup, identity, message_shape, parking, wire_format
from sqsdelay.core.decision import Forward, HandOver, Limits, Requeue, decide, forward
from sqsdelay.core.received import Received
from sqsdelay.core.send import Message, SendLimits, park_request, plan
from sqsdelay.core.types import Attributes
from sqsdelay.errors import InvalidInput, InvalidMessage

T = 1_700_000_000_000
NOW = 1_700_000_000.25
LIMITS = SendLimits("p-", 10**9, 900, True, "raw", 262_144, lambda q: f"install {q}")
# SQS's MessageGroupId and MessageDeduplicationId: 1 to 128 alphanumerics and punctuation.
SQS_ID_CHARACTERS = frozenset(string.ascii_letters + string.digits + string.punctuation)


def within_sqs_limits(text: str) -> bool:
    return 1 <= len(text) <= 128 and set(text) <= SQS_ID_CHARACTERS


# ---- the values: computed with the code before it moved here (wire compatibility) ----

PINNED = {
    "send": "739bbca67e8c0155019293de4326557e8b833d2140e7e982d43c156b53776c96",
    "send at a whole second": "30ada747533303bc9d0396133cf2de30c39892e055a6ed0bb2aa48899fb3fc98",
    "fifo at once": "edc6fd0b3b500a8d22ca29e69e1e3cf458ec522ceb23f38beb8850abf567b91f",
    "requeue": "b8a1c755abf661e4917c465282b37f644b3970b5cd54c0225c68cfd5ea82657c",
    "forward": "707324e252fbed0b72fb2da450db490f663bfe362081b6da6a96baaea3eedd37",
    "schedule": "sqsdelay-e53ba86ac5512e4365c463c84d9d56674298538298d7f9b7",
    "park": "4ede3b84b708bff76f13bf37d031dc4c033a47bd1c04d16645129c73b58ac8c9",
    "park at send": "333fcf01785ae9a0ceba5b5137f546377a7972be8610722fa82db36afcc33a5a",
    "replay": "2b464329422be20b7993ac583e97368069acda11bc2d3cf6b131ee1039a4486e",
    # Added with issue 45 §4.2 (a staging message without room for sqsdelay.DueAt).
    "forward by content": "fc77086718757517355432594d650d512166226b1b1fbd127f3d16a125957a6f",
    # Added with issue 58: the delay queue's key of a send, with its due time.
    "send with its due time": "f146d83c4143e8214ae3f16066a178394340cb70c3916c0a4293030b6136203e",
    # Added with issue 58 (10): a replay of a send that named its deduplication id.
    "replay with a deduplication id": (
        "d6f7b9ff8792978e1e2dbbb58ff517f117e79dec224eb0cc3e55faaf7059f61d"
    ),
}


def test_the_functions_give_the_values_the_code_gave_before_it_moved() -> None:
    assert identity.send_dedup_id("order-1", NOW) == PINNED["send"]
    assert identity.send_dedup_id("order-1", 1_700_000_000) == PINNED["send at a whole second"]
    assert fifo_dedup.forward_dedup_id("order-1", 1_700_000_000_250) == PINNED["fifo at once"]
    assert identity.requeue_dedup_id("dd1", "sqs-1") == PINNED["requeue"]
    assert fifo_dedup.forward_dedup_id("order-1", T + 5000) == PINNED["forward"]
    assert identity.schedule_name("p-orders-delay.fifo", "order-1") == PINNED["schedule"]
    assert identity.park_dedup_id("order-1", T + 5000) == PINNED["park"]
    assert identity.replay_dedup_id("err-1") == PINNED["replay"]
    content: Attributes = {
        "a": message_shape.string_attribute("v"),
        "bin": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    }
    by_content = fifo_dedup.forward_dedup_id_by_content("order-1", "b", content)
    assert by_content == PINNED["forward by content"]
    replay = fifo_dedup.forward_dedup_id_given("task-7", "e-1")
    assert replay == PINNED["replay with a deduplication id"]


def test_the_callers_give_the_values_they_gave_before() -> None:
    # The delay queue's key has the send's due time since issue 58 (`send_dedup_id_of_due`):
    # it is compared only with the copies of one request, which one sender makes.
    sent = plan("orders", Message("x", delay=3600, id="order-1"), LIMITS, now=NOW)
    due = int(NOW * 1000) + 3_600_000
    assert sent.request["MessageDeduplicationId"] == PINNED["send with its due time"]
    assert sent.request["MessageDeduplicationId"] == identity.send_dedup_id_of_due(
        "order-1", NOW, due
    )
    assert sent.request["MessageGroupId"] == "order-1"
    at_once = Message("x", delay=0, id="order-1", group_id="g")
    fifo = plan("orders.fifo", at_once, LIMITS, now=NOW)
    assert fifo.request["MessageDeduplicationId"] == PINNED["fifo at once"]

    system = {
        "SentTimestamp": str(T),
        "ApproximateReceiveCount": "1",
        "ApproximateFirstReceiveTimestamp": str(T + 900_000),
        "MessageGroupId": "order-1",
        "MessageDeduplicationId": "dd1",
    }
    attrs = {
        wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute("3600"),
        wire_format.MESSAGE_ID_ATTRIBUTE: message_shape.string_attribute("order-1"),
    }
    requeue = decide(
        Received("sqs-1", "rh", "b", attrs, system), local_now_ms=0, offset_ms=None, lim=Limits()
    )
    assert isinstance(requeue, Requeue)
    assert (requeue.dedup_id, requeue.group_id) == (PINNED["requeue"], "order-1")

    fwd = forward(staged("s1", {"order-1": T + 5000}), lim=Limits())
    assert isinstance(fwd, Forward) and fwd.dedup_id == PINNED["forward"]

    target = parking.ParkTarget("grp", "arn:role", "url", "arn:dlq")
    month = plan("orders", Message("x", delay=86_400 * 30, id="order-1"), LIMITS, now=NOW)
    request = park_request(month, LIMITS, target, now=NOW, after=3600)
    assert request is not None and request["Name"] == PINNED["schedule"]
    assert (
        json.loads(request["Target"]["Input"])["MessageDeduplicationId"] == PINNED["park at send"]
    )


def staged(sqs_id: str, due: dict[str, int] | None = None, **extra: str) -> Received:
    """A staging-queue message as a hand-over leaves it (`due`: its id and due time)."""
    ((ident, due_ms),) = (due or {"order-1": T + 5000}).items()
    attrs: Attributes = {
        wire_format.GROUP_ID_ATTRIBUTE: message_shape.string_attribute("g"),
        wire_format.MESSAGE_ID_ATTRIBUTE: message_shape.string_attribute(ident),
        wire_format.DUE_AT_ATTRIBUTE: message_shape.number_attribute(due_ms),
    }
    attrs |= {k: message_shape.string_attribute(v) for k, v in extra.items()}
    system = {"SentTimestamp": str(T), "ApproximateFirstReceiveTimestamp": str(T + 5000)}
    return Received(sqs_id, "rh", "b", attrs, system)


# ---- the properties ----

ids = st.text(alphabet=sorted(SQS_ID_CHARACTERS), min_size=1, max_size=128)
nows = st.floats(min_value=1e9, max_value=4e9, allow_nan=False)
user_attributes = st.dictionaries(
    st.from_regex(r"[a-z][a-z0-9]{0,9}", fullmatch=True),
    st.text(alphabet=string.ascii_letters, min_size=1, max_size=8),
    max_size=8,  # eight: no room for sqsdelay.DueAt on the staging message
)


@given(st.text(max_size=140))
def test_a_message_id_is_taken_exactly_when_sqs_takes_it_as_a_group(text: str) -> None:
    if within_sqs_limits(text):
        assert identity.check_message_id(text) == text
    else:
        with pytest.raises(InvalidInput):
            identity.check_message_id(text)


@given(ids, ids, nows, st.integers(0, 2**53), st.text(max_size=200))
def test_every_key_is_within_sqs_limits(
    ident: str, other: str, now: float, due: int, body: str
) -> None:
    attrs = {"a": message_shape.string_attribute(other)}
    for key in (
        identity.send_dedup_id(ident, now),
        identity.requeue_dedup_id(other, ident),
        identity.requeue_group_id(None, ident),
        fifo_dedup.forward_dedup_id(ident, due),
        fifo_dedup.forward_dedup_id_by_content(ident, body, attrs),
        identity.park_dedup_id(ident, due),
        identity.replay_dedup_id(ident),
        identity.new_message_id(),
    ):
        assert within_sqs_limits(key)
    name = identity.schedule_name(other, ident)
    assert len(name) <= 64 and name.startswith("sqsdelay-")  # Scheduler's limit


def copies(planned: Any, *sqs_ids: str) -> list[Received]:
    """The staging messages one planned send can leave: the same request, sent once per
    copy (a botocore retry of a lost answer), each with its own SQS id and timestamp."""
    req = planned.request
    out = []
    for i, sqs_id in enumerate(sqs_ids):
        sent = int(NOW * 1000) + i * 1500
        system = {
            "SentTimestamp": str(sent),
            "ApproximateFirstReceiveTimestamp": str(sent + 1000 * req.get("DelaySeconds", 0)),
            "ApproximateReceiveCount": str(1 + i),
        }
        out.append(
            Received(
                sqs_id,
                f"rh-{i}",
                req["MessageBody"],
                dict(req.get("MessageAttributes", {})),
                system,
            )
        )
    return out


@given(ids, nows, st.floats(0.001, 900), user_attributes)
def test_every_copy_of_a_send_into_a_fifo_destination_is_forwarded_with_one_key(
    ident: str, now: float, delay: float, attrs: dict[str, str]
) -> None:
    attributes = {k: message_shape.string_attribute(v) for k, v in attrs.items()}
    message = Message("x", delay=delay, id=ident, group_id="g", attributes=attributes)
    planned = plan("orders.fifo", message, LIMITS, now=now)
    assert planned.queue == "p-orders-fifo-staging"
    keys = {
        f.dedup_id
        for r in copies(planned, "s1", "s2", "s3")
        if isinstance(f := forward(r, lim=Limits()), Forward)
    }
    assert len(keys) == 1 and within_sqs_limits(keys.pop())


def test_copies_of_a_send_with_eight_attributes_are_forwarded_once() -> None:
    """Issue 45 §4.2: eight attributes of the caller's leave no room for sqsdelay.DueAt in
    the staging message; every copy (a botocore retry, a lost answer) must still give the
    forward one deduplication key, and a new send of the id (a Celery retry counts its
    retries in the body) another."""
    eight = {f"a{i}": message_shape.string_attribute("v") for i in range(8)}

    def staged_send(body: str, now: float) -> Any:
        message = Message(body, delay=5, id="task-1", group_id="g", attributes=eight)
        return plan("orders.fifo", message, LIMITS, now=now)

    planned = staged_send('{"retries": 0}', NOW)
    assert wire_format.DUE_AT_ATTRIBUTE not in planned.request["MessageAttributes"]
    one, two = (forward(r, lim=Limits()) for r in copies(planned, "s1", "s2"))
    assert isinstance(one, Forward) and isinstance(two, Forward)
    assert one.dedup_id == two.dedup_id
    retry = staged_send('{"retries": 1}', NOW + 180)
    (three,) = (forward(r, lim=Limits()) for r in copies(retry, "s3"))
    assert isinstance(three, Forward) and three.dedup_id != one.dedup_id


@given(ids, nows, st.floats(0.001, 60))
def test_a_new_send_of_the_same_id_is_a_new_key(ident: str, now: float, later: float) -> None:
    """A Celery retry keeps its task id: a later send must not be dropped as a copy."""
    first = plan("orders", Message("x", delay=3600, id=ident), LIMITS, now=now)
    again = plan("orders", Message("x", delay=3600, id=ident), LIMITS, now=now)
    retry = plan("orders", Message("x", delay=3600, id=ident), LIMITS, now=now + later)
    key = "MessageDeduplicationId"
    assert first.request[key] == again.request[key] != retry.request[key]
    (one,) = copies(
        plan("orders.fifo", Message("x", delay=5, id=ident, group_id="g"), LIMITS, now=now), "s1"
    )
    (two,) = copies(
        plan("orders.fifo", Message("x", delay=5, id=ident, group_id="g"), LIMITS, now=now + later),
        "s2",
    )
    a, b = forward(one, lim=Limits()), forward(two, lim=Limits())
    assert isinstance(a, Forward) and isinstance(b, Forward) and a.dedup_id != b.dedup_id


@given(ids, ids, st.integers(1, 5))
def test_a_requeue_is_one_key_per_physical_message_and_a_new_one_per_cycle(
    origin: str, sqs_id: str, count: int
) -> None:
    system = {
        "SentTimestamp": str(T),
        "ApproximateFirstReceiveTimestamp": str(T + 900_000),
        "MessageGroupId": origin,
        "MessageDeduplicationId": origin,
    }
    attrs = {wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute("3600")}

    def requeue(message_id: str, receive: int) -> Requeue:
        received = Received(
            message_id, "rh", "b", attrs, system | {"ApproximateReceiveCount": str(receive)}
        )
        d = decide(received, local_now_ms=T + 900_000, offset_ms=0, lim=Limits())
        assert isinstance(d, Requeue)
        return d

    first, again = requeue(sqs_id, 1), requeue(sqs_id, count)  # a redelivery of one message
    assert first.dedup_id == again.dedup_id and first.group_id == again.group_id == origin
    assert requeue(sqs_id + "x", 1).dedup_id != first.dedup_id  # the next cycle


@given(ids, ids, st.integers(0, 2**53))
def test_parking_and_replay_keys_name_one_message(ident: str, other: str, due: int) -> None:
    if ident == other:
        return
    assert identity.schedule_name("q", ident) != identity.schedule_name("q", other)
    assert identity.park_dedup_id(ident, due) != identity.park_dedup_id(ident, due + 1)
    assert identity.replay_dedup_id(ident) != identity.replay_dedup_id(other)


@given(ids)
def test_the_registry_id_is_the_carried_message_id_when_valid(ident: str) -> None:
    attrs = {wire_format.MESSAGE_ID_ATTRIBUTE: message_shape.string_attribute(ident)}
    assert identity.registry_id(attrs) == ident
    assert identity.registry_id({}) is None
    bad = {wire_format.MESSAGE_ID_ATTRIBUTE: message_shape.string_attribute(ident + " ")}
    assert identity.registry_id(bad) is None


# ---- a caller's deduplication id (issue 58, 10) ----


@given(st.text(max_size=140))
def test_a_deduplication_id_is_taken_exactly_when_sqs_takes_it(text: str) -> None:
    if within_sqs_limits(text):
        assert identity.check_deduplication_id(text) == text
    else:
        with pytest.raises(InvalidMessage, match="SHA-256"):
            identity.check_deduplication_id(text)


def destination_key(planned: Any, now: float) -> str:
    """The MessageDeduplicationId a planned send reaches its FIFO destination with: at once,
    from the staging queue, or from the delay queue through its requeues (one here: the
    cycle is 900 s), the hand-over into staging, and the forward."""
    if planned.queue == "p-orders.fifo":
        key: str = planned.request["MessageDeduplicationId"]
        return key
    (received,) = copies(planned, "s1")
    if planned.route == "delay-queue":
        sent = int(now * 1000)
        system = {"SentTimestamp": str(sent), "ApproximateReceiveCount": "1"}
        system["ApproximateFirstReceiveTimestamp"] = str(sent + 900_000)
        due = sent + planned.delay_ms
        while not isinstance(
            hop := decide(
                replace(received, system=system),
                local_now_ms=0,
                offset_ms=None,
                lim=Limits(max_delay_seconds=10**9),
                staging=True,
            ),
            HandOver,
        ):
            assert isinstance(hop, Requeue)
            later = int(system["ApproximateFirstReceiveTimestamp"])
            system = {"SentTimestamp": str(later), "ApproximateReceiveCount": "1"}
            system["ApproximateFirstReceiveTimestamp"] = str(later + 900_000)
            received = replace(received, message_id=f"r{later}", attributes=hop.attributes)
        assert hop.due_ms == due
        received = replace(received, message_id="s2", attributes=hop.attributes)
    f = forward(received, lim=Limits())
    assert isinstance(f, Forward)
    return f.dedup_id


@given(ids, st.lists(st.tuples(ids, nows, st.floats(0, 3000)), min_size=1, max_size=3))
def test_sends_with_one_deduplication_id_reach_the_destination_with_it_by_any_route(
    dedup: str, sends: list[tuple[str, float, float]]
) -> None:
    """Whatever their message ids, send times and delays (none, within the native delay
    through the staging queue, beyond it through the delay queue): SQS sees one key at the
    FIFO destination, the caller's, so the later of two there within five minutes is
    dropped, as on a FIFO queue of SQS's own."""
    for ident, now, delay in sends:
        message = Message("x", delay=delay, id=ident, group_id="g", deduplication_id=dedup)
        planned = plan("orders.fifo", message, LIMITS, now=now)
        assert destination_key(planned, now) == dedup
