"""W3C trace context across the delay (core/trace_context.py): where the sender puts it, what
the worker carries, and that a producer's malformed one never stops a hop."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sqsdelay.core import quotas, send, trace_context, wire_format
from sqsdelay.core.decision import HandOver, Limits, Requeue
from sqsdelay.core.failures import FailureLog
from sqsdelay.core.received import Received
from sqsdelay.core.record_decisions import decide_one
from sqsdelay.core.send import Message, SendLimits

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
STATE = "congo=t61rcWkgMzE"
TRACE = {"traceparent": PARENT, "tracestate": STATE}
NOW = 1_700_000_000.0


def limits(**kw: Any) -> SendLimits:
    base: dict[str, Any] = dict(
        queue_prefix="",
        max_delay_seconds=10**9,
        max_native_delay_seconds=900,
        unrestricted=True,
        wire_format="raw",
        max_message_bytes=quotas.MAX_MESSAGE_BYTES,
        install_hint=lambda q: "install",
    )
    return SendLimits(**(base | kw))


def user(n: int) -> dict[str, Any]:
    return {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(n)}


def attrs_of(planned: send.PlannedSend) -> dict[str, Any]:
    return dict(planned.request.get("MessageAttributes", {}))


def test_a_valid_traceparent_is_one_and_anything_else_is_not() -> None:
    assert trace_context.is_traceparent(PARENT)
    for bad in [
        "",
        PARENT.upper(),
        "ff" + PARENT[2:],
        "00-" + "0" * 32 + PARENT[35:],
        PARENT[:36] + "0" * 16 + "-01",
        PARENT + "-extra",  # version 00 has four fields
        None,
        42,
    ]:
        assert not trace_context.is_traceparent(bad), bad
    assert trace_context.is_traceparent("01" + PARENT[2:] + "-future")


def test_every_route_carries_the_context_when_there_is_room() -> None:
    for delay in (0, 5, 5000, 5000.25):
        planned = send.plan("orders", Message("b", delay=delay), limits(), now=NOW, trace=TRACE)
        attrs = attrs_of(planned)
        assert attrs["traceparent"] == {"DataType": "String", "StringValue": PARENT}, delay
        assert attrs["tracestate"]["StringValue"] == STATE
        assert planned.trace is not None and planned.trace.added == ("traceparent", "tracestate")
    fifo = send.plan(
        "orders.fifo", Message("b", delay=5, group_id="g"), limits(), now=NOW, trace=TRACE
    )
    assert attrs_of(fifo)["traceparent"]["StringValue"] == PARENT


def test_the_context_never_takes_room_the_callers_attributes_or_sqsdelays_need() -> None:
    # direct: the caller's 8 and NServiceBus.MessageId leave one: the traceparent only
    direct = send.plan(
        "orders", Message("b", delay=0, attributes=user(8)), limits(), now=NOW, trace=TRACE
    )
    assert set(attrs_of(direct)) - set(user(8)) == {wire_format.MESSAGE_ID_ATTRIBUTE, "traceparent"}
    assert direct.trace is not None and direct.trace.skipped == ("tracestate",)
    # through the delay queue: the delay, the id and the send's due time
    looped = send.plan(
        "orders", Message("b", delay=5000, attributes=user(7)), limits(), now=NOW, trace=TRACE
    )
    assert "traceparent" not in attrs_of(looped) and len(attrs_of(looped)) == 10
    assert wire_format.DUE_AT_ATTRIBUTE in attrs_of(looped)
    assert looped.trace is not None and looped.trace.skipped == ("traceparent", "tracestate")
    six = send.plan(
        "orders", Message("b", delay=5000, attributes=user(6)), limits(), now=NOW, trace=TRACE
    )
    assert "traceparent" in attrs_of(six) and len(attrs_of(six)) == 10
    # the caller's 10: sent as given
    full = send.plan(
        "orders", Message("b", delay=0, attributes=user(10)), limits(), now=NOW, trace=TRACE
    )
    assert attrs_of(full) == user(10)
    # nor room by size
    tight = limits(max_message_bytes=1024)
    body = "x" * (1024 - 60)
    sized = send.plan("orders", Message(body, delay=0), tight, now=NOW, trace=TRACE)
    assert "traceparent" not in attrs_of(sized)


def test_a_traceparent_already_there_is_kept_not_injected_again() -> None:
    mine = "00-11111111111111111111111111111111-2222222222222222-01"
    given_attrs = {"traceparent": {"DataType": "String", "StringValue": mine}}
    planned = send.plan(
        "orders", Message("b", delay=5000, attributes=given_attrs), limits(), now=NOW, trace=TRACE
    )
    assert attrs_of(planned)["traceparent"]["StringValue"] == mine
    assert "tracestate" not in attrs_of(planned)


def test_a_carried_context_gives_way_to_the_callers_attributes_and_sqsdelays() -> None:
    """A retry of a traced message whose own attributes fill SQS's ten (8 of the caller's,
    the trace context): before, the retry was refused (no room for its id); the context
    is placed last, into the room that is left, and the send goes without it."""
    carried = {k: {"DataType": "String", "StringValue": v} for k, v in TRACE.items()}
    full = {**user(8), **carried}
    planned = send.plan(
        "orders", Message("b", delay=5, attributes=full), limits(), now=NOW, require_id=True
    )
    attrs = attrs_of(planned)
    assert set(user(8)) <= set(attrs) and wire_format.MESSAGE_ID_ATTRIBUTE in attrs
    assert "tracestate" not in attrs and len(attrs) <= quotas.MAX_MESSAGE_ATTRIBUTES
    roomy = send.plan("orders", Message("b", delay=5, attributes=carried), limits(), now=NOW)
    assert {k: attrs_of(roomy)[k]["StringValue"] for k in TRACE} == TRACE  # kept as carried


def test_a_replay_drops_the_trace_context_before_it_refuses() -> None:
    """A traced message (6 of the caller's, its delay, the trace context, its due time at
    the first hop: 10) dead-lettered and replayed: its replay needs its delay, due time and
    token; the trace context gives way, not the replay."""
    from sqsdelay.core import failure_record

    carried = {k: {"DataType": "String", "StringValue": v} for k, v in TRACE.items()}
    at_hop = {
        **user(6),
        **carried,
        wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": "5000"},
        wire_format.DUE_AT_ATTRIBUTE: {"DataType": "Number", "StringValue": "1700000005000"},
    }
    hop = Received("sqs-1", "rh", "b", at_hop, {"ApproximateReceiveCount": "1"})
    dead = failure_record.attributes(hop, "refused", "orders-delay.fifo", quotas.MAX_MESSAGE_BYTES)
    replay = failure_record.plan_replay(
        Received("err-1", "rh2", "b", dead, {}), "orders-delay.fifo"
    )
    assert isinstance(replay, failure_record.Replay), replay
    assert replay.attributes[wire_format.REPLAY_ATTRIBUTE]["StringValue"] == "err-1"
    assert set(user(6)) <= set(replay.attributes) and "tracestate" not in replay.attributes
    assert len(replay.attributes) <= quotas.MAX_MESSAGE_ATTRIBUTES


def test_no_context_no_attributes_and_a_bad_one_is_not_sent() -> None:
    plain = send.plan("orders", Message("b", delay=5), limits(), now=NOW)
    assert not {"traceparent", "tracestate"} & set(attrs_of(plain))
    bad = send.plan(
        "orders", Message("b", delay=0), limits(), now=NOW, trace={"traceparent": "nope"}
    )
    assert "traceparent" not in attrs_of(bad)


def test_an_nservicebus_endpoint_reads_it_in_the_envelopes_headers() -> None:
    planned = send.plan(
        "orders",
        Message("b", delay=5000, message_type="Sales.OrderPlaced"),
        limits(wire_format="nservicebus"),
        now=NOW,
        trace=TRACE,
    )
    headers = json.loads(planned.request["MessageBody"])["Headers"]
    assert headers["traceparent"] == PARENT and headers["tracestate"] == STATE
    untraced = send.plan(
        "orders",
        Message("b", delay=0, message_type="Sales.OrderPlaced"),
        limits(wire_format="nservicebus"),
        now=NOW,
    )
    assert "traceparent" not in json.loads(untraced.request["MessageBody"])["Headers"]


def received(attributes: dict[str, Any], delay: int, sent_ms: int = 1_000_000) -> Received:
    return Received(
        message_id="m-1",
        receipt_handle="h",
        body="body",
        attributes={
            **attributes,
            wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": str(delay)},
        },
        system={
            "SentTimestamp": str(sent_ms),
            "ApproximateFirstReceiveTimestamp": str(sent_ms),
            "ApproximateReceiveCount": "1",
            "MessageGroupId": "m-1",
            "MessageDeduplicationId": "d",
        },
    )


def decided(r: Received) -> Any:
    out = decide_one(
        r,
        local_ms=1_000_000,
        offset_ms=None,
        lim=Limits(),
        source_queue="q-delay.fifo",
        failures=FailureLog(),
    )
    assert out is not None
    return out


def test_the_worker_carries_the_context_unchanged_on_a_requeue_and_a_hand_over() -> None:
    carried = {
        "traceparent": {"DataType": "String", "StringValue": PARENT},
        "tracestate": {"DataType": "String", "StringValue": STATE},
    }
    requeue = decided(received(carried, 5000))
    handover = decided(received(carried, 5))
    assert isinstance(requeue.decision, Requeue) and isinstance(handover.decision, HandOver)
    for out in (requeue, handover):
        assert {k: out.entry["MessageAttributes"][k] for k in carried} == carried


text = st.text(max_size=80)
value = st.fixed_dictionaries(
    {"DataType": st.sampled_from(["String", "Number", "Binary", "String.custom"])},
    optional={
        "StringValue": st.one_of(text, st.just(PARENT)),
        "BinaryValue": st.binary(max_size=8),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    parent=st.one_of(st.none(), value),
    state=st.one_of(st.none(), value),
    delay=st.sampled_from([0, 5, 5000]),
)
def test_whatever_a_producer_wrote_there_the_hop_happens_and_only_a_valid_context_travels(
    parent: dict[str, Any] | None, state: dict[str, Any] | None, delay: int
) -> None:
    attributes = {"k": {"DataType": "String", "StringValue": "v"}}
    if parent is not None:
        attributes["traceparent"] = parent
    if state is not None:
        attributes["tracestate"] = state
    out = decided(received(attributes, delay))
    assert isinstance(out.decision, HandOver | Requeue), out.decision
    sent = out.entry["MessageAttributes"]
    assert sent["k"] == attributes["k"]
    if trace_context.malformed(attributes) is None:
        assert {k: sent[k] for k in ("traceparent", "tracestate") if k in attributes} == {
            k: attributes[k] for k in ("traceparent", "tracestate") if k in attributes
        }
    else:
        assert not {"traceparent", "tracestate"} & set(sent)
    if "traceparent" in sent:
        assert trace_context.is_traceparent(sent["traceparent"]["StringValue"])
