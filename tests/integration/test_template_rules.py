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
