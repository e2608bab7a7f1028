"""Queue trios (`core/queue_trios.py`) under the settings, their URLs, and fix hints.

`QueueResolver` is the one place that looks up queue URLs (with a cache) and turns a missing
queue into an error whose hint is a command that creates it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sqsdelay.aws.callers import AsyncCaller, SyncCaller
from sqsdelay.aws.clients import MISSING_QUEUE_CODES
from sqsdelay.core import queue_checks, queue_names, queue_trios
from sqsdelay.core.flows import Call, Fault, Flow, adrive, drive
from sqsdelay.core.parking import ParkTarget
from sqsdelay.core.queue_checks import Problem
from sqsdelay.core.queue_trios import QueueSpec, QueueTrio
from sqsdelay.errors import DelayQueueMissing, InvalidQueueName, QueueMissing, SqsOperationError
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings, install_command

log = get_logger("sqsdelay.aws.queue_urls")


def trio(queue: str, settings: Settings) -> QueueTrio:
    return queue_trios.trio(queue, settings.queue_prefix, settings.error_queue)


def trio_of_delay_queue(delay_queue: str, settings: Settings) -> QueueTrio:
    return queue_trios.trio_of_delay_queue(delay_queue, settings.queue_prefix, settings.error_queue)


def check_queue(spec: QueueSpec, attrs: dict[str, str], settings: Settings) -> list[Problem]:
    """`core.queue_checks.check_queue` under these settings, its fix an install command."""
    fix = install_command(settings, spec.requested, options="--fix")
    return queue_checks.check_queue(spec, attrs, settings.queue_config(), fix)


class QueueResolver:
    """Queue URLs by name (and account), cached for the life of the process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._urls: dict[tuple[str, str], str] = {}
        self._owners: dict[str, QueueTrio] = {}
        self._trios: dict[str, QueueTrio] = {}

    def trio(self, queue: str) -> QueueTrio:
        if queue not in self._trios:
            t = self._trios[queue] = self.remember(trio(queue, self.settings))
            if t.destination != queue_names.prefixed(queue, self.settings.queue_prefix):
                # NServiceBus's naming changed it: said once, never silently.
                log.warning("queue.name_rewritten", queue=queue, destination=t.destination)
        return self._trios[queue]

    def trio_of_delay_queue(self, delay_queue: str) -> QueueTrio:
        return self.remember(trio_of_delay_queue(delay_queue, self.settings))

    def remember(self, t: QueueTrio) -> QueueTrio:
        for name in (t.destination, t.error, t.staging):
            if name is not None:
                self._owners.setdefault(name, t)
        with contextlib.suppress(InvalidQueueName):  # a long name is for direct sends only
            self._owners.setdefault(t.delay, t)
        return t

    def missing(self, operation: str, name: str) -> QueueMissing:
        """The error for a queue that does not exist, with the command that creates it."""
        owner = self._owners.get(name)
        if owner is None:
            return QueueMissing(operation, name, "queue does not exist")
        command = install_command(self.settings, owner.requested)
        with contextlib.suppress(InvalidQueueName):
            if name == replace(owner, forwards=False).delay:
                return DelayQueueMissing(operation, name, owner.requested, command)
        return QueueMissing(operation, name, f"queue does not exist; create it with: {command}")

    def failure(self, fault: Fault, operation: str, name: str) -> SqsOperationError:
        """A typed error for a failed call on a queue; a missing queue is forgotten, and its
        error says how to create it."""
        if fault.code in MISSING_QUEUE_CODES:
            self.forget(name)
            return self.missing(operation, name)
        return SqsOperationError(operation, name, fault.code, fault.detail)

    def forget(self, name: str) -> None:
        for key in [k for k in self._urls if k[0] == name]:
            del self._urls[key]

    @staticmethod
    def _request(name: str, account: str) -> Mapping[str, Any]:
        return {"QueueName": name, **({"QueueOwnerAWSAccountId": account} if account else {})}

    def lookup(self, name: str, account: str = "") -> Flow[str]:
        """The URL of a queue, asked for once; raises a typed error if it cannot be had."""
        if (name, account) not in self._urls:
            [reply] = yield [Call("sqs", "GetQueueUrl", self._request(name, account))]
            if reply.fault is not None:
                raise self.failure(reply.fault, "GetQueueUrl", name)
            self._urls[(name, account)] = str(reply.response["QueueUrl"])
        return self._urls[(name, account)]

    def url(self, client: Any, name: str, account: str = "") -> str:
        """The URL of a queue (boto3 client)."""
        return drive(self.lookup(name, account), SyncCaller({"sqs": client}))

    async def aurl(self, client: Any, name: str, account: str = "") -> str:
        """As `url`, for an aioboto3 client."""
        return await adrive(self.lookup(name, account), AsyncCaller({"sqs": client}))

    def find(self, client: Any, name: str) -> str | None:
        """The URL, or None when the queue does not exist (the installer's question)."""
        try:
            return self.url(client, name)
        except QueueMissing:
            return None


def park_target(
    settings: Settings, client: Any, delay_queue_url: str, error_queue_url: str
) -> ParkTarget:
    """Where Scheduler sends a parked message back to; its failures go to the error queue.
    The error queue's ARN is read off its URL (.../ACCOUNT/NAME) and the client's region
    and partition, which spares a GetQueueAttributes call and its IAM grant."""
    assert settings.scheduler_role_arn  # Settings refuses parking without it
    account, name = error_queue_url.rstrip("/").split("/")[-2:]
    arn = f"arn:{client.meta.partition}:sqs:{client.meta.region_name}:{account}:{name}"
    return ParkTarget(
        group=settings.schedule_group,
        role_arn=settings.scheduler_role_arn,
        delay_queue_url=delay_queue_url,
        dead_letter_arn=arn,
    )


class ParkTargets:
    """Where each delay queue's parked messages go back to, looked up once per delay queue
    (and account). None when parking is off or the queues cannot be looked up: the loop."""

    def __init__(self, settings: Settings, resolver: QueueResolver) -> None:
        self.settings = settings
        self.resolver = resolver
        self._targets: dict[tuple[str, str], ParkTarget] = {}

    def lookup(self, t: QueueTrio, client: Any, account: str = "") -> Flow[ParkTarget | None]:
        if self.settings.parking == "off" or t.forwards:  # a forward never parks
            return None
        key = (t.delay, account)
        if key not in self._targets:
            try:
                url = yield from self.resolver.lookup(t.delay, account)
                error_url = yield from self.resolver.lookup(t.error, account)
            except SqsOperationError as exc:
                log.warning("scheduler.no_target", queue=t.delay, code=exc.code)
                return None
            self._targets[key] = park_target(self.settings, client, url, error_url)
        return self._targets[key]
