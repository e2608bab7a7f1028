"""The templates' Rules, which CloudFormation checks before it creates anything (moto
ignores them): evaluated with the parameters a user gives, by the suite's template renderer."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import cfn

ECS = {
    "ImageUri": f"sqsdelay-worker@sha256:{'0' * 64}",
    "Subnets": ["subnet-1"],
    "SecurityGroups": ["sg-1"],
    "AlarmTopicArn": f"arn:aws:sns:{cfn.REGION}:{cfn.ACCOUNT}:alarms",
}


def broken(params: dict[str, Any]) -> list[str]:
    return cfn.Renderer(cfn.load("worker-ecs.yaml"), {**ECS, **params}).broken_rules()


def test_all_queues_without_a_prefix_is_refused_with_the_parameter_named() -> None:
    [message] = broken({"Queues": "*", "QueuePrefix": ""})
    assert "QueuePrefix" in message and "Queues" in message
    assert "every queue of the account" in message


@pytest.mark.parametrize(
    "params",
    [
        {"Queues": "*", "QueuePrefix": "orders-"},
        {"Queues": "orders,billing", "QueuePrefix": ""},
        {"Queues": "orders", "QueuePrefix": "team-"},
    ],
)
def test_a_prefix_or_named_queues_pass(params: dict[str, Any]) -> None:
    assert broken(params) == []


def test_the_rule_is_written_the_way_cloudformation_reads_it() -> None:
    """Rules take only their own functions (no Fn::Join, no Conditions): the renderer would
    evaluate a Join, CloudFormation refuses the template."""
    allowed = {"Fn::And", "Fn::Contains", "Fn::EachMemberEquals", "Fn::EachMemberIn"}
    allowed |= {"Fn::Equals", "Fn::Not", "Fn::Or", "Fn::RefAll", "Fn::ValueOf", "Fn::ValueOfAll"}
    allowed |= {"Ref"}

    def functions(node: Any) -> set[str]:
        if isinstance(node, list):
            return set().union(*(functions(x) for x in node)) if node else set()
        if isinstance(node, dict):
            found = {k for k in node if k == "Ref" or k.startswith("Fn::")}
            return found.union(*(functions(v) for v in node.values()))
        return set()

    for template in ("worker-ecs.yaml", "error-queue.yaml"):
        rules = cfn.load(template)["Rules"]
        assert rules and functions(rules) <= allowed, template


# What holds messages, or brings parked ones back: deleting the stack, an update that drops
# the resource (Parking=off) or one that replaces it (a new name) must leave it.
KEEPS_MESSAGES = {
    "AWS::SQS::Queue",
    "AWS::DynamoDB::Table",
    # deleting a schedule group deletes its schedules (DeleteScheduleGroup): parked messages
    "AWS::Scheduler::ScheduleGroup",
}


@pytest.mark.parametrize("template", sorted(p.name for p in cfn.INFRA.glob("*.yaml")))
def test_what_holds_messages_outlives_its_stack(template: str) -> None:
    resources = cfn.load(template)["Resources"]
    kept = {k for k, r in resources.items() if r["Type"] in KEEPS_MESSAGES}
    if template == "error-queue.yaml":
        # the role parked messages come back with: without it a schedule cannot send
        assert "ScheduleGroup" in kept
        kept.add("SchedulerRole")
    for key in kept:
        policies = {p: resources[key].get(p) for p in ("DeletionPolicy", "UpdateReplacePolicy")}
        assert policies == {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}, key
