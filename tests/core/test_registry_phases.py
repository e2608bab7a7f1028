"""The batch step with the registry (SQSDELAY_REGISTRY=dynamodb), driven by the stub: the
records decide what is dropped, moved or claimed, whatever the registry answers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqsdelay.core import identity, registry, wire_format
from sqsdelay.core.decision import Limits
from sqsdelay.core.flows import Call
from sqsdelay.core.received import Received
from sqsdelay.core.step import StepConfig, StepState, handle
from tests.support.steps import DAY, TARGET, Clock, Q, T, message, run
from tests.support.stub import StubAws

TABLE = "sqsdelay-scheduled"
CONFIG = StepConfig(limits=Limits(), call_timeout=10, registry_table=TABLE)


def keyed(i: int, delay: int, **system: str) -> Any:
    ident = {wire_format.MESSAGE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": f"k{i}"}}
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
    assert requeued[wire_format.DUE_AT_ATTRIBUTE]["StringValue"] == str(T + 2 * DAY * 1000)
    assert stub.items[f"{Q.destination}/k3"]["state"] == {"S": "handed-over"}
    assert stub.items[f"{Q.destination}/k3"]["delivered"] == {"BOOL": True}
    assert stub.count("UpdateItem") == 2  # k3's claim and its delivered mark (k5 has no record)


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


def test_a_registry_throttled_throughout_a_burst_holds_it_and_then_delivers_it_once() -> None:
    """A burst of 100 due messages in ten batches, redelivered every second while every
    registry call is throttled: nothing is sent, deleted or dead-lettered, the registry is
    asked once per back-off rather than once per batch, and once it answers each message is
    handed over once (and none of the cancelled ones)."""
    stub, state, clock = StubAws(), StepState(), Clock()
    burst = [keyed(i, 5) for i in range(100)]
    for i in range(100):
        state_of = "cancelled" if i % 10 == 0 else "scheduled"
        stub.items[f"{Q.destination}/k{i}"] = item(i, state_of, T + 5_000)
    stub.throttle("BatchGetItem")
    stub.throttle("UpdateItem")
    batches = [burst[i : i + 10] for i in range(0, 100, 10)]
    for _ in range(20):  # twenty seconds of redeliveries
        for batch in batches:
            outcome = run(batch, stub, config=CONFIG, state=state, clock=clock)
            assert set(outcome.ends.values()) == {"held"}, outcome.ends
        clock.advance(1)
    assert stub.queues[Q.destination] == [] and stub.queues["error"] == []
    assert stub.deleted[Q.delay] == [] and stub.count("UpdateItem") == 0
    assert stub.count("BatchGetItem") <= 10, "throttled: back off, do not ask per batch"
    stub.rules.clear()
    clock.advance(60)  # past any back-off
    for batch in batches:
        run(batch, stub, config=CONFIG, state=state, clock=clock)
    sent = sorted(e["MessageBody"] for e in stub.queues[Q.destination])
    assert sent == sorted(f"body {i}" for i in range(100) if i % 10)
    assert sorted(stub.deleted[Q.delay]) == sorted(f"rh{i}" for i in range(100))
    assert stub.queues["error"] == []


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
        message(i, 5, attrs={wire_format.MESSAGE_ID_ATTRIBUTE: value})
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
        identity.check_message_id(key.split("/", 1)[1])  # only valid ids were looked up


# ---- one message, one handler: the interleavings of docs/registry.md ("Which interleavings
# ---- can deliver twice"), each by name ----

KEY = f"{Q.destination}/k1"


def again(m: Received, n: int) -> Received:
    """Another receive of the same SQS message: a new receipt handle, the count up."""
    system = {**m.system, "ApproximateReceiveCount": str(n)}
    return replace(m, receipt_handle=f"{m.receipt_handle}-{n}", system=system)


def delivered(stub: StubAws) -> list[str]:
    return [e["MessageBody"] for e in stub.queues[Q.destination]]


def until(flow: Any, stub: StubAws, stop: Callable[[Call], bool]) -> tuple[list[Call], Any]:
    """Drive a flow until it asks for a call matching `stop` (unanswered): a worker frozen
    (or killed) just before that call."""
    calls = next(flow)
    while not any(stop(c) for c in calls):
        calls = flow.send(stub(calls))
    return calls, flow


def finish(flow: Any, stub: StubAws, asked: list[Call]) -> None:
    """Let a frozen flow go on to its end."""
    try:
        calls = flow.send(stub(asked))
        while True:
            calls = flow.send(stub(calls))
    except StopIteration:
        pass


def start(m: Received, state: StepState, clock: Clock) -> Any:
    return handle(
        [m],
        queues=Q,
        park_target=TARGET,
        config=CONFIG,
        state=state,
        clock=clock,
        local_ms=int(clock() * 1000),
        deadline=clock() + 48,
    )


def is_send(c: Call) -> bool:
    return c.api == "SendMessageBatch"


def is_mark(c: Call) -> bool:
    return c.api == "UpdateItem" and c.params["UpdateExpression"] == "SET delivered = :true"


def scheduled_stub() -> StubAws:
    stub = StubAws()
    stub.items = {KEY: item(1, "scheduled", T + 5_000)}
    return stub


def test_a_copy_received_while_the_message_is_in_hand_is_released_untouched() -> None:
    """Interleaving 1: two receives of one SQS message in one runtime (a worker's loops, or
    one Lambda event): the second copy is neither sent nor deleted."""
    stub, state, clock = scheduled_stub(), StepState(), Clock()
    first = keyed(1, 5)
    asked, flow = until(start(first, state, clock), stub, is_send)
    copy = run([again(first, 2)], stub, config=CONFIG, state=state, clock=clock)
    assert copy.ends == {} and [r.receipt_handle for r in copy.released] == ["rh1-2"]
    assert state.stats.events["delay.copy_in_hand"] == 1
    finish(flow, stub, asked)
    # Deleted by the copy's receipt handle: SQS honours only the newest one (moto any).
    assert delivered(stub) == ["body 1"] and stub.deleted[Q.delay] == ["rh1-2"]
    assert state.in_hand == set()  # the message is out of hand once its batch ended
    assert run([again(first, 3)], stub, config=CONFIG, state=state, clock=clock).ends == {
        "id1": "dropped"
    }


def test_two_runtimes_with_one_message_in_hand_deliver_it_once() -> None:
    """Interleaving 2: two workers (no shared memory) each hold a receive of the same SQS
    message: the second claim fails while the first's lease lasts, and the copy is held until
    then; once the first delivered, the copy is dropped."""
    stub, clock = scheduled_stub(), Clock()
    first = keyed(1, 5)
    asked, flow = until(start(first, StepState(), clock), stub, is_send)
    second = run([again(first, 2)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert second.ends == {"id1": "held"}
    assert second.held[0].reason == "another receive of this message holds its claim"
    assert second.held[0].wait_seconds >= 48  # the first receive's lease
    finish(flow, stub, asked)
    third = run([again(first, 3)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert third.ends == {"id1": "dropped"} and delivered(stub) == ["body 1"]


def test_a_failed_send_after_the_claim_is_taken_over_after_its_lease() -> None:
    """Interleaving 3: the claim won, the send failed (the destination refused it): the
    redelivery is held while the lease lasts, then takes the claim over: one delivery."""
    stub, clock = scheduled_stub(), Clock()
    stub.fail("SendMessageBatch", "AWS.SimpleQueueService.NonExistentQueue", times=1)
    first = keyed(1, 5)
    assert run([first], stub, config=CONFIG, state=StepState(), clock=clock).ends == {"id1": "held"}
    early = run([again(first, 2)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert early.ends == {"id1": "held"} and delivered(stub) == []
    clock.advance(60)  # past the lease (the budget plus a call time limit)
    later = run([again(first, 3)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert later.ends == {"id1": "handed-over"} and delivered(stub) == ["body 1"]
    assert stub.items[KEY]["delivered"] == {"BOOL": True}


def test_a_crash_between_claim_and_send_delivers_once() -> None:
    """Interleaving 4: the worker died after its claim, before its send."""
    stub, clock = scheduled_stub(), Clock()
    first = keyed(1, 5)
    until(start(first, StepState(), clock), stub, is_send)  # then killed
    clock.advance(60)
    later = run([again(first, 2)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert later.ends == {"id1": "handed-over"} and delivered(stub) == ["body 1"]


def test_a_crash_between_send_and_delivered_mark_delivers_twice() -> None:
    """Interleaving 5 (one of those that deliver twice): the worker died after its send,
    before the round that marks the claim delivered and deletes the original; the
    redelivery takes over after the lease."""
    stub, clock = scheduled_stub(), Clock()
    first = keyed(1, 5)
    until(start(first, StepState(), clock), stub, is_mark)  # sent, then killed
    clock.advance(60)
    later = run([again(first, 2)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert later.ends == {"id1": "handed-over"} and delivered(stub) == ["body 1", "body 1"]


def test_a_lost_send_answer_delivers_twice() -> None:
    """Interleaving 6 (the other one): the send took effect but its answer was lost, so the
    claim is never marked; after the lease the redelivery sends again."""
    stub, clock = scheduled_stub(), Clock()
    stub.drop("SendMessageBatch", times=1)
    first = keyed(1, 5)
    assert run([first], stub, config=CONFIG, state=StepState(), clock=clock).ends == {"id1": "held"}
    clock.advance(60)
    run([again(first, 2)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert delivered(stub) == ["body 1", "body 1"]


def test_a_marked_hand_over_whose_delete_failed_delivers_once() -> None:
    """Interleaving 7: marked delivered, but the delete (made in the same round) failed: the
    redelivery is dropped, at once (no lease to wait for)."""
    stub, clock = scheduled_stub(), Clock()
    stub.fail("DeleteMessageBatch", "ReceiptHandleIsInvalid", times=1)
    first = keyed(1, 5)
    run([first], stub, config=CONFIG, state=StepState(), clock=clock)
    assert stub.items[KEY]["delivered"] == {"BOOL": True}
    later = run([again(first, 2)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert later.ends == {"id1": "dropped"} and delivered(stub) == ["body 1"]


def test_a_failed_delivered_mark_falls_back_to_the_lease() -> None:
    """Interleaving 8: the mark was throttled and the delete failed too: the redelivery waits
    for the lease, then delivers again (the mark alone failing, with the delete done, is
    harmless: nothing comes back)."""
    stub, clock = scheduled_stub(), Clock()
    stub.fail("UpdateItem", "ThrottlingException", times=1, when=is_mark)
    stub.fail("DeleteMessageBatch", "ReceiptHandleIsInvalid", times=1)
    first = keyed(1, 5)
    state = StepState()
    run([first], stub, config=CONFIG, state=state, clock=clock)
    assert state.stats.events["registry.delivered_mark_failed"] == 1
    held = run([again(first, 2)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert held.ends == {"id1": "held"} and delivered(stub) == ["body 1"]
    clock.advance(60)
    run([again(first, 3)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert delivered(stub) == ["body 1", "body 1"]


def test_two_sqs_messages_of_one_id_in_one_batch_make_one_claim() -> None:
    """A sender that retried a send whose answer it lost made two SQS messages of one id; in
    one batch only the first claims (no two claims on one item race each other), the other is
    held and dropped at its next hop."""
    stub, clock = scheduled_stub(), Clock()
    a = keyed(1, 5)
    b = replace(keyed(1, 5), message_id="id1-retry", receipt_handle="rh1-retry")
    outcome = run([a, b], stub, config=CONFIG, state=StepState(), clock=clock)
    assert outcome.ends == {"id1": "handed-over", "id1-retry": "held"}
    claims = [c for c in stub.calls if c.api == "UpdateItem" and not is_mark(c)]
    assert len(claims) == 1 and delivered(stub) == ["body 1"]
    again_b = run([again(b, 2)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert again_b.ends == {"id1-retry": "dropped"}


def replayed(i: int, delay: int, token: str, **system: str) -> Any:
    """A message `replay-errors` sent back: its id, and the replay's token (issue 58)."""
    attrs = {
        wire_format.MESSAGE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": f"k{i}"},
        wire_format.REPLAY_ATTRIBUTE: {"DataType": "String", "StringValue": token},
    }
    return message(i, delay, attrs=attrs, **system)


