"""Parking in EventBridge Scheduler, against the moto server over HTTP and the emulator's
schedule runner, with a compressed 2 s cycle and a 6 s threshold."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from sqsdelay.aws.sender import Message, Sender
from sqsdelay.core import identity, parking, wire_format
from sqsdelay.core.decision import Limits, Park, Requeue, decide
from sqsdelay.core.received import Received
from sqsdelay.cost.money import estimate
from sqsdelay.cost.pricing import load_pricing, park_break_even_seconds
from sqsdelay.errors import ConfigError, InvalidMessage
from sqsdelay.settings import Settings, load_settings
from tests.conftest import wait_for
from tests.support.crash import crash_before_delete
from tests.support.queues import install
from tests.support.workerkit import Collector, RunningWorker

CYCLE = 2
ROLE = "arn:aws:iam::123456789012:role/sqsdelay-scheduler"


@pytest.fixture
def parked(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(
        max_native_delay_seconds=CYCLE,
        visibility_timeout_seconds=5,
        wait_time_seconds=1,
        parking="scheduler",
        scheduler_role_arn=ROLE,
        park_after_seconds=6,
    )


@pytest.fixture
def scheduler(moto_url: str) -> Any:
    return boto3.client("scheduler", endpoint_url=moto_url, region_name="us-east-1")


def schedules(scheduler: Any, settings: Settings) -> list[dict[str, Any]]:
    found = scheduler.list_schedules(GroupName=settings.schedule_group)["Schedules"]
    mine = []
    for s in found:
        full = scheduler.get_schedule(Name=s["Name"], GroupName=s["GroupName"])
        if settings.queue_prefix in json.loads(full["Target"]["Input"])["QueueUrl"]:
            mine.append(full)
    return mine


def counting(client: Any) -> list[str]:
    calls: list[str] = []
    client.meta.events.register(
        "before-parameter-build", lambda model, **_: calls.append(model.name)
    )
    return calls


# ---- pure rules ----


def received(delay: int, *, sent_ms: int = 1_000_000, attrs: int = 0) -> Received:
    attributes: dict[str, Any] = {
        wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": str(delay)},
        wire_format.MESSAGE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": "id-1"},
    }
    for i in range(attrs):
        attributes[f"a{i}"] = {"DataType": "String", "StringValue": "x"}
    system = {
        "SentTimestamp": str(sent_ms),
        "ApproximateFirstReceiveTimestamp": str(sent_ms + CYCLE * 1000),
        "ApproximateReceiveCount": "1",
        "MessageGroupId": "id-1",
    }
    return Received("sqs-id", "rh", "body", attributes, system)


def test_a_long_remaining_delay_is_parked_and_comes_back_one_lead_before_due() -> None:
    lim = Limits(max_native_delay_seconds=900, park_after_seconds=10_020)
    d = decide(received(86_400), local_now_ms=0, offset_ms=None, lim=lim)
    assert isinstance(d, Park)
    due = 1_000_000 + 86_400_000
    assert d.due_ms == due and d.message_id == "id-1"
    assert d.fire_ms <= due - parking.lead_seconds(900) * 1000  # back a cycle + margin early
    assert d.fire_ms % 1000 == 0  # at() takes whole seconds
    back = d.attributes
    assert back[wire_format.DUE_AT_ATTRIBUTE]["StringValue"] == str(due)
    assert int(back[wire_format.DELAY_ATTRIBUTE]["StringValue"]) * 1000 >= due - d.fire_ms
    assert isinstance(d.fallback, Requeue) and d.fallback.due_ms == due
    # Not enough left, parking off, or no room for DueAt: the loop.
    short = decide(received(10_000), local_now_ms=0, offset_ms=None, lim=lim)
    assert isinstance(short, Requeue)
    off = decide(received(86_400), local_now_ms=0, offset_ms=None, lim=Limits())
    assert isinstance(off, Requeue)
    full = decide(received(86_400, attrs=8), local_now_ms=0, offset_ms=None, lim=lim)
    assert isinstance(full, Requeue) and wire_format.DUE_AT_ATTRIBUTE not in full.attributes


def test_schedule_request_shape_and_input_limit() -> None:
    target = parking.ParkTarget("g", ROLE, "http://q/1/orders-delay.fifo", "arn:aws:sqs:r:1:e")
    attrs: Any = {"bin": {"DataType": "Binary", "BinaryValue": b"\x00\xff"}}
    req = parking.create_schedule_request(
        name="n",
        fire_ms=1_700_000_000_000,
        target=target,
        body="b",
        attributes=attrs,
        group_id="g1",
        dedup="d1",
    )
    assert req["ScheduleExpression"] == "at(2023-11-14T22:13:20)"
    assert req["ScheduleExpressionTimezone"] == "UTC"
    assert req["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert req["ActionAfterCompletion"] == "DELETE"
    t = req["Target"]
    assert t["Arn"] == "arn:aws:scheduler:::aws-sdk:sqs:sendMessage"
    assert t["DeadLetterConfig"] == {"Arn": "arn:aws:sqs:r:1:e"}
    assert t["RetryPolicy"]["MaximumRetryAttempts"] > 0
    send = parking.send_message_of(t["Input"])
    assert send["MessageGroupId"] == "g1" and send["MessageDeduplicationId"] == "d1"
    assert send["MessageAttributes"]["bin"]["BinaryValue"] == b"\x00\xff"  # round trip
    with pytest.raises(InvalidMessage, match="too large to park"):
        parking.create_schedule_request(
            name="n",
            fire_ms=0,
            target=target,
            body="x" * parking.MAX_INPUT_BYTES,
            attributes={},
            group_id="g",
            dedup="d",
        )


def test_settings_refuse_parking_without_a_role_or_below_the_lead() -> None:
    with pytest.raises(ConfigError, match="SQSDELAY_SCHEDULER_ROLE_ARN"):
        load_settings(parking="scheduler")
    with pytest.raises(ConfigError, match="SQSDELAY_PARK_AFTER_SECONDS must be at least 1080"):
        load_settings(parking="scheduler", scheduler_role_arn=ROLE, park_after_seconds=1000)


def test_break_even_and_the_one_year_bar_come_from_the_price_list() -> None:
    p = load_pricing()
    after = park_break_even_seconds(p)
    # (1.00 + 0.50 USD/M: one invocation and Scheduler's FIFO send) / (0.3 requests of a
    # batched cycle x 0.50 USD/M) = 10 cycles saved, after the lead of 900 + 120 s.
    assert (p.scheduler_price, p.fifo_price) == (1e-6, 5e-7)
    assert after == 1020 + 10 * 900
    year = estimate(365 * 86_400)
    assert year.parked_cost <= year.batched_cost / 1000
    assert year.parked_invocations == 1
    below = estimate(after)
    assert below.parked_cost == pytest.approx(below.batched_cost)  # not parked at the threshold


# ---- against the emulator ----


def test_parked_at_send_arrives_never_early_with_one_schedule(
    parked: Settings, sqs: Any, scheduler: Any
) -> None:
    urls = install(parked, sqs, scheduler=scheduler)
    sender = Sender(parked, client=sqs, scheduler=scheduler)
    calls = counting(sqs)
    attrs = {"trace": {"DataType": "String", "StringValue": "t-1"}}
    started = time.time()
    result = sender.send("orders", "hello", delay=10, attributes=attrs)
    assert result.route == "parked" and result.sqs_message_id is None
    (s,) = schedules(scheduler, parked)
    assert s["Name"] == identity.schedule_name(
        f"{parked.queue_prefix}orders-delay.fifo", result.message_id
    )
    assert not [c for c in calls if c.startswith("SendMessage")]  # no SQS send at send time
    with RunningWorker(parked, ["orders"]):
        got = Collector(sqs, urls["orders"]).until(1, timeout=30)
    assert got[0].body == "hello" and got[0].attributes["trace"]["StringValue"] == "t-1"
    assert got[0].at >= started + 10  # never early
    assert got[0].at - (started + 10) < 3  # lateness as unparked: within a poll and a second
    assert schedules(scheduler, parked) == []  # deleted after completion


def test_the_worker_parks_a_long_delay_that_the_sender_did_not(
    parked: Settings, make_settings: Callable[..., Settings], sqs: Any, scheduler: Any
) -> None:
    urls = install(parked, sqs, scheduler=scheduler)
    plain = make_settings(max_native_delay_seconds=CYCLE)  # a sender without parking
    started = time.time()
    Sender(plain, client=sqs).send("orders", "from-loop", delay=12)
    with RunningWorker(parked, ["orders"]) as running:
        got = Collector(sqs, urls["orders"]).until(1, timeout=40)
        stats = running.worker.stats
    assert got[0].at >= started + 12
    assert stats.events["delay.parked"] == 1
    # 3+ hops of loop replaced by: one requeue-free park, then the final hand-over.
    assert stats.events.get("delay.requeued", 0) == 0
    assert stats.events["delay.handed_over"] == 1


def test_a_fifo_destinations_delays_are_parked_and_keep_their_group(
    parked: Settings, make_settings: Callable[..., Settings], sqs: Any, scheduler: Any
) -> None:
    """Parked at send, and by the worker for a sender without parking: Scheduler sends each
    back to the FIFO delay queue with its group attribute, and both reach orders.fifo in their
    groups, never early."""
    urls = install(parked, sqs, "orders.fifo", scheduler=scheduler)
    plain = make_settings(max_native_delay_seconds=CYCLE)
    started = time.time()
    at_send = Sender(parked, client=sqs, scheduler=scheduler)
    assert at_send.send("orders.fifo", "at-send", delay=10, group_id="a").route == "parked"
    Sender(plain, client=sqs).send("orders.fifo", "in-loop", delay=12, group_id="b")
    with RunningWorker(parked, ["orders.fifo"]) as running:
        got = Collector(sqs, urls["orders.fifo"]).until(2, timeout=40)
        assert running.worker.stats.events["delay.parked"] == 1
    assert {(d.body, d.system["MessageGroupId"]) for d in got} == {
        ("at-send", "a"),
        ("in-loop", "b"),
    }
    for d in got:
        assert d.at >= started + (10 if d.body == "at-send" else 12)
    assert schedules(scheduler, parked) == []


def test_cancel_while_parked_and_too_late_after(parked: Settings, sqs: Any, scheduler: Any) -> None:
    urls = install(parked, sqs, scheduler=scheduler)
    sender = Sender(parked, client=sqs, scheduler=scheduler)
    kept = sender.send("orders", "kept", delay=9)
    gone = sender.send("orders", "cancelled", delay=30)
    assert sender.cancel("orders", gone.message_id) == "cancelled"
    assert sender.cancel("orders", gone.message_id) == "too-late"  # never silently ignored
    with RunningWorker(parked, ["orders"]):
        collector = Collector(sqs, urls["orders"])
        collector.until(1, timeout=30)
        assert sender.cancel("orders", kept.message_id) == "too-late"
        collector.quiet_for(2)
    assert [d.body for d in collector.got] == ["kept"]


def test_cancel_cli_prints_the_outcome_and_exits_3_when_too_late(
    parked: Settings, sqs: Any, scheduler: Any, env: dict[str, str]
) -> None:
    install(parked, sqs, scheduler=scheduler)
    result = Sender(parked, client=sqs, scheduler=scheduler).send("orders", "x", delay=60)
    env = {
        **env,
        "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": str(CYCLE),
        "SQSDELAY_PARKING": "scheduler",
        "SQSDELAY_SCHEDULER_ROLE_ARN": ROLE,
        "SQSDELAY_PARK_AFTER_SECONDS": "6",
    }

    def cancel() -> subprocess.CompletedProcess[str]:
        args = [sys.executable, "-m", "sqsdelay", "cancel", "orders", result.message_id]
        return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)

    first = cancel()
    assert (first.returncode, json.loads(first.stdout)["status"]) == (0, "cancelled"), first.stderr
    second = cancel()
    assert (second.returncode, json.loads(second.stdout)["status"]) == (3, "too-late")


def test_a_crash_between_create_schedule_and_delete_delivers_once(
    parked: Settings,
    make_settings: Callable[..., Settings],
    sqs: Any,
    scheduler: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    urls = install(parked, sqs, scheduler=scheduler)
    plain = make_settings(max_native_delay_seconds=CYCLE)
    started = time.time()
    Sender(plain, client=sqs).send("orders", "once", delay=14)
    # The worker creates the schedule, then "crashes" before its delete: no delete is made.
    deletes = crash_before_delete(monkeypatch)
    with RunningWorker(parked, ["orders"]):
        wait_for(lambda: schedules(scheduler, parked), timeout=20)
        wait_for(lambda: deletes, timeout=20)
    monkeypatch.undo()
    with RunningWorker(parked, ["orders"]) as running:
        collector = Collector(sqs, urls["orders"])
        collector.until(1, timeout=40)
        collector.quiet_for(3)
        assert running.worker.stats.events["delay.parked"] >= 1  # the conflict counted as done
    assert [d.body for d in collector.got] == ["once"]
    assert collector.got[0].at >= started + 14


def test_when_scheduler_refuses_the_loop_takes_over(
    parked: Settings, make_settings: Callable[..., Settings], sqs: Any, scheduler: Any
) -> None:
    urls = install(parked, sqs, scheduler=scheduler)
    # A schedule group that does not exist: every CreateSchedule fails.
    broken = make_settings(**{**parked.model_dump(), "schedule_group": "no-such-group"})
    started = time.time()
    asked = counting(scheduler)
    sender = Sender(broken, client=sqs, scheduler=scheduler)
    sent = sender.send("orders", "looped", delay=10)
    assert sent.route == "delay-queue"  # the sender fell back to the delay queue
    again = sender.send("orders", "looped again", delay=10)
    assert again.route == "delay-queue"
    assert asked.count("CreateSchedule") == 1  # the breaker: not asked again at once
    with RunningWorker(broken, ["orders"]) as running:
        got = Collector(sqs, urls["orders"]).until(2, timeout=40)
        events = running.worker.stats.events
    assert sorted(d.body for d in got) == ["looped", "looped again"]
    assert all(d.at >= started + 10 for d in got)
    assert events.get("delay.parked", 0) == 0 and events["delay.requeued"] >= 1


def test_install_creates_and_checks_the_schedule_group(
    make_settings: Callable[..., Settings], sqs: Any, scheduler: Any, env: dict[str, str]
) -> None:
    group = f"g-{make_settings().queue_prefix.strip('-')}"
    env = {
        **env,
        "SQSDELAY_PARKING": "scheduler",
        "SQSDELAY_SCHEDULER_ROLE_ARN": ROLE,
        "SQSDELAY_SCHEDULE_GROUP": group,
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "sqsdelay", "install", *args, "orders"]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)

    check = run("--check")
    assert check.returncode == 1 and f"schedules   {group}: missing" in check.stdout
    created = run()
    assert created.returncode == 0 and f"{group}: created" in created.stdout, created.stderr
    created_group = scheduler.get_schedule_group(Name=group)
    assert created_group["State"] == "ACTIVE"
    listed = scheduler.list_tags_for_resource(ResourceArn=created_group["Arn"])["Tags"]
    assert listed == [{"Key": "sqsdelay:component", "Value": "schedule-group"}]
    again = run("--check")
    assert again.returncode == 0 and f"{group}: exists" in again.stdout


def test_async_sender_parks_and_cancels(parked: Settings, sqs: Any, scheduler: Any) -> None:
    import asyncio

    from sqsdelay.aws.sender import AsyncSender

    install(parked, sqs, scheduler=scheduler)

    async def go() -> tuple[str, str, str]:
        async with AsyncSender(parked) as sender:
            one = await sender.send("orders", "a", delay=60)
            batch = await sender.send_batch("orders", [Message("b", delay=60), Message("c", 1)])
            assert [r.route for r in batch.sent] == ["parked", "direct"]
            return (
                one.route,
                await sender.cancel("orders", one.message_id),
                await sender.cancel("orders", batch.sent[0].message_id),
            )

    assert asyncio.run(go()) == ("parked", "cancelled", "cancelled")


def test_lambda_parks_and_the_poller_deletes_the_parked_record(
    parked: Settings, make_settings: Callable[..., Settings], sqs: Any, scheduler: Any
) -> None:
    from sqsdelay.aws.lambda_driver import Handler
    from tests.support.lambda_events import invoke_as_lambda

    urls = install(parked, sqs, scheduler=scheduler)
    plain = make_settings(max_native_delay_seconds=CYCLE)
    started = time.time()
    Sender(plain, client=sqs).send("orders", "via-lambda", delay=12)
    handler = Handler(parked, client=sqs, scheduler=scheduler)
    collector = Collector(sqs, urls["orders"])

    def round_trip() -> bool:
        invoke_as_lambda(sqs, urls["orders-delay.fifo"], handler)
        collector.poll()
        return bool(collector.got)

    wait_for(round_trip, timeout=40)
    assert handler.stats.events["delay.parked"] == 1
    assert handler.stats.requests["CreateSchedule"] == 1
    assert collector.got[0].at >= started + 12
    collector.quiet_for(2)
    assert [d.body for d in collector.got] == ["via-lambda"]


@pytest.mark.parametrize("days", [1, 30, 365])
def test_simulated_parking_one_schedule_never_early_and_far_fewer_requests(days: int) -> None:
    from sqsdelay.dev.simulation import simulate

    after = park_break_even_seconds(load_pricing())
    loop = simulate(days * 86_400, seed=days)
    park = simulate(days * 86_400, seed=days, park_after_seconds=after)
    assert park.schedules == 1 and loop.schedules == 0
    # A virtual clock (40 ms late here, every run): no scheduling noise reaches this bar; a hop
    # too many, or a fire time without room for the last cycle, is a cycle (900 s) late.
    assert 0 <= park.lateness_ms < 2_000 and 0 <= loop.lateness_ms < 2_000
    # send, one hop to park (receive + delete), Scheduler's send, the last hop (3)
    assert park.sqs_requests == 7 and park.hops == 2
    assert loop.sqs_requests == 1 + 3 * loop.hops
