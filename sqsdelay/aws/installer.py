"""Queue installers: create, check and fix a destination, its delay queue and the error queue.

The attribute rules are pure (`core/queue_trios.py`, `core/queue_checks.py`); `Installer` is the
boto3 adapter around them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore import xform_name
from botocore.exceptions import BotoCoreError, ClientError

from sqsdelay.aws.clients import (
    error_code,
    service_kwargs,
    sync_client,
    sync_service,
    translate,
)
from sqsdelay.aws.queue_urls import QueueResolver, check_queue, trio
from sqsdelay.core import message_tags, registry, tags
from sqsdelay.core.lambda_checks import visibility_problem
from sqsdelay.core.queue_checks import Problem
from sqsdelay.core.queue_trios import QueueSpec, expected_attributes, specs
from sqsdelay.errors import RegistryError
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings, install_command

log = get_logger("sqsdelay.aws.installer")


def queue_tags(spec: QueueSpec, settings: Settings) -> dict[str, str]:
    """The component by the queue's role (`tags.queue_component`). The error queue is
    shared by every destination: it names none."""
    component = tags.queue_component(spec.role)
    if spec.role == "error":
        return tags.tags(component)
    return tags.tags(component, trio(spec.requested, settings).destination)


@dataclass
class QueueReport:
    spec: QueueSpec
    url: str | None = None
    created: bool = False
    fixed: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


@dataclass
class ResourceReport:
    """A resource beside the queues: the schedule group parking needs, the registry's table."""

    name: str
    exists: bool
    created: bool = False
    fixed: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


