"""Installers against the moto server, plus the pure attribute checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.queue_urls import check_queue
from sqsdelay.core import quotas
from sqsdelay.core.queue_checks import held_messages
from sqsdelay.core.queue_trios import QueueSpec
from sqsdelay.settings import Settings


def attributes(sqs: Any, name: str) -> dict[str, str]:
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]  # type: ignore[no-any-return]


def test_install_creates_three_queues_with_the_required_attributes(
    settings: Settings, sqs: Any
) -> None:
    s = settings.model_copy(update={"max_native_delay_seconds": 7})
    reports = Installer(s, client=sqs).run(["orders", "billing"])
    p = s.queue_prefix
    assert [(r.spec.role, r.spec.name, r.created) for r in reports] == [
        ("destination", p + "orders", True),
        ("delay", p + "orders-delay.fifo", True),
        ("destination", p + "billing", True),
        ("delay", p + "billing-delay.fifo", True),
        ("error", p + "error", True),
    ]
    assert all(not r.problems for r in reports)
    delay = attributes(sqs, p + "orders-delay.fifo")
    assert delay["FifoQueue"] == "true" and delay["DelaySeconds"] == "7"
    assert int(delay["MessageRetentionPeriod"]) >= 345_600
    assert delay["SqsManagedSseEnabled"] == "true" and "RedrivePolicy" not in delay
    assert attributes(sqs, p + "orders").get("FifoQueue", "false") == "false"
    assert attributes(sqs, p + "error")["MessageRetentionPeriod"] == "1209600"
    # cost allocation tags: what each queue is, and which destination it serves
    tagged = {
        name: sqs.list_queue_tags(QueueUrl=sqs.get_queue_url(QueueName=p + name)["QueueUrl"])
        for name in ("orders", "orders-delay.fifo", "error")
    }
    assert tagged["orders-delay.fifo"]["Tags"] == {
        "sqsdelay:component": "delay-queue",
        "sqsdelay:destination": p + "orders",
    }
    assert tagged["orders"]["Tags"]["sqsdelay:component"] == "destination-queue"
    assert tagged["error"]["Tags"] == {"sqsdelay:component": "error-queue"}


def test_install_is_idempotent(settings: Settings, sqs: Any) -> None:
    Installer(settings, client=sqs).run(["orders"])
    again = Installer(settings, client=sqs).run(["orders"])
    assert [r.created for r in again] == [False, False, False]
    assert all(not r.problems for r in again)


def test_check_lists_every_problem_with_its_fix_and_fix_corrects_them(
    settings: Settings, sqs: Any
) -> None:
    p = settings.queue_prefix
    sqs.create_queue(QueueName=p + "orders")
    dlq = sqs.create_queue(QueueName=p + "dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
    sqs.create_queue(
        QueueName=p + "orders-delay.fifo",
        Attributes={
            "FifoQueue": "true",
            "DelaySeconds": "0",
            "MessageRetentionPeriod": "3600",
            "SqsManagedSseEnabled": "false",
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"], "maxReceiveCount": 3}
            ),
        },
    )
    reports = Installer(settings, client=sqs).run(["orders"], create=False)
    delay_report = reports[1]
    text = " | ".join(f"{x.problem} -> {x.fix}" for x in delay_report.problems)
    assert "DelaySeconds is 0, expected 900" in text
    assert "retention is 3600 s" in text
    assert "redrive policy" in text
    assert "encryption is off" in text
    fix = f"sqsdelay --queue-prefix {p} install orders"
    assert all(x.fix == fix + " --fix" for x in delay_report.problems)
    assert reports[2].problems[0].problem == "queue does not exist"  # error queue
    assert reports[2].problems[0].fix == fix

    fixed = Installer(settings, client=sqs).run(["orders"], fix=True)
    assert all(not r.problems for r in fixed), [r.problems for r in fixed]
    assert len(fixed[1].fixed) == 5  # with the high-throughput warning
    after = attributes(sqs, p + "orders-delay.fifo")
    assert after["DelaySeconds"] == "900" and "RedrivePolicy" not in after


def test_fix_never_changes_delay_of_a_non_empty_fifo_queue_without_force(
    settings: Settings, sqs: Any
) -> None:
    Installer(settings, client=sqs).run(["orders"])
    name = settings.queue_prefix + "orders-delay.fifo"
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="d")
    changed = settings.model_copy(update={"max_native_delay_seconds": 60})
    reports = Installer(changed, client=sqs).run(["orders"], fix=True)
    (problem,) = reports[1].problems
    assert problem.needs_force and problem.fix.endswith("--fix --force")
    assert "holds 1 messages" in problem.problem
    assert attributes(sqs, name)["DelaySeconds"] == "900"
    forced = Installer(changed, client=sqs).run(["orders"], fix=True, force=True)
    assert not forced[1].problems
    assert attributes(sqs, name)["DelaySeconds"] == "60"


def test_read_back_waits_for_a_new_queue_to_report_its_attributes(settings: Settings) -> None:
    """The reference transport re-reads attributes: a new queue may briefly report 0."""

    class Eventually:
        calls = 0

        def get_queue_url(self, **_: Any) -> dict[str, str]:
            raise __import__("botocore.exceptions").exceptions.ClientError(
                {"Error": {"Code": "AWS.SimpleQueueService.NonExistentQueue"}}, "GetQueueUrl"
            )

        def create_queue(self, **kw: Any) -> dict[str, str]:
            return {"QueueUrl": "http://x/1/" + kw["QueueName"]}

        def get_queue_attributes(self, **_: Any) -> dict[str, dict[str, str]]:
            self.calls += 1
            delay = "900" if self.calls > 3 else "0"
            return {
                "Attributes": {
                    "FifoQueue": "true",
                    "DelaySeconds": delay,
                    "MessageRetentionPeriod": "1209600",
                    "SqsManagedSseEnabled": "true",
                    **quotas.HIGH_THROUGHPUT_ATTRIBUTES,
                }
            }

    fake = Eventually()
    reports = Installer(settings, client=fake, sleep=lambda _: None).run(["orders"])
    assert not reports[1].problems and fake.calls > 3


@pytest.mark.parametrize(
    ("role", "attrs", "expected"),
    [
        ("error", {"MessageRetentionPeriod": "60"}, "retention is 60 s"),
        (
            "delay",
            {
                "FifoQueue": "true",
                "DelaySeconds": "900",
                "MessageRetentionPeriod": "345600",
                "SqsManagedSseEnabled": "true",
            },
            "high-throughput mode is off",
        ),
    ],
)
def test_pure_checks(settings: Settings, role: Any, attrs: dict[str, str], expected: str) -> None:
    problems = check_queue(QueueSpec(role, "q", "q"), attrs, settings)
    assert [p.problem for p in problems if expected in p.problem]


def test_kms_key_counts_as_encryption(settings: Settings) -> None:
    attrs = {
        "FifoQueue": "true",
        "DelaySeconds": "900",
        "MessageRetentionPeriod": "345600",
        "KmsMasterKeyId": "alias/x",
        **quotas.HIGH_THROUGHPUT_ATTRIBUTES,
    }
    assert check_queue(QueueSpec("delay", "q-delay.fifo", "q"), attrs, settings) == []


def test_high_throughput_mode_is_only_a_warning(settings: Settings) -> None:
    attrs = {
        "FifoQueue": "true",
        "DelaySeconds": "900",
        "MessageRetentionPeriod": "345600",
        "SqsManagedSseEnabled": "true",
        "DeduplicationScope": "queue",
    }
    (p,) = check_queue(QueueSpec("delay", "q-delay.fifo", "q"), attrs, settings)
    assert p.warning and p.attributes == quotas.HIGH_THROUGHPUT_ATTRIBUTES


def test_held_messages_counts_visible_inflight_and_delayed() -> None:
    assert (
        held_messages(
            {
                "ApproximateNumberOfMessages": "1",
                "ApproximateNumberOfMessagesNotVisible": "2",
                "ApproximateNumberOfMessagesDelayed": "3",
            }
        )
        == 6
    )


def test_manual_creation_script_passes_the_installer_check(settings: Settings, sqs: Any) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "scripts/create_queues.py",
            "orders",
            "--prefix",
            settings.queue_prefix,
            "--endpoint-url",
            str(settings.endpoint_url),
            "--region",
            "us-east-1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3
    reports = Installer(settings, client=sqs).run(["orders"], create=False)
    assert all(r.url and not r.problems for r in reports), [r.problems for r in reports]


def test_fix_lowers_delay_below_900_only_with_force_and_says_what_breaks(
    settings: Settings, sqs: Any
) -> None:
    """An NServiceBus endpoint refuses to start when its delay queue's DelaySeconds is below
    900 (DelayedMessagesPump.Initialize), so a compressed cycle never reaches a shared queue
    by accident, even when the queue is empty."""
    Installer(settings, client=sqs).run(["orders"])
    name = settings.queue_prefix + "orders-delay.fifo"
    compressed = settings.model_copy(update={"max_native_delay_seconds": 5})
    (problem,) = Installer(compressed, client=sqs).run(["orders"], fix=True)[1].problems
    assert problem.needs_force and problem.fix.endswith("--fix --force")
    assert "NServiceBus endpoint" in problem.problem and "holds" not in problem.problem
    assert attributes(sqs, name)["DelaySeconds"] == "900"
    forced = Installer(compressed, client=sqs).run(["orders"], fix=True, force=True)
    assert forced[1].fixed and attributes(sqs, name)["DelaySeconds"] == "5"
    # Back up to 900 needs no force on an empty queue.
    back = Installer(settings, client=sqs).run(["orders"], fix=True)
    assert back[1].fixed and not back[1].problems
    assert attributes(sqs, name)["DelaySeconds"] == "900"


def test_an_nservicebus_error_queue_is_only_warned_about_and_never_shortened(
    settings: Settings, sqs: Any
) -> None:
    four_days = str(4 * 24 * 3600)  # what NServiceBus's QueueCreator sets by default
    name = settings.queue_prefix + "error"
    sqs.create_queue(QueueName=name, Attributes={"MessageRetentionPeriod": four_days})
    checked = Installer(settings, client=sqs).run(["orders"], create=False)
    (warning,) = checked[2].problems
    assert warning.warning and "NServiceBus" in warning.problem
    assert attributes(sqs, name)["MessageRetentionPeriod"] == four_days
    fixed = Installer(settings, client=sqs).run(["orders"], fix=True)
    assert attributes(sqs, name)["MessageRetentionPeriod"] == "1209600"
    assert not fixed[2].problems


def test_check_warns_when_parking_is_off_while_the_group_holds_parked_messages(
    env: dict[str, str], prefix: str, moto_url: str
) -> None:
    """infra/error-queue.yaml retains the schedule group and the Scheduler role; `install
    --check` says when parking is off and the group still holds schedules, which deleting
    the group or the role would lose."""
    import boto3

    from tests.support import cli

    group = f"{prefix}parked"
    env = {**env, "SQSDELAY_SCHEDULE_GROUP": group}  # parking off: the default
    assert cli.run(env, "install", "orders").returncode == 0
    quiet = cli.run(env, "install", "--check", "orders")
    assert quiet.returncode == 0 and "schedules" not in quiet.stdout, quiet.stdout
    scheduler = boto3.client("scheduler", endpoint_url=moto_url, region_name="us-east-1")
    scheduler.create_schedule_group(Name=group)
    scheduler.create_schedule(
        Name="m1",
        GroupName=group,
        ScheduleExpression="at(2030-01-01T00:00:00)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={
            "Arn": "arn:aws:scheduler:::aws-sdk:sqs:sendMessage",
            "RoleArn": "arn:aws:iam::123456789012:role/sqsdelay-scheduler",
            "Input": "{}",
        },
    )
    done = cli.run(env, "install", "--check", "orders")
    assert done.returncode == 0, done.stdout  # a warning: the check passes
    assert f"schedules   {group}: exists" in done.stdout
    assert "warning: parking is off (SQSDELAY_PARKING) but the group holds 1 schedule(s)" in (
        done.stdout
    )
    assert f"list-schedules --group-name {group} is empty" in done.stdout


def test_check_compares_a_lambda_workers_timeout_with_its_queues_visibility(
    env: dict[str, str], prefix: str, moto_url: str, sqs: Any
) -> None:
    """The function's timeout (worker-lambda.yaml) and the delay queue's visibility timeout
    (queues.yaml) are set in two stacks: `install --check` reads both through the queue's
    event source mapping, and wants the visibility at least 6 x the timeout (AWS's guidance
    for SQS triggers)."""
    from tests.support import cli
    from tests.support.lambdas import lambda_function

    assert cli.run(env, "install", "orders").returncode == 0
    delay = attributes(sqs, prefix + "orders-delay.fifo")
    visibility = int(delay["VisibilityTimeout"])
    lam, function = lambda_function(moto_url)
    lam.create_event_source_mapping(
        EventSourceArn=delay["QueueArn"], FunctionName=function, BatchSize=10, Enabled=False
    )
    lam.update_function_configuration(FunctionName=function, Timeout=visibility // 6)
    fine = cli.run(env, "install", "--check", "orders")
    assert fine.returncode == 0 and "timeout" not in fine.stdout, fine.stdout
    lam.update_function_configuration(FunctionName=function, Timeout=visibility // 6 + 1)
    done = cli.run(env, "install", "--check", "orders")
    assert done.returncode == 1, done.stdout
    assert (
        f"problem: visibility timeout {visibility} s is less than 6 x the timeout of the "
        f"Lambda function {function!r} it triggers ({visibility // 6 + 1} s)"
    ) in done.stdout
    assert f"lower the function's timeout to at most {visibility // 6} s" in done.stdout
