"""Recurring schedules through the CLI against the emulator: `sqsdelay schedule put` in a
subprocess, the emulator's schedule runner on a virtual clock across Europe/Berlin's DST
changes of 2027 (Scheduler refuses a start in the past, so not 2026's), a duplicate
delivery of one occurrence that the guard runs once, and sync's diff."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from sqsdelay import consumer
from sqsdelay.core import recurring
from sqsdelay.core.consumer_message import read
from sqsdelay.dev.emulator import ScheduleRunner
from sqsdelay.settings import Settings
from tests.support.cli import run
from tests.support.consumerkit import guard_table
from tests.support.queues import install

ROLE = "arn:aws:iam::123456789012:role/sqsdelay-scheduler"


@pytest.fixture
def group(prefix: str) -> str:
    return f"{prefix}recurring"


@pytest.fixture
def cli_env(env: dict[str, str], group: str) -> dict[str, str]:
    return {**env, "SQSDELAY_SCHEDULER_ROLE_ARN": ROLE, "SQSDELAY_RECURRING_GROUP": group}


def drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages"):
        got += batch
        for m in batch:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return got


def scheduled(messages: list[dict[str, Any]]) -> list[str]:
    """The occurrences' times the virtual clock fired (2027's): the suite's own runner, on
    the real clock, fires these schedules too, at 2026's times."""
    times = []
    for m in messages:
        found = recurring.occurrence_of(read(m, need_queue=False).received.attributes)
        assert found is not None
        if found.scheduled_time.year >= 2027:
            times.append(found.scheduled_time.strftime("%Y-%m-%dT%H:%MZ"))
    return sorted(times)


def stepped(moto_url: str, group: str, start: datetime, hours: int) -> Iterator[ScheduleRunner]:
    runner = ScheduleRunner(moto_url, groups=frozenset({group}))
    for h in range(hours + 1):  # the virtual clock, an hour a step
        runner.fire_due((start + timedelta(hours=h)).timestamp())
    yield runner


def test_cron_fires_across_dst_and_the_guard_runs_a_duplicate_once(
    settings: Settings, sqs: Any, dynamodb: Any, moto_url: str, cli_env: dict[str, str], group: str
) -> None:
    urls = install(settings, sqs, "orders")
    put = run(
        cli_env, "schedule", "put", "night", "--cron", "0,30 2 * * *",
        "--timezone", "Europe/Berlin", "--queue", "orders", "--body", "tick",
    )  # fmt: skip
    assert put.returncode == 0, put.stderr
    assert put.stdout.startswith("created night  cron(0,30 2 * * ? *) Europe/Berlin")

    # spring-forward, 2027-03-28: 02:00 and 02:30 do not exist in Berlin that night
    [spring] = stepped(moto_url, group, datetime(2027, 3, 26, 23, tzinfo=UTC), 72)
    assert scheduled(drain(sqs, urls["orders"])) == [
        "2027-03-27T01:00Z",  # 02:00 CET
        "2027-03-27T01:30Z",
        "2027-03-29T00:00Z",  # 02:00 CEST
        "2027-03-29T00:30Z",
    ]
    # fall-back, 2027-10-31: 02:00-02:59 happen twice; each time fires once (CEST's)
    [fall] = stepped(moto_url, group, datetime(2027, 10, 30, 0, tzinfo=UTC), 48)
    assert scheduled(drain(sqs, urls["orders"])) == [
        "2027-10-30T00:00Z",
        "2027-10-30T00:30Z",
        "2027-10-31T00:00Z",  # 02:00 CEST; not 01:00Z (02:00 CET)
        "2027-10-31T00:30Z",
    ]

    # Scheduler delivers one occurrence twice: one id, and the guard runs it once
    scheduler = boto3.client("scheduler", endpoint_url=moto_url, region_name="us-east-1")
    schedule = scheduler.get_schedule(Name="night", GroupName=group)
    when = datetime(2027, 10, 31, 0, tzinfo=UTC)
    fall.fire_occurrence(schedule, when)
    fall.fire_occurrence(schedule, when)
    copies = [c for c in drain(sqs, urls["orders"]) if "2027" in str(c["MessageAttributes"])]
    assert len(copies) == 2
    ids = {c["MessageAttributes"]["NServiceBus.MessageId"]["StringValue"] for c in copies}
    assert ids == {"night@2027-10-31T00:00:00Z"}
    assert {c["Body"] for c in copies} == {"tick"}
    guard = consumer.Guard(guard_table(dynamodb, f"idem-{uuid.uuid4().hex[:8]}"), name="night",
                           client=dynamodb)  # fmt: skip
    ran: list[str] = []
    outcomes = [guard.run(c, lambda m: ran.append(m["Body"])).ran for c in copies]
    assert outcomes == [True, False] and ran == ["tick"]
    assert spring.dead_lettered == fall.dead_lettered == 0

    # paused: its occurrences are skipped; resumed: it fires again
    assert run(cli_env, "schedule", "pause", "night").returncode == 0
    list(stepped(moto_url, group, datetime(2027, 11, 2, 0, tzinfo=UTC), 30))
    assert scheduled(drain(sqs, urls["orders"])) == []
    listed = run(cli_env, "schedule", "list")
    assert "night\tDISABLED\tcron(0,30 2 * * ? *)\tEurope/Berlin\tput" in listed.stdout
    assert run(cli_env, "schedule", "delete", "night").returncode == 0
    assert "night" not in run(cli_env, "schedule", "list").stdout