def test_a_replay_of_a_handed_over_message_is_delivered_and_its_copies_are_not() -> None:
    """Issue 58.1: a message handed over (and later dead-lettered by its consumer, or by the
    worker after a refused hand-over) and replayed: the replay's token is a new generation,
    so it is claimed and handed over; a copy of the replay, or of the first delivery, is a
    duplicate; a cancelled record stays cancelled."""
    stub = StubAws()
    stub.items = {
        f"{Q.destination}/k1": item(1, "handed-over", T + 5_000, claimed_by="first-sqs-id"),
        f"{Q.destination}/k2": item(2, "cancelled", T + 5_000),
    }
    stub.items[f"{Q.destination}/k1"]["delivered"] = {"BOOL": True}
    first = run([replayed(1, 5, "err-1"), replayed(2, 5, "err-2")], stub, config=CONFIG)
    assert first.ends == {"id1": "handed-over", "id2": "cancelled"}
    assert [e["MessageBody"] for e in stub.queues[Q.destination]] == ["body 1"]
    handed = stub.queues[Q.destination][0]["MessageAttributes"]
    assert handed[wire_format.REPLAY_ATTRIBUTE]["StringValue"] == "err-1"  # to the consumer
    assert stub.items[f"{Q.destination}/k1"]["replay"] == {"S": "err-1"}
    assert stub.items[f"{Q.destination}/k1"]["delivered"] == {"BOOL": True}
    # A copy of that replay (another SQS message of it), a copy of the first delivery: dropped.
    copy = replace(replayed(1, 5, "err-1"), message_id="copy", receipt_handle="rh-copy")
    again = run([copy, keyed(1, 5)], stub, config=CONFIG)
    assert again.ends == {"copy": "dropped", "id1": "dropped"}
    # A second replay (dead-lettered again, a new error-queue message): delivered again.
    second = run([replayed(1, 5, "err-9")], stub, config=CONFIG)
    assert second.ends == {"id1": "handed-over"}
    assert len(stub.queues[Q.destination]) == 2


