"""The delay worker against the moto server over HTTP, with a compressed 2 s cycle."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import structlog

from sqsdelay.aws import worker as worker_module
from sqsdelay.aws.callers import AsyncCaller
from sqsdelay.aws.sender import Message, Sender
from sqsdelay.core import wire_format
from sqsdelay.core.flows import Call, Fault, Reply
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.faultproxy import FaultProxy
from tests.support.handovers import assert_handed_over_in_time
from tests.support.logs import capture_logs, events, logged
from tests.support.queues import install, send_raw
from tests.support.workerkit import Collector, RunningWorker

CYCLE = 2


@pytest.fixture
def fast(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(
        max_native_delay_seconds=CYCLE, visibility_timeout_seconds=3, wait_time_seconds=2
    )


def test_delays_below_at_and_above_the_cycle_arrive_once_on_time_intact(
    fast: Settings, sqs: Any
) -> None:
    urls = install(fast, sqs)
    sender = Sender(fast, client=sqs)
    binary = bytes(range(256)) * 4
    attrs = {
        "bin": {"DataType": "Binary", "BinaryValue": binary},
        "trace": {"DataType": "String.custom", "StringValue": "ünï ✓"},
        "n": {"DataType": "Number", "StringValue": "-1.5e3"},
    }
    delays = [1, CYCLE, CYCLE + 1, 3 * CYCLE + 1, 4 * CYCLE + 0.5]
    due: dict[str, float] = {}
    sends: dict[str, tuple[str, float, float, float]] = {}  # id, delay, clock around the send
    collector = Collector(sqs, urls["orders"])
    out = capture_logs("DEBUG")  # every hop's delay.requeued
    with RunningWorker(fast, ["orders"]):
        for i, d in enumerate(delays):
            body = f"msg {i} 👋 {d}"
            due[body] = before = time.time() + d
            sent = sender.send("orders", body, delay=d, attributes=attrs)
            sends[body] = (sent.message_id, d, before - d, time.time())
        got = collector.until(len(delays), timeout=30)
        collector.quiet_for(CYCLE + 1)
    assert sorted(g.body for g in got) == sorted(due)  # each exactly once
    hops = logged(out)
    for message_id, d, before, after in sends.values():
        if d > CYCLE:  # through the delay queue
            assert_handed_over_in_time(
                hops, message_id, delay=d, cycle=CYCLE, sent_between=(before, after)
            )
    for g in got:
        lateness = g.at - due[g.body]
        # A cycle (2 s) late is the hop check's above: a busy machine's 3 s hide it here,
        # where only more than two cycles late shows.
        assert 0 <= lateness < 5.0, (g.body, lateness)
        assert g.attributes["bin"]["BinaryValue"] == binary
        assert g.attributes["trace"] == {"StringValue": "ünï ✓", "DataType": "String.custom"}
        assert g.attributes["n"]["StringValue"] == "-1.5e3"
        assert not set(g.attributes) & wire_format.OWN_ATTRIBUTES


def test_foreign_nservicebus_message_is_delivered_on_time(fast: Settings, sqs: Any) -> None:
    urls = install(fast, sqs)
    delay = 2 * CYCLE + 1
    start = time.time()
    sent = sqs.send_message(
        QueueUrl=urls["orders-delay.fifo"],
        MessageBody='{"nsb": true}',
        MessageGroupId="nsb-group",
        MessageDeduplicationId="nsb-dedup",
        MessageAttributes={
            wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": str(delay)}
        },
    )
    around = (start, time.time())
    collector = Collector(sqs, urls["orders"])
    out = capture_logs("DEBUG")  # every hop's delay.requeued
    with RunningWorker(fast, ["orders"]):
        (got,) = collector.until(1, timeout=20)
    # Without an NServiceBus.MessageId the first hop sets it to the SQS MessageId, as
    # NServiceBus's pump does; it then travels unchanged.
    assert got.body == '{"nsb": true}'
    assert got.attributes == {
        wire_format.MESSAGE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": sent["MessageId"]}
    }
    # Its due time from its SentTimestamp and the relative delay, one requeue, one hand-over.
    assert_handed_over_in_time(logged(out), None, delay=delay, cycle=CYCLE, sent_between=around)
    # A cycle (2 s) late is the hop check's; here only more than two cycles late shows.
    assert 0 <= got.at - (start + delay) < 5.0


def test_poison_messages_go_to_the_error_queue_and_good_ones_still_arrive(
    fast: Settings, sqs: Any
) -> None:
    urls = install(fast, sqs)
    out = capture_logs()
    fifo = urls["orders-delay.fifo"]

    def raw(body: str, attrs: dict[str, Any]) -> None:
        send_raw(sqs, fifo, body, None, **attrs)

    delay_attr = wire_format.DELAY_ATTRIBUTE
    raw("missing", {"other": {"DataType": "String", "StringValue": "x"}})
    raw("word", {delay_attr: {"DataType": "String", "StringValue": "soon"}})
    raw("negative", {delay_attr: {"DataType": "String", "StringValue": "-5"}})
    # 10 foreign attributes plus ours: real SQS would have refused it, moto lets it in
    eleven = {f"h{i}": {"DataType": "String", "StringValue": "v"} for i in range(10)}
    raw("eleven", {**eleven, delay_attr: {"DataType": "String", "StringValue": "3600"}})
    Sender(fast, client=sqs).send("orders", "good", delay=CYCLE + 1)
    dest, errors = Collector(sqs, urls["orders"]), Collector(sqs, urls["error"])
    with RunningWorker(fast, ["orders"]):
        dest.until(1, timeout=20)
        errors.until(4, timeout=20)
        dest.quiet_for(1)
    assert [g.body for g in dest.got] == ["good"]
    by_body = {g.body: g for g in errors.got}
    assert set(by_body) == {"missing", "word", "negative", "eleven"}
    reasons = {
        b: json.loads(by_body[b].attributes[wire_format.FAILURE_ATTRIBUTE]["StringValue"])["reason"]
        for b in ("missing", "word", "negative")
    }
    assert "no NServiceBus.AmazonSQS.DelaySeconds" in reasons["missing"]
    assert "not an integer" in reasons["word"] and "negative" in reasons["negative"]
    assert by_body["missing"].attributes["other"]["StringValue"] == "x"
    # no room for the failure record: kept intact, the reason is in the event
    assert len(by_body["eleven"].attributes) == 11
    dead = {e["reason"] for e in events(out, "delay.dead_lettered")}
    assert any("cannot requeue: message has 11 attributes" in r for r in dead)
    assert all(e["level"] == "error" for e in events(out, "delay.dead_lettered"))


def test_missing_destination_trips_the_breaker_then_recovers(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    s = make_settings(
        max_native_delay_seconds=1,
        visibility_timeout_seconds=3,
        wait_time_seconds=1,
        max_attempts=20,
    )
    urls = install(s, sqs)
    sqs.delete_queue(QueueUrl=urls["orders"])
    out = capture_logs()
    Sender(s, client=sqs).send("orders", "waiting", delay=2)
    with RunningWorker(s, ["orders"]) as running:
        wait_for(lambda: len(events(out, "destination.unavailable")) >= 2, timeout=20)
        sends_during_outage = running.worker.stats.requests["SendMessageBatch"]
        time.sleep(3)  # an outage must not become a hot loop: count what 3 s cost
        extra = running.worker.stats.requests["SendMessageBatch"] - sends_during_outage
        assert extra <= 3, f"{extra} sends in 3 s while the destination was missing"
        url = sqs.create_queue(QueueName=s.queue_prefix + "orders")["QueueUrl"]
        (got,) = Collector(sqs, url).until(1, timeout=30)
    assert got.body == "waiting"
    unavailable = events(out, "destination.unavailable")
    assert unavailable[0]["level"] == "error"
    assert unavailable[0]["queue"] == s.queue_prefix + "orders"
    assert unavailable[0]["code"] == "QueueDoesNotExist"


def test_a_message_the_destination_refuses_goes_to_the_error_queue_after_max_attempts(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    s = make_settings(
        max_native_delay_seconds=1,
        visibility_timeout_seconds=2,
        wait_time_seconds=1,
        max_attempts=2,
    )
    urls = install(s, sqs)
    # The destination takes at most 1 KiB: SQS refuses the big message (InvalidParameterValue
    # for the whole batch); the worker retries entry by entry and blames only that one.
    sqs.set_queue_attributes(QueueUrl=urls["orders"], Attributes={"MaximumMessageSize": "1024"})
    Sender(s, client=sqs).send_batch(
        "orders", [Message("x" * 2000, delay=2), Message("small", delay=2)]
    )
    errors = Collector(sqs, urls["error"])
    dest = Collector(sqs, urls["orders"])
    with RunningWorker(s, ["orders"]):
        (got,) = errors.until(1, timeout=40)
        (fine,) = dest.until(1, timeout=10)
    record = json.loads(got.attributes[wire_format.FAILURE_ATTRIBUTE]["StringValue"])
    assert got.body == "x" * 2000 and fine.body == "small"
    assert "failed 2 times (SQSDELAY_MAX_ATTEMPTS=2)" in record["reason"]
    assert "last error: InvalidParameterValue" in record["reason"]
    assert record["queue"] == s.queue_prefix + "orders-delay.fifo"


def test_failed_delete_after_requeue_does_not_duplicate(
    make_settings: Callable[..., Settings], sqs: Any, moto_url: str
) -> None:
    proxy = FaultProxy(moto_url)
    # The cycle outlasts the failed delete (4 attempts with backoff, ~4 s), so the original
    # comes back while its requeued copy is still waiting in the queue. Real SQS would drop
    # the retry for 5 minutes; moto only while the first copy is still there. The message is
    # due four cycles on: on a busy machine each cut delete may use a single attempt, and the
    # four cuts must be used up by requeues long before the hand-over (whose failed delete
    # would be a duplicate: at-least-once, not what this test is about).
    cycle = 5
    s = make_settings(
        endpoint_url=proxy.url,
        max_native_delay_seconds=cycle,
        visibility_timeout_seconds=1,
        wait_time_seconds=1,
    )
    urls = install(s, sqs)
    Sender(s, client=sqs).send("orders", "once", delay=4 * cycle + 1)
    out = capture_logs("DEBUG")  # every hop's delay.requeued
    # the SDK tries a call 4 times (3 retries): cut all of the first delete's attempts
    proxy.cut("DeleteMessageBatch", times=4)
    dest = Collector(sqs, urls["orders"])
    try:
        with RunningWorker(s, ["orders"]) as running:
            dest.until(1, timeout=40)
            dest.quiet_for(cycle)
            stats = running.worker.stats
    finally:
        proxy.close()
    assert proxy.cut_count == 4
    # Each delete is cut off at the batch's budget, so the 4 cut attempts may span several
    # deletes; each failed delete used up at least one of them (a delete may carry two
    # messages, the original and its requeued copy: count the calls, not the messages).
    failed_deletes = events(out, "delay.delete_failed")
    assert 1 <= len(failed_deletes) <= proxy.cut_count
    assert stats.events["delete_failed"] == sum(e["count"] for e in failed_deletes)
    assert [g.body for g in dest.got] == ["once"]
    requeues = events(out, "delay.requeued")
    # the retried requeue reused the dedup id of the same physical message
    assert len({r["sqs_message_id"] for r in requeues}) < len(requeues)


def test_network_drop_loses_nothing(
    make_settings: Callable[..., Settings], sqs: Any, moto_url: str
) -> None:
    proxy = FaultProxy(moto_url)
    s = make_settings(
        endpoint_url=proxy.url,
        max_native_delay_seconds=CYCLE,
        visibility_timeout_seconds=2,
        wait_time_seconds=1,
        max_attempts=50,
    )
    urls = install(s, sqs)
    Sender(s, client=sqs).send_batch(
        "orders", [Message(f"m{i}", delay=CYCLE + i % 4) for i in range(20)]
    )
    dest = Collector(sqs, urls["orders"])
    try:
        with RunningWorker(s, ["orders"]) as running:
            # Pull the cable once the worker polls (on a loaded machine its start took over
            # the 2 s this waited for: the cable was pulled during its start-up lookups).
            wait_for(lambda: running.worker.stats.requests["ReceiveMessage"] >= 1, timeout=30)
            proxy.down()
            time.sleep(3)
            proxy.up()
            # at least once: a delete cut by the outage hands its message over again
            dest.until_all({f"m{i}" for i in range(20)}, timeout=60)
    finally:
        proxy.close()
    assert {g.body for g in dest.got} == {f"m{i}" for i in range(20)}


def test_lost_answers_cost_seconds_not_the_visibility_timeout(
    make_settings: Callable[..., Settings], sqs: Any, moto_url: str
) -> None:
    """15 % of the worker's SQS answers are lost after SQS acted on the request. A lost
    receive answer hides its messages for the receive visibility it asked for, not the 60 s
    visibility timeout; nothing is lost or early. The bar (issue 27): p50 <= 3 s, and
    lateness <= 15 s unless the message's own lost receives explain more. A message whose
    receive answers were lost again and again waits each one's visibility, and the worker
    asks for more than 3 s while its loop lags or its batches take long (issue 45:
    core.heartbeat): 17 s and 21 s were seen, quiet and loaded, against a flat 15 s."""
    proxy = FaultProxy(moto_url)
    s = make_settings(endpoint_url=proxy.url, max_native_delay_seconds=CYCLE, wait_time_seconds=1)
    assert (s.receive_visibility(), s.visibility_timeout_seconds) == (3, 60)
    urls = install(s, sqs)
    total = 40
    sent = time.time()
    Sender(s, client=sqs).send_batch(
        "orders", [Message(f"m{i}", delay=CYCLE + 1 + i % 5) for i in range(total)]
    )
    due = {f"m{i}": sent + CYCLE + 1 + i % 5 for i in range(total)}
    dest = Collector(sqs, urls["orders"])
    proxy.cut_responses(0.15, seed=27)
    try:
        with RunningWorker(s, ["orders"]):
            # Every message, duplicates aside (counting deliveries let a duplicate stand in
            # for the last message due, and the test failed on a loaded machine).
            dest.until_all(set(due), timeout=90)
            dest.quiet_for(2)
    finally:
        proxy.close()
    first: dict[str, float] = {}
    for g in dest.got:
        first.setdefault(g.body, g.at)
    late = {b: first[b] - due[b] for b in due}
    ordered = sorted(late.values())
    p50, worst = ordered[len(ordered) // 2], ordered[-1]
    copies = Counter(g.body for g in dest.got)
    carried = proxy.cut_hand_over_bodies()
    # At least once allows a copy for each lost answer of a hand-over that carried it; a cut
    # receive, delete, extension or requeue is idempotent or deduplicated.
    unexplained = {b: n - 1 - carried[b] for b, n in copies.items() if n - 1 > carried[b]}
    # Each lost receive hid what it carried for the visibility it asked, then the next poll
    # and hand-over took it: what a message's lateness may hold beyond the 15 s.
    lost = proxy.lost_receives()
    hidden: Counter[str] = Counter()
    for visibility, bodies in lost:
        hidden.update({b: visibility + s.wait_time_seconds + 1 for b in bodies})
    slow = {b: round(t, 2) for b, t in late.items() if t > max(15, CYCLE + 3 + hidden[b])}
    print(
        f"cut {proxy.responses_cut} of {proxy.requests} answers {dict(proxy.cut_answers())}; "
        f"lateness p50 {p50:.2f} s, max {worst:.2f} s; {len(dest.got) - total} duplicates, "
        f"{len(dest.got) - total - sum(unexplained.values())} of them after a lost hand-over "
        f"answer, unexplained {unexplained}; lost receives (visibility, messages) "
        f"{[(v, len(b)) for v, b in lost]}"
    )
    assert proxy.responses_cut >= 5  # the faults happened
    assert set(first) == set(due) and ordered[0] > -0.05  # none lost, none early
    assert not unexplained
    assert p50 <= 3
    assert all(v < s.visibility_timeout_seconds for v, _ in lost)
    assert not slow, (slow, {b: hidden[b] for b in slow})


def short_visibility(make_settings: Callable[..., Settings], wait: int = 1) -> Settings:
    """A 1 s receive visibility, extended to 30 s: a batch in hand needs its heartbeat."""
    return make_settings(
        max_native_delay_seconds=CYCLE,
        receive_visibility_seconds=1,
        visibility_timeout_seconds=30,
        wait_time_seconds=wait,
    )


def slow_hand_over(
    make_settings: Callable[..., Settings],
    sqs: Any,
    monkeypatch: pytest.MonkeyPatch,
    refuse_extensions: str | None = None,
    wait: int = 1,
) -> tuple[Settings, dict[str, str]]:
    """A worker whose first hand-over's send takes 3 s, three times the receive visibility
    (1 s); its extensions refused with `refuse_extensions` when given."""
    s = short_visibility(make_settings, wait)
    urls = install(s, sqs)
    slow = {"sends": 1}
    real = AsyncCaller._one

    async def one(self: AsyncCaller, call: Call) -> Reply:
        if refuse_extensions and call.api == "ChangeMessageVisibilityBatch":
            return Reply(fault=Fault(refuse_extensions, "stubbed", 400))
        hand_over = call.api == "SendMessageBatch" and call.queue == s.queue_prefix + "orders"
        if hand_over and slow["sends"]:
            slow["sends"] -= 1
            await asyncio.sleep(3)
        return await real(self, call)

    monkeypatch.setattr(AsyncCaller, "_one", one)
    Sender(s, client=sqs).send("orders", "once", delay=CYCLE + 1)
    return s, urls


@pytest.mark.parametrize("code", ["ThrottlingException", "ReceiptHandleIsInvalid"])
def test_a_failed_extension_neither_loses_nor_duplicates(
    make_settings: Callable[..., Settings],
    sqs: Any,
    monkeypatch: pytest.MonkeyPatch,
    code: str,
) -> None:
    """A batch in hand longer than its receive visibility whose extensions all fail: the
    message comes back while in hand, the copy is released, and the first batch deletes it by
    the newest receipt handle. One delivery, nothing left behind.

    The copy must come back, so the machine's load is taken out of it. The loop's lag is
    measured as none: on a busy machine (a CI run: a lag of about 1 s) the worker sizes the
    receive visibility past the 3 s send and holds back extra loops, its own defence against
    copies, and none came back. Polls of 2 s span the visibility's end: when the receive came
    late (no pause before the hand-over, whose send then holds the first loop), the extra
    loop's poll, started with the batch, still sees the copy."""

    async def quiet(self: worker_module.Worker) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(worker_module.Worker, "_measure_lag", quiet)
    s, urls = slow_hand_over(make_settings, sqs, monkeypatch, refuse_extensions=code, wait=2)
    dest = Collector(sqs, urls["orders"])
    with RunningWorker(s, ["orders"]) as running:
        dest.until(1, timeout=30)
        dest.quiet_for(4)  # past another receive visibility and cycle
        stats = running.worker.stats.events
    assert [g.body for g in dest.got] == ["once"]
    assert stats["extend_failed"] >= 1 and stats["delay.copy_in_hand"] >= 1
    delay_url = urls["orders-delay.fifo"]
    counts = sqs.get_queue_attributes(QueueUrl=delay_url, AttributeNames=["All"])["Attributes"]
    assert counts["ApproximateNumberOfMessages"] == "0"
    assert counts["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_a_slow_batch_is_kept_out_of_sight_by_its_heartbeat(
    make_settings: Callable[..., Settings], sqs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same slow batch with working extensions: no copy ever comes back."""
    s, urls = slow_hand_over(make_settings, sqs, monkeypatch)
    dest = Collector(sqs, urls["orders"])
    with RunningWorker(s, ["orders"]) as running:
        dest.until(1, timeout=30)
        dest.quiet_for(2)
        stats = running.worker.stats.events
    assert [g.body for g in dest.got] == ["once"]
    assert stats["visibility_extended"] >= 1 and stats["delay.copy_in_hand"] == 0


def test_worker_reports_stats_with_request_counts(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    s = make_settings(max_native_delay_seconds=1, wait_time_seconds=1, stats_interval_seconds=0.5)
    install(s, sqs)
    out = capture_logs()
    with RunningWorker(s, ["orders"]):
        wait_for(lambda: events(out, "worker.stats"), timeout=10)
    stats = events(out, "worker.stats")[0]
    assert stats["requests"]["ReceiveMessage"] >= 1 and stats["requests_total"] >= 1


def test_idle_worker_runs_one_long_poll_per_queue(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    s = make_settings(max_native_delay_seconds=1, wait_time_seconds=1, concurrency=8)
    install(s, sqs, "a", "b")
    with RunningWorker(s, ["a", "b"]) as running:
        time.sleep(3.5)
        receives = running.worker.stats.requests["ReceiveMessage"]
        loops = [q.loops for q in running.worker.queues]
    assert loops == [1, 1]
    assert 4 <= receives <= 10  # ~one 1 s poll per queue per second


def test_a_backlog_gets_parallel_receive_loops_within_the_limit(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    s = make_settings(max_native_delay_seconds=1, wait_time_seconds=1, concurrency=3)
    urls = install(s, sqs)
    far = {wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": "100000"}}
    for start in range(0, 60, 10):
        sqs.send_message_batch(
            QueueUrl=urls["orders-delay.fifo"],
            Entries=[
                {
                    "Id": str(i),
                    "MessageBody": f"b{i}",
                    "MessageAttributes": far,
                    "MessageGroupId": f"g{start + i}",
                    "MessageDeduplicationId": f"d{start + i}",
                }
                for i in range(10)
            ],
        )
    with RunningWorker(s, ["orders"]) as running:
        wait_for(lambda: running.worker.stats.events["delay.requeued"] >= 120, timeout=30)
        peak = running.worker.queues[0].peak_loops
        allowed = running.worker.queues[0].demand.loops_allowed(3)
    # Three loops of full batches' worth: more while the receives come back short, as they
    # do here once the requeues become visible one by one (core.receive_loops)
    assert 2 <= peak <= 30 and (peak <= 3 or allowed > 3)
    requests = running.worker.stats.requests
    moved = running.worker.stats.events["delay.requeued"]
    # Batched, not one at a time: every receive's messages go back in one SendMessageBatch and
    # one DeleteMessageBatch. How full a receive comes back is the broker's doing, not the
    # worker's: with three loops racing for requeues that become visible one by one, an idle
    # machine saw about 6 per send, CI's loaded one 3.7 (134 moved in 36 receives). A worker
    # sending one message per request would make 134 requests here. The 60 messages are all
    # visible at the start, so at least one receive brings 10, which go out in one request.
    assert requests["SendMessageBatch"] <= requests["ReceiveMessage"]
    assert requests["DeleteMessageBatch"] <= requests["ReceiveMessage"]
    assert requests["SendMessageBatch"] <= moved - 9
    assert requests["DeleteMessageBatch"] <= moved - 9


def test_a_clock_stepped_back_during_a_sub_second_wait_changes_nothing(
    fast: Settings, sqs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's wall clock is stepped back 30 s while a hand-over waits out its fraction
    of a second (the wait runs on the monotonic clock): the message arrives on time, neither
    early nor 30 s late."""
    urls = install(fast, sqs)
    step = {"seconds": 0.0}
    real = AsyncCaller._one

    async def one(self: AsyncCaller, call: Call) -> Reply:
        if call.service == "clock":
            step["seconds"] = -30.0
        return await real(self, call)

    monkeypatch.setattr(AsyncCaller, "_one", one)
    dest = Collector(sqs, urls["orders"])
    # The wait is there only if the worker reads the message with its fraction of a second
    # still ahead: a worker more than 1.5 s late (a saturated machine; once in a fresh
    # clone's make test) hands it over at once. Then the scenario is run again: its
    # precondition, not the product's promise, failed.
    for attempt in range(3):
        sent = time.time()
        Sender(fast, client=sqs).send("orders", f"stepped {attempt}", delay=CYCLE + 1.5)
        due = sent + CYCLE + 1.5
        with RunningWorker(fast, ["orders"], clock=lambda: time.time() + step["seconds"]):
            [got] = dest.until(attempt + 1, timeout=30)[-1:]
            dest.quiet_for(2)
        if step["seconds"] == -30.0:
            break
    assert step["seconds"] == -30.0, "the hand-over never waited, three times"
    assert [g.body for g in dest.got] == [f"stepped {n}" for n in range(attempt + 1)]
    assert due <= got.at <= due + 1.5, got.at - due


def test_a_batch_past_its_budget_makes_no_more_calls(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    # Past the budget a message in hand could reappear (visibility timeout) and be handed
    # over twice: the step makes no further call, and the message simply comes back.
    s = make_settings(max_native_delay_seconds=1, wait_time_seconds=1, visibility_timeout_seconds=2)
    install(s, sqs)
    out = capture_logs()
    ticks = iter(range(10**9))
    clock = lambda: time.monotonic() + 2 * next(ticks)  # noqa: E731 - each reading 2 s later
    Sender(s, client=sqs).send("orders", "slow", delay=2)
    with RunningWorker(s, ["orders"], monotonic=clock) as running:
        late = wait_for(lambda: events(out, "batch.out_of_time"), timeout=20)
        requests = running.worker.stats.requests
    assert late[0]["level"] == "warning"
    assert requests["SendMessageBatch"] == 0 and requests["DeleteMessageBatch"] == 0


def test_a_mangled_due_time_does_not_stop_the_worker(fast: Settings, sqs: Any) -> None:
    # "²" passes str.isdigit() but not int(): it used to end the worker, then the next one.
    urls = install(fast, sqs)
    for i, due in enumerate(["²", "9" * 5000]):
        sqs.send_message(
            QueueUrl=urls["orders-delay.fifo"],
            MessageBody=f"mangled {i}",
            MessageGroupId=f"g{i}",
            MessageDeduplicationId=f"d{i}",
            MessageAttributes={
                wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": "3"},
                wire_format.DUE_AT_ATTRIBUTE: {"DataType": "Number", "StringValue": due},
            },
        )
    collector = Collector(sqs, urls["orders"])

    def bodies() -> set[str]:
        return {g.body for g in collector.got}

    with RunningWorker(fast, ["orders"]) as running:
        wait_for(lambda: collector.poll() or {"mangled 0", "mangled 1"} <= bodies(), 30)
        Sender(fast, client=sqs).send("orders", "after", delay=CYCLE + 1)
        wait_for(lambda: collector.poll() or "after" in bodies(), 30)
        assert running._thread.is_alive()
    # Each once, unless a hand-over's answer was lost (a saturated machine timed one out and
    # it was sent again: at least once, docs/worker.md), which the worker logs as a failure.
    assert bodies() == {"after", "mangled 0", "mangled 1"}
    assert len(collector.got) <= 4, [g.body for g in collector.got]


def teardown_module() -> None:
    structlog.reset_defaults()


def test_a_lagging_event_loop_neither_loses_its_batches_nor_duplicates_them(
    make_settings: Callable[..., Settings], sqs: Any
) -> None:
    """An ECS task at 100 % CPU is an event loop that runs late: here something in the
    worker's loop blocks it for 0.6 s in every 0.7 s, against a 1 s receive visibility. The
    heartbeat used to fire at half of that, late by the lag, after the visibility had run
    out: the batch came back to another loop while in hand. Now the visibility covers the
    lag and the batches' time, the beat allows for the lag, and no extra loop takes a batch
    while it lags (core.heartbeat)."""
    s = short_visibility(make_settings)
    urls = install(s, sqs)
    total = 20
    dest = Collector(sqs, urls["orders"])
    stop = threading.Event()

    async def hog() -> None:
        while not stop.is_set():
            await asyncio.sleep(0.1)
            time.sleep(0.6)  # noqa: ASYNC251 - the point: a loop that cannot keep up

    with RunningWorker(s, ["orders"]) as running:
        lagging = asyncio.run_coroutine_threadsafe(hog(), running._loop)
        # The loop lags before the messages come (a lag that appears within one receive
        # visibility of a batch is beyond any estimate).
        wait_for(lambda: running.worker.lag_seconds() >= 0.5, timeout=10)
        Sender(s, client=sqs).send_batch(
            "orders", [Message(f"m{i}", delay=CYCLE + 1 + i % 4) for i in range(total)]
        )
        dest.until_all({f"m{i}" for i in range(total)}, timeout=60)
        stop.set()
        lagging.result(timeout=5)
        dest.quiet_for(2)
        stats = running.worker.stats.events
    print({k: stats[k] for k in ("extend_failed", "delay.copy_in_hand", "receive_held_back")})
    assert sorted(g.body for g in dest.got) == sorted(f"m{i}" for i in range(total))
    assert stats["extend_failed"] == 0 and stats["delay.copy_in_hand"] == 0


def test_a_stalled_long_poll_is_given_up_at_its_own_deadline(
    make_settings: Callable[..., Settings], sqs: Any, moto_url: str
) -> None:
    """A long poll the network stalls (no answer, connection open) is given up 5 s after its
    wait, not after botocore's three 30 s attempts, which outlasted ECS's 75 s stop timeout;
    the next poll moves the message."""
    proxy = FaultProxy(moto_url)
    s = make_settings(endpoint_url=proxy.url, max_native_delay_seconds=CYCLE, wait_time_seconds=1)
    urls = install(s, sqs)
    dest = Collector(sqs, urls["orders"])
    try:
        proxy.hang("ReceiveMessage", times=1)
        started = time.monotonic()
        with RunningWorker(s, ["orders"]) as running:
            Sender(s, client=sqs).send("orders", "after the stall", delay=CYCLE + 1)
            dest.until(1, timeout=30)
            failures = running.worker.stats.tally.counts
        took = time.monotonic() - started
    finally:
        proxy.close()
    assert [g.body for g in dest.got] == ["after the stall"]
    assert sum(n for (_, metric), n in failures.items() if metric == "ReceiveFailures") >= 1
    assert took < 25  # the stalled attempt gave up after 6 s, not 30 or 90


def test_the_liveness_file_is_touched_only_while_the_event_loop_runs(
    make_settings: Callable[..., Settings], sqs: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQSDELAY_LIVENESS_FILE: the ECS task's health check fails once it is older than 60 s
    (infra/worker-ecs.yaml). A wedged event loop keeps the process alive but stops touching
    it."""
    monkeypatch.setattr(worker_module, "LIVENESS_S", 0.2)
    alive = tmp_path / "alive"
    s = make_settings(max_native_delay_seconds=CYCLE, wait_time_seconds=1, liveness_file=alive)
    install(s, sqs)
    with RunningWorker(s, ["orders"]) as running:
        wait_for(alive.exists, timeout=10)
        first = alive.stat().st_mtime
        wait_for(lambda: alive.stat().st_mtime > first, timeout=5)  # touched again
        begun = threading.Event()

        async def wedge() -> None:
            begun.set()
            time.sleep(1.5)  # noqa: ASYNC251 - a loop that is stuck

        blocked = asyncio.run_coroutine_threadsafe(wedge(), running._loop)
        assert begun.wait(timeout=5)
        during = alive.stat().st_mtime
        time.sleep(1.0)  # the experiment itself: a second of the wedge, five touches' worth
        assert alive.stat().st_mtime == during  # not touched while the loop was stuck
        blocked.result(timeout=5)
        wait_for(lambda: alive.stat().st_mtime > during, timeout=5)  # and again after
