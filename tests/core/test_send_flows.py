"""The send flows (core/send_flows.py) driven by the stub SQS and Scheduler, call by call,
through a `Sender` whose calls they are."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sqsdelay.aws.sender import Message, Sender
from sqsdelay.core.flows import drive
from sqsdelay.core.parking import min_park_after_seconds
from sqsdelay.settings import Settings
from tests.support.stub import StubAws

FAKE = SimpleNamespace(meta=SimpleNamespace(partition="aws", region_name="us-east-1"))
DAYS_3 = 3 * 86_400


def parking_sender(concurrency: int) -> Sender:
    s = Settings(
        region="us-east-1",
        parking="scheduler",
        scheduler_role_arn="arn:aws:iam::123456789012:role/sqsdelay-scheduler",
        park_after_seconds=min_park_after_seconds(900),
        park_concurrency=concurrency,
    )
    return Sender(s, client=FAKE, scheduler=FAKE)


def test_a_batch_parks_in_bounded_rounds_and_stops_when_scheduler_fails() -> None:
    # AsyncSender used to start every park at once, so the breaker was asked before any
    # answer came, and one park's error lost the others' results.
    stub = StubAws()
    stub.throttle("CreateSchedule")
    sender = parking_sender(concurrency=3)
    messages = [Message(f"m{i}", delay=DAYS_3) for i in range(7)]
    result = drive(sender.flows.send_batch_flow("orders", messages, True), stub)
    creates = [r for r in stub.rounds if r and r[0].api == "CreateSchedule"]
    assert [len(r) for r in creates] == [3]  # one bounded round, then the breaker held
    assert sorted(r.index for r in result.sent) == list(range(7)) and not result.failed
    assert {r.route for r in result.sent} == {"delay-queue"}
    assert len(stub.queues["orders-delay.fifo"]) == 7


def test_a_batch_parks_every_message_it_can() -> None:
    stub = StubAws()
    sender = parking_sender(concurrency=4)
    messages = [Message(f"m{i}", delay=DAYS_3) for i in range(10)] + [Message("soon", delay=5)]
    result = drive(sender.flows.send_batch_flow("orders", messages, True), stub)
    creates = [len(r) for r in stub.rounds if r and r[0].api == "CreateSchedule"]
    assert creates == [4, 4, 2] and len(stub.schedules) == 10
    assert sorted(r.route for r in result.sent) == ["direct"] + ["parked"] * 10


def test_send_takes_the_fields_of_message_and_refuses_a_misspelt_one() -> None:
    import asyncio

    import pytest

    from sqsdelay.aws.sender import AsyncSender

    calls: list[object] = []
    sender = Sender(Settings(region="us-east-1"), client=FAKE)
    sender._caller = calls.append  # type: ignore[assignment]  # any call would land here
    with pytest.raises(TypeError, match="delay_seconds"):
        sender.send("orders", "x", delay_seconds=5)  # type: ignore[call-arg]

    async def misspelt() -> None:
        await AsyncSender(Settings(region="us-east-1")).send("orders", "x", deliverat=None)  # type: ignore[call-arg]

    with pytest.raises(TypeError, match="deliverat"):
        asyncio.run(misspelt())
    assert calls == []


def test_a_fraction_of_a_second_travels_in_the_due_time_when_there_is_room() -> None:
    from sqsdelay.aws.sender import plan
    from sqsdelay.core import wire_format

    s = Settings(region="us-east-1")
    attrs = plan("orders", Message("x", delay=1000.25), s, now=0).request["MessageAttributes"]
    assert attrs[wire_format.DELAY_ATTRIBUTE]["StringValue"] == "1001"
    assert attrs[wire_format.DUE_AT_ATTRIBUTE]["StringValue"] == "1000250"
    assert wire_format.DELAY_MS_ATTRIBUTE not in attrs  # the due time says it
    # Eight of the caller's, the delay and NServiceBus.MessageId: no room, whole seconds.
    eight = {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(8)}
    full = plan("orders", Message("x", delay=1000.25, attributes=eight), s, now=0)
    assert len(full.request["MessageAttributes"]) == 10
    assert wire_format.DUE_AT_ATTRIBUTE not in full.request["MessageAttributes"]


def test_a_fifo_destination_is_sent_to_now_through_staging_or_through_its_delay_queue() -> None:
    from sqsdelay.aws.sender import plan
    from sqsdelay.core import wire_format
    from sqsdelay.core.fifo_dedup import forward_dedup_id

    s = Settings(region="us-east-1", queue_prefix="p-")

    def planned(delay: float, **options: Any) -> Any:
        return plan(
            "orders.fifo", Message("x", delay=delay, group_id="g", id="m1", **options), s, now=0
        )

    def attrs(p: Any) -> dict[str, str]:
        return {k: v["StringValue"] for k, v in p.request.get("MessageAttributes", {}).items()}

    now = planned(0)
    assert (now.queue, now.request["MessageGroupId"]) == ("p-orders.fifo", "g")
    assert now.request["MessageDeduplicationId"] == forward_dedup_id("m1", "0")
    short = planned(1.25)
    assert short.queue == "p-orders-fifo-staging" and short.request["DelaySeconds"] == 1
    assert attrs(short) == {
        wire_format.GROUP_ID_ATTRIBUTE: "g",
        wire_format.DUE_AT_ATTRIBUTE: "1250",  # the send's key: the forward deduplicates by it
        wire_format.DELAY_MS_ATTRIBUTE: "1250",  # the forward waits out the 0.25 s
        wire_format.MESSAGE_ID_ATTRIBUTE: "m1",
    }
    assert "MessageGroupId" not in short.request  # a standard queue
    whole = planned(2)
    assert whole.request["DelaySeconds"] == 2 and wire_format.DELAY_MS_ATTRIBUTE not in attrs(whole)
    # seven of the caller's, the group, the id and the due time: no room for the
    # milliseconds, rounded up; eight: no room for the due time either
    seven = {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(7)}
    full = planned(1.25, attributes=seven)
    assert full.request["DelaySeconds"] == 2 and wire_format.DELAY_MS_ATTRIBUTE not in attrs(full)
    assert wire_format.DUE_AT_ATTRIBUTE in attrs(full)
    eight = {**seven, "a7": {"DataType": "String", "StringValue": "v"}}
    fuller = planned(1.25, attributes=eight)
    assert fuller.request["DelaySeconds"] == 2 and len(attrs(fuller)) == 10
    assert wire_format.DUE_AT_ATTRIBUTE not in attrs(fuller)
    # A new send of the same id is a new deduplication id, on every route.
    assert (
        plan("orders.fifo", Message("x", delay=0, group_id="g", id="m1"), s, now=1).request[
            "MessageDeduplicationId"
        ]
        != now.request["MessageDeduplicationId"]
    )
    long_again = plan("orders.fifo", Message("x", delay=1000, group_id="g", id="m1"), s, now=1)
    long = planned(1000.25)
    assert long.queue == "p-orders-delay-fifo.fifo" and long.request["MessageGroupId"] == "m1"
    assert long_again.request["MessageDeduplicationId"] != long.request["MessageDeduplicationId"]
    assert attrs(long)[wire_format.GROUP_ID_ATTRIBUTE] == "g"