def test_a_replays_claim_names_its_token_and_a_first_deliverys_does_not() -> None:
    record = registry.Record(Q.destination, "k1", T, "handed-over", "delay-queue")
    plain = registry.claim_call(TABLE, record, "sqs-1", "a", T, T + 1, 1.0)
    replay = registry.claim_call(TABLE, record, "sqs-1", "a", T, T + 1, 1.0, "err-1")
    assert ":replay" not in plain.params["ExpressionAttributeValues"]
    assert "replay" not in plain.params["UpdateExpression"]
    assert replay.params["ExpressionAttributeValues"][":replay"] == {"S": "err-1"}
    assert "replay <> :replay" in replay.params["ConditionExpression"]


def test_a_replay_of_a_scheduled_record_keeps_the_records_due_time() -> None:
    """A message dead-lettered at a hop, before any claim, and replayed without a due time
    of its own (no room for it): it is due when its record says, not when its own delay
    from the replay's send would make it."""
    stub = StubAws()
    stub.items = {f"{Q.destination}/k1": item(1, "scheduled", T + 2_000)}
    outcome = run([replayed(1, 0, "err-1")], stub, config=CONFIG)
    assert outcome.ends == {"id1": "handed-over"}
    assert stub.queues[Q.destination][0]["DelaySeconds"] == 2  # not at once
    assert stub.items[f"{Q.destination}/k1"]["replay"] == {"S": "err-1"}