def test_a_rate_fires_from_its_first_sight_every_period(
    settings: Settings, sqs: Any, moto_url: str, cli_env: dict[str, str], group: str
) -> None:
    urls = install(settings, sqs, "orders")
    put = run(cli_env, "schedule", "put", "often", "--rate", "90 minutes", "--queue", "orders",
              "--body", "r")  # fmt: skip
    assert put.returncode == 0, put.stderr
    list(stepped(moto_url, group, datetime(2027, 1, 1, tzinfo=UTC), 4))
    assert scheduled(drain(sqs, urls["orders"])) == [
        "2027-01-01T00:00Z",
        "2027-01-01T01:30Z",
        "2027-01-01T03:00Z",
    ]


def test_bad_input_is_refused_before_any_call(cli_env: dict[str, str]) -> None:
    for args, says in [
        (["--cron", "0 9 * * * *"], "exactly one of them must be ?"),
        (["--cron", "0 9 * * *", "--timezone", "Mars/Base"], "IANA"),
        (["--rate", "5 weeks"], "not a rate"),
    ]:
        # (a body over Scheduler's 256 KiB does not fit one argument: tests/core checks it)
        done = run(cli_env, "schedule", "put", "ok-name", "--queue", "orders", "--body", "b", *args)
        assert done.returncode == 2, (args, done.stdout)
        assert says in done.stderr
    bad_name = run(cli_env, "schedule", "put", "no spaces", "--rate", "5 minutes", "--queue",
                   "orders", "--body", "b")  # fmt: skip
    assert bad_name.returncode == 2 and "1-64 letters" in bad_name.stderr


def test_sync_creates_updates_and_deletes_only_its_set(
    settings: Settings, sqs: Any, cli_env: dict[str, str], tmp_path: Any
) -> None:
    install(settings, sqs, "orders")
    assert run(cli_env, "schedule", "put", "by-hand", "--rate", "1 hour", "--queue", "orders",
               "--body", "h").returncode == 0  # fmt: skip
    file = tmp_path / "jobs.yaml"
    file.write_text(
        "schedules:\n"
        "  - {name: a, cron: '0 9 * * MON-FRI', timezone: Europe/Berlin, queue: orders, body: A}\n"
        "  - {name: b, rate: 5 minutes, queue: orders, body: B}\n"
    )
    dry = run(cli_env, "schedule", "sync", str(file), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[:2] == [
        "+ a  cron(0 9 ? * MON,TUE,WED,THU,FRI *) Europe/Berlin",
        "+ b  rate(5 minutes) UTC",
    ]
    assert "by-hand\t" in run(cli_env, "schedule", "list").stdout
    assert "\ta\t" not in run(cli_env, "schedule", "list").stdout
    assert run(cli_env, "schedule", "sync", str(file)).stdout.endswith("2 changed, 0 unchanged\n")
    file.write_text(
        "schedules:\n  - {name: a, cron: '0 8 * * MON-FRI', timezone: Europe/Berlin, "
        "queue: orders, body: A}\n"
    )
    again = run(cli_env, "schedule", "sync", str(file))
    assert again.stdout.splitlines() == [
        "~ a  (ScheduleExpression)",
        "- b",
        "2 changed, 0 unchanged",
    ]
    names = [line.split("\t")[0] for line in run(cli_env, "schedule", "list").stdout.splitlines()]
    assert names == ["a", "by-hand"]
    assert run(cli_env, "schedule", "sync", str(file)).stdout == "0 changed, 1 unchanged\n"
    # A put of a name the set owns is refused (it took the schedule out of its set before,
    # and the set's next sync failed); a put of its own name is put again.
    taken = run(cli_env, "schedule", "put", "a", "--rate", "1 hour", "--queue", "orders",
                "--body", "x")  # fmt: skip
    assert taken.returncode == 2 and "belongs to set 'jobs', not to put" in taken.stderr, (
        taken.stderr
    )
    assert run(cli_env, "schedule", "sync", str(file)).stdout == "0 changed, 1 unchanged\n"
    assert run(cli_env, "schedule", "put", "by-hand", "--rate", "2 hours", "--queue", "orders",
               "--body", "h").returncode == 0  # fmt: skip
