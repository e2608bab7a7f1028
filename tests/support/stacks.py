"""The worker stacks' parameters as the tests deploy them, and deploying a template of
infra/ to the emulator's CloudFormation."""

from __future__ import annotations

from typing import Any

from tests.support import cfn

TOPIC = f"arn:aws:sns:{cfn.REGION}:{cfn.ACCOUNT}:sqsdelay-alarms"  # AlarmTopicArn is required
ECS_PARAMS = {
    "AlarmTopicArn": TOPIC,
    "Queues": "orders,billing",
    "CycleSeconds": 5,
    "ImageUri": f"sqsdelay-worker@sha256:{'0' * 64}",  # by digest, as the template requires
    "Subnets": ["subnet-1"],
    "SecurityGroups": ["sg-1"],
}


LAMBDA_PARAMS = {
    "DestinationName": "orders",
    "CycleSeconds": 1,
    "ImageUri": f"sqsdelay-lambda@sha256:{'0' * 64}",  # by digest, as the template requires
    "AlarmTopicArn": TOPIC,
}


def deploy(cf: Any, name: str, template: str, params: dict[str, str]) -> None:
    cf.create_stack(
        StackName=name,
        TemplateBody=(cfn.INFRA / template).read_text(),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()],
    )
    status = cf.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"]
    assert status == "CREATE_COMPLETE", status