def test_a_dead_lettered_copy_whose_delete_failed_is_dropped_and_its_replay_delivered() -> None:
    """The window issue 58's review left open: the destination refuses a claimed hand-over
    until the worker dead-letters the message, and that delete fails. Before, the copy that
    came back took its own undelivered claim over once the destination took it (its maximum
    size raised), and the dead letter's replay was delivered too: twice. The dead-lettering
    names the SQS message in the record, so the copy is dropped and the replay delivered."""
    stub, clock, state = scheduled_stub(), Clock(), StepState()
    stub.fail("SendMessageBatch", "MessageTooLong", queue=Q.destination)
    first = keyed(1, 5)
    for n in range(1, CONFIG.limits.max_attempts + 2):  # refused max_attempts times, then out
        stub.fail("DeleteMessageBatch", "ReceiptHandleIsInvalid", times=1)
        clock.advance(60)  # each receive after the last one's lease
        run([again(first, n)], stub, config=CONFIG, state=state, clock=clock)
    assert len(stub.queues[Q.error]) == 1
    assert stub.items[KEY]["dead_lettered"] == {"SS": ["id1"]}
    stub.rules.clear()  # the destination now takes it; deletes succeed
    clock.advance(60)
    copy = run([again(first, 99)], stub, config=CONFIG, state=StepState(), clock=clock)
    assert copy.ends == {"id1": "dropped"} and delivered(stub) == []
    # The replay is another SQS message (replay-errors sends it anew), with its token.
    back = replace(replayed(1, 5, "err-1"), message_id="id-replay", receipt_handle="rh-replay")
    replay = run([back], stub, config=CONFIG, state=StepState(), clock=clock)
    assert replay.ends == {"id-replay": "handed-over"} and delivered(stub) == ["body 1"]


def test_a_claim_by_a_dead_lettered_sqs_message_fails_though_its_read_was_stale() -> None:
    """The read is eventually consistent: the claim's condition refuses that SQS message too,
    and its answer drops it (not a hold until a lease)."""
    stub = scheduled_stub()
    stub.items[KEY]["dead_lettered"] = {"SS": ["id1"]}
    record = registry.Record(Q.destination, "k1", T + 5_000, "scheduled", "delay-queue")
    claim = registry.claim_call(TABLE, record, "id1", "a", T, T + 1, 1.0)
    fault = stub([claim])[0].fault
    assert fault is not None and registry.claimed(fault, "id1")[0] == "duplicate"
    assert stub([registry.claim_call(TABLE, record, "id2", "a", T, T + 1, 1.0)])[0].fault is None
