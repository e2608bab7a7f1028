"""`sqsdelay replay-errors` with EventBridge Scheduler's own dead letters, through the CLI
against the emulator: a parked message whose schedule could not deliver it (its delay queue
was gone when it fired) goes back to its delay queue and is delivered once, with the
registry on; a recurring occurrence goes to its destination with its occurrence id; one
whose time Scheduler did not fill in is refused and stays in the error queue. The emulator's
runner writes a dead letter as Scheduler does: the target's input as the body, with
SCHEDULE_ARN, ERROR_CODE and the others as attributes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from sqsdelay.aws.operations import dead_letters
from sqsdelay.aws.sender import Sender
from sqsdelay.core import parking, recurring, wire_format
from sqsdelay.dev.emulator import ScheduleRunner
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support import cli
from tests.support.queues import install
from tests.support.workerkit import Collector, RunningWorker

pytestmark = pytest.mark.slow
CYCLE = 2
ROLE = "arn:aws:iam::123456789012:role/sqsdelay-scheduler"


@pytest.fixture
def parked(make_settings: Callable[..., Settings], prefix: str) -> Settings:
    return make_settings(
        max_native_delay_seconds=CYCLE,
        visibility_timeout_seconds=5,
        wait_time_seconds=1,
        parking="scheduler",
        scheduler_role_arn=ROLE,
        park_after_seconds=6,
        registry="dynamodb",
        registry_table=f"{prefix}scheduled",
    )


@pytest.fixture
def scheduler(moto_url: str) -> Any:
    return boto3.client("scheduler", endpoint_url=moto_url, region_name="us-east-1")


def env_of(settings: Settings, **more: str) -> dict[str, str]:
    """The environment a user's `sqsdelay replay-errors` runs with (the worker's settings)."""
    env = {
        **os.environ,
        "SQSDELAY_ENDPOINT_URL": str(settings.endpoint_url),
        "SQSDELAY_REGION": settings.region,
        "SQSDELAY_QUEUE_PREFIX": settings.queue_prefix,
        "SQSDELAY_ERROR_QUEUE": settings.error_queue,
        "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": str(settings.max_native_delay_seconds),
        **more,
    }
    if settings.registry == "dynamodb":
        env |= {"SQSDELAY_REGISTRY": "dynamodb", "SQSDELAY_REGISTRY_TABLE": settings.registry_table}
    return env


def replay(settings: Settings, queue: str = "orders") -> dict[str, Any]:
    done = cli.run(env_of(settings), "replay-errors", queue)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def error_queue_messages(sqs: Any, url: str) -> list[dict[str, Any]]:
    """What the error queue holds, read and made visible again."""
    got = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, MessageAttributeNames=["All"]
    ).get("Messages", [])
    for m in got:
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
        )
    return list(got)


def test_a_parked_message_scheduler_could_not_deliver_is_replayed_once_through_the_registry(
    parked: Settings, sqs: Any, scheduler: Any, dynamodb: Any
) -> None:
    urls = install(parked, sqs, scheduler=scheduler, dynamodb=dynamodb)
    sender = Sender(parked, client=sqs, scheduler=scheduler, dynamodb=dynamodb)
    attrs = {"trace": {"DataType": "String", "StringValue": "t-1"}}
    sent = sender.send("orders", "hello", delay=10, attributes=attrs, id="order-7")
    assert sent.route == "parked"
    # The delay queue is gone when the schedule fires (about 7 s from now): the emulator's
    # runner, as Scheduler after its retries, puts the input in the error queue.
    sqs.delete_queue(QueueUrl=urls["orders-delay.fifo"])
    wait_for(lambda: error_queue_messages(sqs, urls["error"]), timeout=40, interval=0.5)
    [letter] = error_queue_messages(sqs, urls["error"])
    said = {k: v["StringValue"] for k, v in letter["MessageAttributes"].items()}
    assert set(parking.SCHEDULER_DEAD_LETTER_ATTRIBUTES) <= set(said)
    assert said["TARGET_ARN"] == parking.SEND_MESSAGE_TARGET
    assert json.loads(letter["Body"])["MessageBody"] == "hello"
    # Before the fix, replay-errors left it where it was ("not replayable").
    install(parked, sqs, scheduler=scheduler, dynamodb=dynamodb)  # the queue is back
    [listed] = dead_letters(parked, "orders", client=sqs)  # the console lists it too
    assert listed.reason.startswith("EventBridge Scheduler could not deliver it: ")
    collector = Collector(sqs, urls["orders"])
    with RunningWorker(parked, ["orders"]) as running:
        assert replay(parked) == {
            "replayed": 1,
            "skipped": {},
            "failed": {},
            "replayed_not_deleted": {},
        }
        [back] = collector.until(1, timeout=30)
        assert replay(parked)["replayed"] == 0  # nothing left: it is not sent twice
        collector.quiet_for(3)
        assert running.worker.stats.events["delay.duplicate_dropped"] == 0
    assert [d.body for d in collector.got] == ["hello"]
    assert back.attributes["trace"]["StringValue"] == "t-1"
    assert back.attributes[wire_format.MESSAGE_ID_ATTRIBUTE]["StringValue"] == "order-7"
    assert back.attributes[wire_format.REPLAY_ATTRIBUTE]["StringValue"] == letter["MessageId"]
    assert error_queue_messages(sqs, urls["error"]) == []
    states = {r.message_id: r.state for r in sender.scheduled("orders", state=None)}
    assert states == {"order-7": "handed-over"}


def test_a_recurring_occurrence_goes_to_its_destination_and_an_unfilled_one_stays(
    make_settings: Callable[..., Settings], sqs: Any, moto_url: str, env: dict[str, str]
) -> None:
    settings = make_settings()
    group = f"{settings.queue_prefix}recurring"
    urls = install(settings, sqs, "orders")
    cli_env = {**env, "SQSDELAY_SCHEDULER_ROLE_ARN": ROLE, "SQSDELAY_RECURRING_GROUP": group}
    put = cli.run(
        cli_env,
        "schedule",
        "put",
        "yearly",
        "--cron",
        "0 9 1 1 ? *",
        "--queue",
        "orders",
        "--body",
        "tick",
    )  # fmt: skip  (1 January: the suite's own runner, on the real clock, does not fire it)
    assert put.returncode == 0, put.stderr
    scheduler = boto3.client("scheduler", endpoint_url=moto_url, region_name="us-east-1")
    schedule = scheduler.get_schedule(Name="yearly", GroupName=group)
    runner = ScheduleRunner(moto_url, groups=frozenset({group}))
    sqs.delete_queue(QueueUrl=urls["orders"])
    runner.fire_occurrence(schedule, datetime(2027, 1, 1, 9, tzinfo=UTC))
    assert runner.dead_lettered == 1
    # Scheduler's dead letter of an occurrence whose keyword was left unfilled.
    sqs.send_message(
        QueueUrl=urls["error"],
        MessageBody=schedule["Target"]["Input"],
        MessageAttributes={
            "SCHEDULE_ARN": {"DataType": "String", "StringValue": schedule["Arn"]},
            "ERROR_CODE": {"DataType": "String", "StringValue": "AWS.Scheduler.InternalError"},
        },
    )
    install(settings, sqs, "orders")
    out = replay(settings)
    assert out["replayed"] == 1 and out["failed"] == {}
    [why] = out["skipped"].values()
    assert why.startswith("not replayable: it still holds a Scheduler context keyword")
    [back] = Collector(sqs, urls["orders"]).until(1, timeout=10)
    assert back.body == "tick"
    occurrence = recurring.occurrence_of(back.attributes)
    assert occurrence is not None and occurrence.message_id == "yearly@2027-01-01T09:00:00Z"
    assert wire_format.REPLAY_ATTRIBUTE in back.attributes
    [left] = error_queue_messages(sqs, urls["error"])  # the refused one, still there
    assert "<aws.scheduler.scheduled-time>" in left["Body"]
