"""AWS CDK constructs for sqsdelay (`pip install 'sqsdelay[cdk]'`; docs/cdk.md).

One source of truth: each construct includes a template of `infra/` with
`aws_cdk.cloudformation_include.CfnInclude`, its parameters given, so what CDK deploys is what
the templates deploy (the tests compare them). The constructs add only what CDK users expect
around them: the wiring between the stacks' parameters, the order of creation, and grants
(`SqsDelayQueues.grant_send_delayed`, `grant_consume`).

    queues = SqsDelayQueues(stack, "Queues", destinations=["orders"], alarm_topic=topic)
    SqsDelayWorker(stack, "Worker", queues=queues, runtime="lambda", image_uri=...)
    queues.grant_send_delayed(producer_role)

Nothing else in the package imports this module (pyproject.toml's import-linter contract):
`import sqsdelay` never loads aws-cdk-lib.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

try:
    from aws_cdk import Fn, Stack, Token
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_sns as sns
    from aws_cdk import cloudformation_include as cfn_inc
    from constructs import Construct
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(f"sqsdelay.cdk needs aws-cdk-lib: pip install 'sqsdelay[cdk]' ({e})") from e

# The templates the package ships (sqsdelay/data/infra: in a checkout a link to infra/, in
# the wheel a copy of it), so the construct and the templates are one source at one version.
INFRA = Path(__file__).resolve().parent / "data" / "infra"

# What a send calls (sqsdelay/core/send_flows.py, core/queue_lookup.py, core/registry.py put and
# mark_sent, core/schedules.py create): SendMessageBatch is authorised as sqs:SendMessage.
SEND_ACTIONS = ("sqs:GetQueueUrl", "sqs:SendMessage")
CONSUME_ACTIONS = (
    "sqs:GetQueueUrl",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
)
RECORD_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem")
PARK_ACTIONS = ("scheduler:CreateSchedule", "scheduler:GetSchedule")


class _AnyTag(yaml.SafeLoader):
    """Reads a template's Parameters; the short forms (!Ref, !Sub...) elsewhere are skipped."""


_AnyTag.add_multi_constructor("!", lambda loader, suffix, node: None)


@cache
def _parameters(template: str) -> dict[str, dict[str, Any]]:
    data = yaml.load((INFRA / template).read_text(), Loader=_AnyTag)  # noqa: S506 (SafeLoader)
    params: dict[str, dict[str, Any]] = data["Parameters"]
    return params


def check_parameters(template: str, parameters: Mapping[str, Any]) -> None:
    """Refuse what CloudFormation would refuse of these values as the template's parameters:
    an included template's parameters become literals, so its AllowedPattern, AllowedValues,
    MinValue and MaxValue are checked here instead (a value only known at deploy time, a
    token, is not)."""
    specs = _parameters(template)
    for name, value in parameters.items():
        if name not in specs:
            raise ValueError(f"{template} has no parameter {name}")
        spec = specs[name]
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            if Token.is_unresolved(v) or (isinstance(v, str) and Token.is_unresolved(v)):
                continue
            text = str(v)
            if "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], text):
                raise ValueError(
                    f"{template} {name}: {text!r} does not match {spec['AllowedPattern']!r}"
                )
            if "AllowedValues" in spec and text not in [str(a) for a in spec["AllowedValues"]]:
                raise ValueError(
                    f"{template} {name}: {text!r} is not one of {spec['AllowedValues']}"
                )
            if spec.get("Type") == "Number":
                number = float(text)
                low, high = spec.get("MinValue"), spec.get("MaxValue")
                if (low is not None and number < low) or (high is not None and number > high):
                    raise ValueError(f"{template} {name}: {text} is outside {low}..{high}")


@cache
def _without_description(template: str) -> str:
    """The template with no top-level Description: CfnInclude adds each included template's to
    the stack's, and CloudFormation takes 1,024 characters (the stack's own is the user's). A
    copy made at synth time from infra/, never edited."""
    kept, skipping = [], False
    for line in (INFRA / template).read_text().splitlines(keepends=True):
        if line.startswith("Description:"):
            skipping = True
            continue
        if skipping and line[:1] not in (" ", "\n", ""):
            skipping = False
        if not skipping:
            kept.append(line)
    path = Path(tempfile.mkdtemp(prefix="sqsdelay-cdk-")) / template
    path.write_text("".join(kept))
    return str(path)


