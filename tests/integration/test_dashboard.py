"""infra/dashboard.yaml: the dashboard and alarms name only metrics the code writes, the README
lists every metric the code writes, the stack deploys into the emulator, and the operator
policy grants exactly what `sqsdelay inspect` calls."""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

from sqsdelay.aws.clients import observe
from sqsdelay.aws.cloudwatch import read_metrics
from sqsdelay.aws.installer import Installer
from sqsdelay.aws.operations import inspect
from sqsdelay.core import metrics
from sqsdelay.core.outcomes import Stats
from sqsdelay.settings import Settings
from tests.support import cfn, docs, stacks

ROOT = Path(__file__).resolve().parents[2]
# SQS's own metrics (Amazon SQS developer guide, "Available CloudWatch metrics for Amazon SQS").
SQS_METRICS = {
    "ApproximateAgeOfOldestMessage",
    "ApproximateNumberOfMessagesDelayed",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesVisible",
    "NumberOfEmptyReceives",
    "NumberOfMessagesDeleted",
    "NumberOfMessagesReceived",
    "NumberOfMessagesSent",
    "SentMessageSize",
}


TOPIC = f"arn:aws:sns:{cfn.REGION}:{cfn.ACCOUNT}:sqsdelay-alarms"  # AlarmTopicArn is required


def rendered(**params: str) -> dict[str, Any]:
    return cfn.Renderer(cfn.load("dashboard.yaml"), {"AlarmTopicArn": TOPIC, **params}).resources()


def dashboard_metrics(body: dict[str, Any]) -> dict[str, set[str]]:
    """Metric names per namespace, from metric arrays and SEARCH expressions."""
    found: dict[str, set[str]] = {}
    for widget in body["widgets"]:
        for row in widget["properties"].get("metrics", []):
            if isinstance(row[0], str):
                found.setdefault(row[0], set()).add(row[1])
            for item in row:
                expression = item.get("expression", "") if isinstance(item, dict) else ""
                for ns, name in re.findall(
                    r"\{\"?([^\",]+)\"?,[^}]*\}[^']*MetricName=\"(\w+)\"", expression
                ):
                    found.setdefault(ns, set()).add(name)
    return found


def alarm_metrics(resources: dict[str, Any]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for res in resources.values():
        if res["Type"] != "AWS::CloudWatch::Alarm":
            continue
        props = res["Properties"]
        stats = [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m]
        for metric in [props, *stats]:
            if "MetricName" in metric:
                found.setdefault(metric["Namespace"], set()).add(metric["MetricName"])
    return found


def test_dashboard_and_alarms_name_only_metrics_the_code_writes() -> None:
    resources = rendered(MetricsNamespace="acme/delays")
    body = json.loads(resources["Dashboard"]["Properties"]["DashboardBody"])
    shown = dashboard_metrics(body)
    alarmed = alarm_metrics(resources)
    written = set(metrics.UNITS)
    assert set(shown) == {"acme/delays", "AWS/SQS"} and set(alarmed) == {"acme/delays"}
    assert shown["acme/delays"] <= written, shown["acme/delays"] - written
    assert alarmed["acme/delays"] <= written
    assert shown["AWS/SQS"] <= SQS_METRICS
    # Everything the code writes is on the dashboard.
    assert written == shown["acme/delays"]
    assert alarmed["acme/delays"] == {
        "HandOverLateness",
        "DeadLettered",
        "DueWithin1h",
        "HandedOver",
    }


def test_the_docs_list_every_metric_with_its_unit() -> None:
    section = docs.section("metrics.md", "## The metrics")
    listed: dict[str, str] = {}
    for names, unit in re.findall(r"^\| ((?:`\w+`(?:, )?)+) \| (\w+) \|", section, re.M):
        for name in re.findall(r"`(\w+)`", names):
            listed[name] = unit
    assert listed == metrics.UNITS


@pytest.mark.filterwarnings("ignore:Tried to parse AWS..CloudWatch..Alarm")
def test_the_stack_deploys_and_the_alarms_are_accepted(moto_url: str, prefix: str) -> None:
    """moto 5.2.5's CloudFormation creates the dashboard but skips AWS::CloudWatch::Alarm
    ("not supported by moto's CloudFormation implementation"), and creates the
    AWS::IAM::ManagedPolicy without checking it; so the alarms' rendered properties go
    through PutMetricAlarm, which validates them, and cfn-lint and checkov check the
    template in `make test`."""
    cf = stacks.cloudformation(moto_url)
    cw = boto3.client("cloudwatch", endpoint_url=moto_url, region_name=cfn.REGION)
    cf.create_stack(
        StackName=f"{prefix}dashboard",
        TemplateBody=(cfn.INFRA / "dashboard.yaml").read_text(),
        Parameters=[
            {"ParameterKey": "QueuePrefix", "ParameterValue": prefix},
            {"ParameterKey": "AlarmTopicArn", "ParameterValue": TOPIC},
        ],
        Capabilities=["CAPABILITY_IAM"],
    )
    stack = cf.describe_stacks(StackName=f"{prefix}dashboard")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    body = json.loads(cw.get_dashboard(DashboardName=f"{prefix}sqsdelay")["DashboardBody"])
    assert len(body["widgets"]) == 10
    resources = rendered(QueuePrefix=prefix)
    alarms = {k: r["Properties"] for k, r in resources.items() if r["Type"].endswith("Alarm")}
    for props in alarms.values():
        cw.put_metric_alarm(**props)
    names = {a["AlarmName"] for a in cw.describe_alarms(AlarmNamePrefix=prefix)["MetricAlarms"]}
    assert names == {f"{prefix}sqsdelay-{n}" for n in ("late", "dead-lettered", "not-handing-over")}
    # The dashboard's alarm widget names these very alarms.
    [widget] = [w for w in body["widgets"] if w["type"] == "alarm"]
    assert {a.rsplit(":", 1)[1] for a in widget["properties"]["alarms"]} == names


def test_operator_policy_grants_exactly_what_inspect_calls(
    make_settings: Callable[..., Settings], moto_url: str, prefix: str
) -> None:
    s = make_settings()
    Installer(s).run(["orders"])
    stats = Stats()
    sqs = boto3.client("sqs", endpoint_url=moto_url, region_name=cfn.REGION)
    cw = boto3.client("cloudwatch", endpoint_url=moto_url, region_name=cfn.REGION)
    observe(stats, sqs)
    observe(stats, cw)
    inspect(s, ["orders"], client=sqs)
    read_metrics(s, [f"{prefix}orders"], client=cw)
    service = {"GetMetricData": "cloudwatch"}
    called = {(f"{service.get(api, 'sqs')}:{api}", queue) for api, queue in stats.calls}
    [policy] = [r for r in rendered(QueuePrefix=prefix).values() if r["Type"].endswith("Policy")]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    grants = {(a, st["Resource"]) for st in statements for a in _list(st["Action"])}
    assert {a for a, _ in called} == {a for a, _ in grants}
    for action, queue in called:
        resource = cfn.sqs_arn(queue) if queue else "*"
        assert any(a == action and fnmatch.fnmatchcase(resource, r) for a, r in grants), action
    # Nothing broader than the prefix's queues.
    assert {r for a, r in grants if a.startswith("sqs:")} == {cfn.sqs_arn(f"{prefix}*")}


@pytest.mark.parametrize("template", ["worker-ecs.yaml", "worker-lambda.yaml"])
def test_the_workers_need_no_cloudwatch_grant(template: str) -> None:
    text = (cfn.INFRA / template).read_text()
    assert "cloudwatch:" not in text


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