class Installer:
    def __init__(
        self,
        settings: Settings,
        *,
        client: Any = None,
        scheduler: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        read_back_seconds: float = 10.0,
    ) -> None:
        self.settings = settings
        self._client = client or sync_client(settings)
        self._scheduler = scheduler
        self.resolver = QueueResolver(settings)
        self._sleep = sleep
        self._read_back_seconds = read_back_seconds

    def _call(self, operation: str, queue: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, operation, queue) from None

    def _attributes(self, spec: QueueSpec, url: str, expect: dict[str, str]) -> dict[str, str]:
        """Read attributes back; a new queue may briefly report old values (DelaySeconds 0),
        so poll until no problem touches an attribute just set, or the deadline passes."""
        deadline = time.monotonic() + self._read_back_seconds
        pause = 0.05
        while True:
            attrs: dict[str, str] = self._call(
                "GetQueueAttributes",
                spec.name,
                self._client.get_queue_attributes,
                QueueUrl=url,
                AttributeNames=["All"],
            )["Attributes"]
            settled = not any(
                set(p.attributes) & set(expect) for p in check_queue(spec, attrs, self.settings)
            )
            if settled or time.monotonic() >= deadline:
                return attrs
            self._sleep(pause)
            pause = min(pause * 2, 1.0)

    def run(
        self, queues: Sequence[str], *, create: bool = True, fix: bool = False, force: bool = False
    ) -> list[QueueReport]:
        reports = []
        for spec in specs([trio(q, self.settings) for q in queues]):
            report = QueueReport(spec, url=self.resolver.find(self._client, spec.name))
            expected = expected_attributes(spec, self.settings.queue_config())
            if report.url is None:
                if not (create or fix):
                    report.problems.append(
                        Problem(
                            spec.name,
                            "queue does not exist",
                            install_command(self.settings, spec.requested),
                        )
                    )
                    reports.append(report)
                    continue
                report.url = str(
                    self._call(
                        "CreateQueue",
                        spec.name,
                        self._client.create_queue,
                        QueueName=spec.name,
                        Attributes=expected,
                        tags=queue_tags(spec, self.settings),
                    )["QueueUrl"]
                )
                report.created = True
                log.info("queue.created", queue=spec.name, role=spec.role)
            attrs = self._attributes(spec, report.url, expected if report.created else {})
            problems = check_queue(spec, attrs, self.settings)
            if fix:
                problems = self._fix(report, problems, force)
            report.problems = problems
            reports.append(report)
        return reports

    def _fix(self, report: QueueReport, problems: list[Problem], force: bool) -> list[Problem]:
        attempted = [p for p in problems if p.attributes and (force or not p.needs_force)]
        if not attempted:
            return problems
        assert report.url is not None
        changes = {k: v for p in attempted for k, v in p.attributes.items()}
        self._call(
            "SetQueueAttributes",
            report.spec.name,
            self._client.set_queue_attributes,
            QueueUrl=report.url,
            Attributes=changes,
        )
        log.info("queue.fixed", queue=report.spec.name, attributes=sorted(changes))
        # Re-check: a change the service did not apply stays a problem.
        after = check_queue(
            report.spec, self._attributes(report.spec, report.url, changes), self.settings
        )
        still = {k for p in after for k in p.attributes}
        report.fixed = [p.problem for p in attempted if not still & set(p.attributes)]
        return after

    def check_triggers(self, reports: Sequence[QueueReport], *, client: Any = None) -> None:
        """Add to each delay or staging queue's report the Lambda functions it triggers (its
        event source mappings) whose timeout its visibility timeout does not cover six times
        (core/lambda_checks.py): the two are set in two stacks, queues.yaml and
        worker-lambda.yaml. A caller who may not read them gets a warning."""
        lam = client or boto3.client("lambda", **service_kwargs(self.settings))
        for report in reports:
            if report.spec.role not in ("delay", "staging") or report.url is None:
                continue
            attrs = self._call(
                "GetQueueAttributes",
                report.spec.name,
                self._client.get_queue_attributes,
                QueueUrl=report.url,
                AttributeNames=["QueueArn", "VisibilityTimeout"],
            )["Attributes"]
            try:
                mappings = lam.list_event_source_mappings(EventSourceArn=attrs["QueueArn"])
                for mapping in mappings["EventSourceMappings"]:
                    function = lam.get_function_configuration(FunctionName=mapping["FunctionArn"])
                    problem = visibility_problem(
                        function["FunctionName"],
                        int(function["Timeout"]),
                        report.spec.name,
                        int(attrs["VisibilityTimeout"]),
                    )
                    if problem is not None:
                        report.problems.append(problem)
            except (ClientError, BotoCoreError) as exc:
                report.problems.append(
                    Problem(
                        report.spec.name,
                        f"cannot read the Lambda functions it triggers ({error_code(exc)}), so "
                        "its visibility timeout is not checked against their timeouts",
                        "allow lambda:ListEventSourceMappings and "
                        "lambda:GetFunctionConfiguration to whoever runs the check",
                        warning=True,
                    )
                )

    def schedule_group(self, queues: Sequence[str], *, create: bool = True) -> ResourceReport:
        """Create (or with create=False, check) the schedule group parking uses."""
        name = self.settings.schedule_group
        scheduler = self._scheduler or sync_service(self.settings, "scheduler")
        try:
            group = scheduler.get_schedule_group(Name=name)
        except (ClientError, BotoCoreError) as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise translate(exc, "GetScheduleGroup", name) from None
            group = None
        if group is None and not create:
            fix = install_command(self.settings, *queues)
            return ResourceReport(name, False, problems=[Problem(name, "does not exist", fix)])
        if group is None:
            # Create only when missing: CreateScheduleGroup on an existing name is refused
            # by AWS, and moto would even replace the group (and its schedules).
            try:
                scheduler.create_schedule_group(Name=name, Tags=tags.tag_list("schedule-group"))
            except (ClientError, BotoCoreError) as exc:
                raise translate(exc, "CreateScheduleGroup", name) from None
            log.info("schedule_group.created", group=name)
            return ResourceReport(name, True, created=True)
        report = ResourceReport(name, True)
        if group.get("State", "ACTIVE") != "ACTIVE":
            report.problems.append(
                Problem(name, f"state is {group['State']}", "wait, or choose another group")
            )
        return report

    def schedules_left(self) -> ResourceReport:
        """With parking off: a warning when the schedule group still holds schedules (parked
        messages, which come back through it and the Scheduler role: deleting either loses
        them). A group that does not exist, or that the caller may not list, holds none it
        could lose by this install."""
        name = self.settings.schedule_group
        scheduler = self._scheduler or sync_service(self.settings, "scheduler")
        try:
            found = scheduler.list_schedules(GroupName=name, MaxResults=100)["Schedules"]
        except (ClientError, BotoCoreError) as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return ResourceReport(name, False)
            problem = Problem(
                name,
                f"cannot tell whether it holds parked messages ({error_code(exc)})",
                f"allow scheduler:ListSchedules, or run aws scheduler list-schedules "
                f"--group-name {name}",
                warning=True,
            )
            return ResourceReport(name, True, problems=[problem])
        report = ResourceReport(name, bool(found))
        if found:
            count = f"{len(found)}{'+' if len(found) >= 100 else ''}"
            report.problems.append(
                Problem(
                    name,
                    f"parking is off (SQSDELAY_PARKING) but the group holds {count} "
                    "schedule(s): parked messages, which come back through this group and "
                    "the Scheduler role; deleting either loses them",
                    f"keep the group and the Scheduler role until aws scheduler "
                    f"list-schedules --group-name {name} is empty, or set "
                    "SQSDELAY_PARKING=scheduler again",
                    warning=True,
                )
            )
        return report

    def registry_table(
        self, queues: Sequence[str], *, create: bool = True, dynamodb: Any = None
    ) -> ResourceReport:
        """Create (or with create=False, check) the registry's table: on-demand, the index by
        destination and due time, TTL, point-in-time recovery. A table that exists is
        checked and its TTL and recovery switched on when off; its keys are never changed."""
        name = self.settings.registry_table
        db = dynamodb or sync_service(self.settings, "dynamodb")
        fix = install_command(self.settings, *queues)

        def call(operation: str, **kwargs: Any) -> Any:
            try:
                return getattr(db, xform_name(operation))(**kwargs)
            except (ClientError, BotoCoreError) as exc:
                raise RegistryError(operation, name, error_code(exc), str(exc)) from None

        try:
            described = db.describe_table(TableName=name)["Table"]
        except (ClientError, BotoCoreError) as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise RegistryError("DescribeTable", name, error_code(exc), str(exc)) from None
            described = None
        report = ResourceReport(name, described is not None)
        if described is None:
            if not create:
                report.problems.append(Problem(name, "table does not exist", fix))
                return report
            call(
                "CreateTable", **registry.create_table_request(name), Tags=tags.tag_list("registry")
            )
            db.get_waiter("table_exists").wait(
                TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
            )
            report.created = report.exists = True
            log.info("registry.created", table=name)
            described = db.describe_table(TableName=name)["Table"]

        def problems_of(table: Any) -> list[str]:
            ttl = call("DescribeTimeToLive", TableName=name)
            backups = call("DescribeContinuousBackups", TableName=name)
            return registry.table_problems(table, ttl, backups)

        problems = problems_of(described)
        if create:
            if registry.TTL_OFF in problems:
                spec = {"Enabled": True, "AttributeName": registry.TTL_ATTRIBUTE}
                call("UpdateTimeToLive", TableName=name, TimeToLiveSpecification=spec)
                report.fixed.append("time to live enabled")
            if registry.RECOVERY_OFF in problems:
                spec = {"PointInTimeRecoveryEnabled": True}
                call(
                    "UpdateContinuousBackups", TableName=name, PointInTimeRecoverySpecification=spec
                )
                report.fixed.append("point-in-time recovery enabled")
            if registry.TAG_INDEX_MISSING in problems:  # a table from before tags
                call("UpdateTable", **registry.add_tag_index_request(name))
                report.fixed.append(f"index {message_tags.TAG_INDEX} added (tagged sends)")
                described = db.describe_table(TableName=name)["Table"]
        if report.fixed:
            problems = problems_of(described)
        rebuild = (
            "the keys, index or billing of a table cannot be changed in place: name a new "
            f"table with SQSDELAY_REGISTRY_TABLE and run {fix}"
        )
        switchable = (registry.TTL_OFF, registry.RECOVERY_OFF)
        report.problems = [
            Problem(name, p, f"{fix} adds it in place (untagged sends go on)", warning=True)
            if p == registry.TAG_INDEX_MISSING  # untagged sends work without it
            else Problem(name, p, fix if p in switchable else rebuild)
            for p in problems
        ]
        return report
