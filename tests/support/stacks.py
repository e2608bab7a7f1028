"""The worker stacks' parameters as the tests deploy them, and deploying a template of
infra/ to the emulator's CloudFormation."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from tests.support import cfn

# One attempt, and time to answer: moto creates a stack within the CreateStack call, which took
# past botocore's 60 s read timeout beside the suite; the retry then met "Stack ... already
# exists" (a fresh clone's CDK lane, 2026-11-28).
_ONCE = Config(read_timeout=600, retries={"total_max_attempts": 1})


def cloudformation(url: str, region: str = cfn.REGION) -> Any:
    """The emulator's CloudFormation, as the tests deploy with it."""
    return boto3.client("cloudformation", endpoint_url=url, region_name=region, config=_ONCE)


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
