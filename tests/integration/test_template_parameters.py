"""The templates' parameters refuse, before anything is created, what AWS would refuse at
create: names past their service's length, an image by tag, a log retention CloudWatch Logs
does not take, a task size Fargate does not offer, MinTasks above MaxTasks. Each checked
against an outside list where one exists (botocore's Regions, cfn-lint's resource schemas)."""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

import botocore
import pytest

from tests.support import cfn
from tests.support.cfn_parameters import refused
from tests.support.stacks import ECS_PARAMS, LAMBDA_PARAMS, TOPIC

DIGEST = f"sqsdelay@sha256:{'0' * 64}"


def regions() -> list[str]:
    endpoints = Path(botocore.__file__).parent / "data" / "endpoints.json"
    partitions = json.loads(endpoints.read_text())["partitions"]
    return sorted(r for p in partitions for r in p["regions"])


@cache
def cfn_lint_schemas() -> Path:
    """cfn-lint's copy of the CloudFormation resource schemas (found, not imported: cfn-lint
    takes seconds to import)."""
    spec = importlib.util.find_spec("cfnlint")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / "data" / "schemas"


def resource_schema(resource_type: str) -> dict[str, Any]:
    root = cfn_lint_schemas()
    index = json.loads((root / "providers" / "us-east-1.json").read_text())
    schema: dict[str, Any] = json.loads(
        (root / "resources" / f"{index[resource_type]}.json").read_text()
    )
    return schema


def test_the_test_stacks_parameters_are_accepted() -> None:
    assert refused(cfn.load("worker-ecs.yaml"), ECS_PARAMS) == []
    assert refused(cfn.load("worker-lambda.yaml"), LAMBDA_PARAMS) == []


@pytest.mark.parametrize("template", ["worker-ecs.yaml", "worker-lambda.yaml"])
def test_the_image_is_given_by_digest(template: str) -> None:
    t = cfn.load(template)
    assert refused(t, {"ImageUri": DIGEST}) == []
    for moved in ("sqsdelay:latest", "sqsdelay", f"sqsdelay@sha256:{'0' * 63}"):
        assert refused(t, {"ImageUri": moved}) == ["ImageUri"], moved
    ecs, lam = (
        cfn.load(n)["Parameters"]["ImageUri"] for n in ("worker-ecs.yaml", "worker-lambda.yaml")
    )
    assert ecs["AllowedPattern"] == lam["AllowedPattern"]


def longest(template: dict[str, Any], name: str, params: dict[str, Any]) -> int:
    """The longest value of `name` the template takes (letters)."""
    taken = [n for n in range(0, 100) if refused(template, {**params, name: "a" * n}) == []]
    return max(taken)


def test_the_lambda_functions_name_fits_in_64_for_every_name_the_parameters_take() -> None:
    t = cfn.load("worker-lambda.yaml")
    prefix = longest(t, "QueuePrefix", LAMBDA_PARAMS)
    destination = longest(t, "DestinationName", LAMBDA_PARAMS)
    params = {**LAMBDA_PARAMS, "QueuePrefix": "p" * prefix, "DestinationName": "d" * destination}
    assert refused(t, params) == []
    name = cfn.Renderer(t, params).resources()["Function"]["Properties"]["FunctionName"]
    assert len(name) == 64  # the longest names the parameters take, and no longer
    assert prefix >= 20 and destination >= 35  # room enough for real names


def test_the_scheduler_roles_name_fits_in_64_in_every_region() -> None:
    t = cfn.load("error-queue.yaml")
    params = {"AlarmTopicArn": TOPIC, "Parking": "scheduler"}
    prefix = longest(t, "QueuePrefix", params)
    names = []
    for region in regions():
        renderer = cfn.Renderer(t, {**params, "QueuePrefix": "p" * prefix})
        renderer.pseudo["AWS::Region"] = region
        names.append(renderer.value(t["Resources"]["SchedulerRole"]["Properties"]["RoleName"]))
    assert max(len(n) for n in names) == 64, max(names, key=len)
    assert prefix >= 20


@pytest.mark.parametrize("template", ["worker-ecs.yaml", "worker-lambda.yaml"])
def test_log_retention_takes_only_what_cloudwatch_logs_takes(template: str) -> None:
    spec = cfn.load(template)["Parameters"]["LogRetentionDays"]
    allowed = resource_schema("AWS::Logs::LogGroup")["properties"]["RetentionInDays"]["enum"]
    assert spec["AllowedValues"] == allowed
    assert spec["Default"] in allowed


def fargate_sizes() -> dict[int, set[int]]:
    """cfn-lint's table of Fargate's CPU and memory pairs (its rule E3047), up to 16 vCPU."""
    path = cfn_lint_schemas() / "extensions" / "aws_ecs_taskdefinition" / "fargate_cpu_memory.json"
    sizes: dict[int, set[int]] = {}
    for alternative in json.loads(path.read_text())["then"]["anyOf"]:
        (cpu,) = alternative["properties"]["Cpu"]["then"]["enum"]
        memory = alternative["properties"]["Memory"]["then"]
        if "enum" in memory:
            sizes[int(cpu)] = set(memory["enum"])
        else:
            step = memory["multipleOf"]
            sizes[int(cpu)] = set(range(memory["minimum"], memory["maximum"] + 1, step))
    return {cpu: memory for cpu, memory in sizes.items() if cpu <= 16384}


def test_cpu_and_memory_are_a_fargate_task_size() -> None:
    t = cfn.load("worker-ecs.yaml")
    sizes = fargate_sizes()
    cpus = [int(c) for c in t["Parameters"]["Cpu"]["AllowedValues"]]
    memories = [int(m) for m in t["Parameters"]["Memory"]["AllowedValues"]]
    assert set(cpus) == set(sizes)
    assert set(memories) == set().union(*sizes.values())
    for cpu in cpus:
        for memory in memories:
            params = {**ECS_PARAMS, "Cpu": cpu, "Memory": memory}
            broken = cfn.Renderer(t, params).broken_rules()
            assert (broken == []) == (memory in sizes[cpu]), (cpu, memory, broken)
    defaults = cfn.defaults(t)
    assert defaults["Memory"] in sizes[defaults["Cpu"]]


def test_min_tasks_above_max_tasks_is_refused() -> None:
    t = cfn.load("worker-ecs.yaml")
    highest = longest_number(t, "MinTasks")
    assert highest >= 10
    for low in range(1, highest + 1):
        for high in range(1, highest + 3):
            params = {**ECS_PARAMS, "MinTasks": low, "MaxTasks": high}
            assert refused(t, params) == []
            broken = cfn.Renderer(t, params).broken_rules()
            assert (broken == []) == (low <= high), (low, high)
            if broken:
                assert "MinTasks is above MaxTasks" in broken[0]
    assert refused(t, {"MinTasks": highest + 1}) == ["MinTasks"]
    assert refused(t, {"MaxTasks": 0}) == ["MaxTasks"]


def longest_number(template: dict[str, Any], name: str) -> int:
    return max(n for n in range(0, 1000) if refused(template, {name: n}) == [])