def include(scope: Construct, id: str, template: str, parameters: Mapping[str, Any]) -> Any:
    """`infra/<template>` in `scope`, its parameters replaced by `parameters` (the others by
    their defaults). Logical ids get the construct's path, so a template is
    included as often as there are destinations in one stack."""
    check_parameters(template, parameters)
    specs = _parameters(template)
    missing = sorted(
        k for k, spec in specs.items() if "Default" not in spec and k not in parameters
    )
    if missing:
        raise ValueError(f"{template} needs {', '.join(missing)} (template_parameters)")
    # Every parameter a literal, the defaults too (the constructs' arguments set them), but
    # an empty default (no KMS key): as a literal in the key's unused branch, cfn-lint and
    # CDK's validation would take it for a key; it stays a parameter, its default "".
    defaults = {k: spec["Default"] for k, spec in specs.items() if spec.get("Default", "") != ""}
    return cfn_inc.CfnInclude(
        scope,
        id,
        template_file=_without_description(template),
        parameters={**defaults, **parameters},
        preserve_logical_ids=False,
    )


def _fixed(template: Any, condition: str, value: bool) -> None:
    """A condition CloudFormation cannot evaluate when a parameter became a reference to a
    resource (a key made in the same stack: conditions may only read parameters); Python
    knows its value."""
    template.get_condition(condition).expression = Fn.condition_equals(
        "on", "on" if value else "off"
    )


def _key_arn(key: kms.IKey | None) -> str:
    return "" if key is None else str(key.key_arn)


def _kms_parameter(name: str, arn: str) -> dict[str, str]:
    """Without a key the parameter keeps its default (""), a parameter to CloudFormation: as a
    literal in the key's unused branch cfn-lint would take it for a key id."""
    return {name: arn} if arn else {}


class SqsDelayRegistry(Construct):  # type: ignore[misc]
    """infra/registry.yaml: the table of scheduled messages (SQSDELAY_REGISTRY=dynamodb)."""

    def __init__(
        self, scope: Construct, id: str, *, table_name: str = "sqsdelay-scheduled"
    ) -> None:
        super().__init__(scope, id)
        self.table_name = table_name
        self.parameters = {"TableName": table_name}  # the template's, as given
        self.template = include(self, "Template", "registry.yaml", self.parameters)
        self.table_arn: str = self.template.get_resource("Table").attr_arn
        # registry.yaml's SenderPolicy: send --id, cancel, reschedule, scheduled and the console
        self.sender_policy_arn: str = self.template.get_resource("SenderPolicy").ref


