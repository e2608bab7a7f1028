"""infra/recurring.yaml offline: the group kept, the role Scheduler sends occurrences with
(the destinations the schedule sources name and the error queue, nothing else), every
policy as IAM takes it, and the alarms on Scheduler's own metrics for the group."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from sqsdelay.core import recurring
from tests.support import cfn, iam, iam_grammar
from tests.support.iam import Request

TOPIC = f"arn:aws:sns:{cfn.REGION}:{cfn.ACCOUNT}:sqsdelay-alarms"
KEY = f"arn:aws:kms:{cfn.REGION}:{cfn.ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
BASE = {"DestinationPrefix": "myapp-", "ErrorQueueName": "myapp-error", "AlarmTopicArn": TOPIC}


def render(**params: Any) -> dict[str, Any]:
    return cfn.Renderer(cfn.load("recurring.yaml"), {**BASE, **params}).resources()


@pytest.mark.parametrize(("kms", "expected"), list(itertools.product(["", KEY], ["0", "12"])))
def test_every_rendered_policy_passes_iams_grammar(kms: str, expected: str) -> None:
    resources = render(KmsKeyArn=kms, ExpectedInvocationsPerHour=expected)
    assert iam_grammar.documents(resources)
    assert iam_grammar.problems(resources) == []


def test_the_group_and_role_are_kept_and_the_role_is_this_groups() -> None:
    resources = render(RecurringGroupName="jobs")
    for name in ("RecurringGroup", "RecurringSchedulerRole"):
        assert resources[name]["DeletionPolicy"] == "Retain", name
    assert resources["RecurringGroup"]["Properties"]["Name"] == "jobs"
    (trust,) = resources["RecurringSchedulerRole"]["Properties"]["AssumeRolePolicyDocument"][
        "Statement"
    ]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {
        "aws:SourceAccount": cfn.ACCOUNT,
        "aws:SourceArn": f"arn:aws:scheduler:{cfn.REGION}:{cfn.ACCOUNT}:schedule-group/jobs",
    }


def test_the_role_sends_to_the_destinations_and_the_error_queue_only() -> None:
    statements = iam.role_statements(render(), "RecurringSchedulerRole")
    # Celery's SQS names (queue_name_prefix 'myapp-'), a FIFO one, dramatiq-sqs's, the error
    # queue: what a synced schedule's target and dead-letter config name
    allowed = ["myapp-celery", "myapp-jobs.fifo", "myapp-_default", "myapp-error"]
    sends = [iam.sqs_call("sqs:SendMessage", cfn.sqs_arn(q)) for q in allowed]
    assert iam.denied(statements, sends) == []
    for queue in ("other-celery", "error", "myapp"):
        assert not iam.allows(statements, iam.sqs_call("sqs:SendMessage", cfn.sqs_arn(queue)))
    other_account = "arn:aws:sqs:us-east-1:999999999999:myapp-celery"
    assert not iam.allows(statements, iam.sqs_call("sqs:SendMessage", other_account))
    receive = iam.sqs_call("sqs:ReceiveMessage", cfn.sqs_arn("myapp-celery"))
    assert not iam.allows(statements, receive)
    assert not [st for st in statements if "kms:" in str(st["Action"])]


def test_with_a_key_the_role_may_use_it_through_sqs_only() -> None:
    statements = iam.role_statements(render(KmsKeyArn=KEY), "RecurringSchedulerRole")
    via = {"kms:ViaService": f"sqs.{cfn.REGION}.amazonaws.com", "aws:ResourceAccount": cfn.ACCOUNT}
    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        assert iam.allows(statements, Request(action, KEY, via))
        assert not iam.allows(
            statements, Request(action, KEY, {"aws:ResourceAccount": cfn.ACCOUNT})
        )


def _metrics(alarm: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(namespace, metric, group) of an alarm, single or metric math."""
    props = alarm["Properties"]
    found = (
        [props]
        if "MetricName" in props
        else [m["MetricStat"]["Metric"] for m in props["Metrics"] if "MetricStat" in m]
    )
    out = set()
    for m in found:
        dims = {d["Name"]: d["Value"] for d in m["Dimensions"]}
        out.add((m["Namespace"], m["MetricName"], dims["ScheduleGroup"]))
    return out


def test_alarms_on_schedulers_own_metrics_for_the_group_notify_the_topic() -> None:
    resources = render(RecurringGroupName="jobs", ExpectedInvocationsPerHour="4")
    alarms = {k: v for k, v in resources.items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    watched = set().union(*(_metrics(a) for a in alarms.values()))
    assert {metric for _, metric, _ in watched} == {
        "InvocationAttemptCount",
        "TargetErrorCount",
        "InvocationDroppedCount",
        "InvocationsSentToDeadLetterCount",
        "InvocationsFailedToBeSentToDeadLetterCount",
    }
    assert {(ns, group) for ns, _, group in watched} == {("AWS/Scheduler", "jobs")}
    for name, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [TOPIC], name
    too_few = alarms["TooFewInvocationsAlarm"]["Properties"]
    assert (too_few["Threshold"], too_few["ComparisonOperator"]) == ("4", "LessThanThreshold")
    assert too_few["TreatMissingData"] == "breaching"  # no invocation at all is the failure
    assert "TooFewInvocationsAlarm" not in render()  # without an expected rate: none


def test_the_default_group_is_the_settings() -> None:
    from sqsdelay.settings import Settings

    template = cfn.load("recurring.yaml")
    assert template["Parameters"]["RecurringGroupName"]["Default"] == Settings().recurring_group
    assert recurring.check_name(Settings().recurring_group, "group name")
