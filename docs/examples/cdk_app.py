"""A CDK app with sqsdelay: two destinations under the prefix `shop-`, encrypted with a key of
the stack, the registry, a Lambda worker per destination with its alarms on the stack's topic,
and a producer role granted exactly what sending to `orders` needs.

    pip install 'sqsdelay[cdk]'
    cdk synth --app "python cdk_app.py" -c image=REPOSITORY@sha256:DIGEST
"""

from __future__ import annotations

from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns

from sqsdelay.cdk import SqsDelayQueues, SqsDelayRegistry, SqsDelayWorker

# the Dockerfile's `lambda` image in ECR, by digest (a tag may be moved)
EXAMPLE_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sqsdelay-lambda@sha256:" + "0" * 64


def build(app: App) -> Stack:
    image = app.node.try_get_context("image") or EXAMPLE_IMAGE
    cycle = int(app.node.try_get_context("cycle_seconds") or 900)  # the tests take 1 s
    stack = Stack(app, "Shop")
    alarms = sns.Topic(stack, "Alarms")
    key = kms.Key(stack, "QueueKey", enable_key_rotation=True)
    registry = SqsDelayRegistry(stack, "Registry", table_name="shop-scheduled")
    queues = SqsDelayQueues(
        stack,
        "Queues",
        destinations=["orders", "billing"],
        prefix="shop-",
        cycle_seconds=cycle,
        kms_key=key,
        registry=registry,
        alarm_topic=alarms,
    )
    SqsDelayWorker(stack, "Worker", queues=queues, runtime="lambda", image_uri=image)

    # The application that sends: SendMessage and GetQueueUrl on shop-orders and its delay
    # queue, the key through SQS, its records in the registry. Nothing on shop-billing.
    producer = iam.Role(
        stack, "Producer", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com")
    )
    queues.grant_send_delayed(producer, ["orders"])
    # The application that handles what arrives in shop-orders.
    consumer = iam.Role(
        stack, "Consumer", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com")
    )
    queues.grant_consume(consumer, ["orders"])
    return stack


if __name__ == "__main__":
    app = App()
    build(app)
    app.synth()