class SqsDelayQueues(Construct):  # type: ignore[misc]
    """infra/error-queue.yaml once (the error queue, and with `parking` the schedule group and
    the Scheduler role) and infra/queues.yaml for each destination: the destination and its
    `-delay.fifo` queue, their alarms on `alarm_topic`."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        destinations: Sequence[str],
        alarm_topic: sns.ITopic,
        prefix: str = "",
        error_queue_name: str = "error",
        cycle_seconds: int = 900,
        kms_key: kms.IKey | None = None,
        parking: bool = False,
        schedule_group: str = "sqsdelay",
        registry: SqsDelayRegistry | None = None,
        metrics_namespace: str = "sqsdelay",
        queue_parameters: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(scope, id)
        if not destinations:
            raise ValueError("SqsDelayQueues needs at least one destination")
        self.destinations = list(destinations)
        self.prefix, self.error_queue_name, self.cycle_seconds = (
            prefix,
            error_queue_name,
            cycle_seconds,
        )
        self.kms_key, self.parking, self.schedule_group = kms_key, parking, schedule_group
        self.registry, self.metrics_namespace = registry, metrics_namespace
        self.alarm_topic = alarm_topic
        key = _key_arn(kms_key)
        # each template's parameters as given, by destination ("" for error-queue.yaml)
        self.parameters: dict[str, dict[str, Any]] = {}
        self.parameters[""] = {
            "QueuePrefix": prefix,
            "ErrorQueueName": error_queue_name,
            "AlarmTopicArn": alarm_topic.topic_arn,
            **_kms_parameter("KmsKeyId", key),
            "Parking": "scheduler" if parking else "off",
            "ScheduleGroupName": schedule_group,
        }
        self.error_queue = include(self, "ErrorQueue", "error-queue.yaml", self.parameters[""])
        if Token.is_unresolved(key):  # always the key's ARN here
            _fixed(self.error_queue, "WithKms", True)
            _fixed(self.error_queue, "KmsByArn", True)
            _fixed(self.error_queue, "KmsByAlias", False)
        self.templates: dict[str, Any] = {}
        for name in self.destinations:
            self.parameters[name] = {
                **(queue_parameters or {}),
                "DestinationName": name,
                "QueuePrefix": prefix,
                "CycleSeconds": cycle_seconds,
                "AlarmTopicArn": alarm_topic.topic_arn,
                "MetricsNamespace": metrics_namespace,
                **_kms_parameter("KmsKeyId", key),
            }
            t = include(self, name, "queues.yaml", self.parameters[name])
            if Token.is_unresolved(key):
                _fixed(t, "WithKms", True)
            # deploy.md: error-queue.yaml first (only resources without a condition: a
            # DependsOn on one whose condition is false fails the deployment)
            t.node.add_dependency(self.error_queue.get_resource("ErrorQueue"))
            self.templates[name] = t

    def unconditional(self) -> list[Any]:
        """The queues, which exist whatever the parameters (what others may depend on)."""
        found = [self.error_queue.get_resource("ErrorQueue")]
        for t in self.templates.values():
            found += [t.get_resource("DestinationQueue"), t.get_resource("DelayQueue")]
        return found

    def _chosen(self, destinations: Iterable[str] | None) -> list[str]:
        chosen = self.destinations if destinations is None else list(destinations)
        unknown = sorted(set(chosen) - set(self.destinations))
        if unknown:
            raise ValueError(f"not destinations of {self.node.path}: {', '.join(unknown)}")
        return chosen

    def destination_queue_arn(self, destination: str) -> str:
        arn: str = self.templates[destination].get_resource("DestinationQueue").attr_arn
        return arn

    def delay_queue_arn(self, destination: str) -> str:
        arn: str = self.templates[destination].get_resource("DelayQueue").attr_arn
        return arn

    @property
    def error_queue_arn(self) -> str:
        arn: str = self.error_queue.get_resource("ErrorQueue").attr_arn
        return arn

    def _kms(self, grantee: iam.IGrantable) -> None:
        # Sending to (and receiving from) an SSE-KMS queue: SQS asks KMS on the caller's
        # behalf for a data key, and to decrypt it; only through SQS in this Region.
        if self.kms_key is None:
            return
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["kms:GenerateDataKey", "kms:Decrypt"],
            resource_arns=[self.kms_key.key_arn],
            conditions={
                "StringEquals": {"kms:ViaService": f"sqs.{Stack.of(self).region}.amazonaws.com"}
            },
        )

    def grant_send_delayed(
        self, grantee: iam.IGrantable, destinations: Iterable[str] | None = None
    ) -> iam.Grant:
        """What `Sender.send` and `send_batch` call for these destinations (all by default),
        and nothing more: GetQueueUrl and SendMessage on the destination (a delay up to the
        cycle goes there directly) and on its delay queue (longer ones); with a KMS key, its
        data keys through SQS; with the registry, PutItem and UpdateItem (the record and its
        `sent` mark) on these destinations' keys only; with parking, the schedules of the
        group and passing the Scheduler role to Scheduler (a long delay parked at send)."""
        chosen = self._chosen(destinations)
        arns = [a for d in chosen for a in (self.destination_queue_arn(d), self.delay_queue_arn(d))]
        grant = iam.Grant.add_to_principal(
            grantee=grantee, actions=list(SEND_ACTIONS), resource_arns=arns
        )
        self._kms(grantee)
        if self.registry is not None:
            iam.Grant.add_to_principal(
                grantee=grantee,
                actions=list(RECORD_ACTIONS),
                resource_arns=[self.registry.table_arn],
                # the key is "<destination>/<message id>" (core/registry.py key)
                conditions={
                    "ForAllValues:StringLike": {
                        "dynamodb:LeadingKeys": [f"{self.prefix}{d}/*" for d in chosen]
                    }
                },
            )
        if self.parking:
            stack = Stack.of(self)
            iam.Grant.add_to_principal(
                grantee=grantee,
                actions=list(PARK_ACTIONS),
                resource_arns=[
                    stack.format_arn(
                        service="scheduler",
                        resource="schedule",
                        resource_name=f"{self.schedule_group}/*",
                    )
                ],
            )
            # by its name, as the worker templates name it (error-queue.yaml's RoleName)
            role = stack.format_arn(
                service="iam",
                region="",
                resource="role",
                resource_name=f"{self.prefix}sqsdelay-scheduler-{stack.region}",
            )
            iam.Grant.add_to_principal(
                grantee=grantee,
                actions=["iam:PassRole"],
                resource_arns=[role],
                conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        return grant

    def grant_consume(
        self, grantee: iam.IGrantable, destinations: Iterable[str] | None = None
    ) -> iam.Grant:
        """What a consumer of the destinations needs (sqsdelay.consumer, Celery, Dramatiq,
        taskiq): receive, delete, change visibility and read attributes on the destination
        queues only, never their delay queues; with a KMS key, decrypt through SQS."""
        arns = [self.destination_queue_arn(d) for d in self._chosen(destinations)]
        grant = iam.Grant.add_to_principal(
            grantee=grantee, actions=list(CONSUME_ACTIONS), resource_arns=arns
        )
        self._kms(grantee)
        return grant


class SqsDelayWorker(Construct):  # type: ignore[misc]
    """The worker that moves `queues`' delay queues: infra/worker-ecs.yaml (one service for
    every destination) or infra/worker-lambda.yaml (one function per destination), with the
    queues' prefix, cycle, error queue, KMS key, parking and registry, and its alarms on
    `alarm_topic` (the queues' by default). `template_parameters` passes any other parameter
    of the template (ECS: Subnets, SecurityGroups, Cpu, Memory, MinTasks, MaxTasks...)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queues: SqsDelayQueues,
        runtime: Literal["ecs", "lambda"],
        image_uri: str,
        registry: SqsDelayRegistry | None = None,
        parking: bool | None = None,
        alarm_topic: sns.ITopic | None = None,
        template_parameters: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(scope, id)
        if runtime not in ("ecs", "lambda"):
            raise ValueError(f"runtime is 'ecs' or 'lambda', not {runtime!r}")
        registry = registry if registry is not None else queues.registry
        parking = queues.parking if parking is None else parking
        if parking and not queues.parking:
            raise ValueError(
                "the worker parks, but the queues were made without parking=True (the schedule "
                "group and the Scheduler role come with the error queue, error-queue.yaml)"
            )
        self.runtime, self.queues, self.registry, self.parking = runtime, queues, registry, parking
        topic = alarm_topic or queues.alarm_topic
        shared: dict[str, Any] = {
            **(template_parameters or {}),
            "QueuePrefix": queues.prefix,
            "ErrorQueueName": queues.error_queue_name,
            "CycleSeconds": queues.cycle_seconds,
            "ImageUri": image_uri,
            **_kms_parameter("KmsKeyArn", _key_arn(queues.kms_key)),
            "Parking": "scheduler" if parking else "off",
            "ScheduleGroupName": queues.schedule_group,
            "Registry": "dynamodb" if registry is not None else "off",
            "RegistryTableName": registry.table_name if registry else "sqsdelay-scheduled",
            "AlarmTopicArn": topic.topic_arn,
        }
        self.templates: dict[str, Any] = {}
        # each template's parameters as given: "*" the ECS service's, else by destination
        self.parameters: dict[str, dict[str, Any]] = {}
        if runtime == "ecs":
            self.parameters["*"] = {
                **shared,
                "Queues": queues.destinations,
                "MetricsNamespace": queues.metrics_namespace,
            }
            self.templates["*"] = include(self, "Service", "worker-ecs.yaml", self.parameters["*"])
        else:
            for name in queues.destinations:
                self.parameters[name] = {**shared, "DestinationName": name}
                self.templates[name] = include(
                    self, name, "worker-lambda.yaml", self.parameters[name]
                )
        for t in self.templates.values():
            if Token.is_unresolved(shared.get("KmsKeyArn", "")):
                _fixed(t, "WithKms", True)
            # deploy.md's order: the queues (and the registry's table) before the worker
            for needed in queues.unconditional():
                t.node.add_dependency(needed)
            if registry is not None:
                t.node.add_dependency(registry.template.get_resource("Table"))

    @property
    def role_arns(self) -> list[str]:
        """The worker's own role(s): the ECS task role, or each function's role."""
        name = "TaskRole" if self.runtime == "ecs" else "Role"
        return [t.get_resource(name).attr_arn for t in self.templates.values()]
