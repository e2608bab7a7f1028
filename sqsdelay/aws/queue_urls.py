"""Queue URLs looked up with a boto3 or aioboto3 client on the spot, and the lookups of
`core/queue_lookup.py` and `core/park_targets.py` built from `Settings`.

The rules (the URL cache, a missing queue's error and its install command, where a parked
message goes back to) are in core; this module adds the calls that are made here and now
(`url`, `aurl`, `find`) and reads a client's region and partition.
"""

from __future__ import annotations

import functools
from typing import Any

from sqsdelay.aws.callers import AsyncCaller, SyncCaller
from sqsdelay.core import park_targets, queue_checks, queue_trios
from sqsdelay.core.flows import Flow, adrive, drive
from sqsdelay.core.parking import ParkTarget
from sqsdelay.core.queue_checks import Problem
from sqsdelay.core.queue_lookup import QueueLookup
from sqsdelay.core.queue_trios import QueueSpec, QueueTrio
from sqsdelay.errors import QueueMissing
from sqsdelay.settings import Settings, install_command


def trio(queue: str, settings: Settings) -> QueueTrio:
    return queue_trios.trio(queue, settings.queue_prefix, settings.error_queue)


def check_queue(spec: QueueSpec, attrs: dict[str, str], settings: Settings) -> list[Problem]:
    """`core.queue_checks.check_queue` under these settings, its fix an install command."""
    fix = install_command(settings, spec.requested, options="--fix")
    return queue_checks.check_queue(spec, attrs, settings.queue_config(), fix)


class QueueResolver(QueueLookup):
    """`core.queue_lookup.QueueLookup` under these settings, with lookups made on the spot."""

    def __init__(self, settings: Settings) -> None:
        hint = functools.partial(install_command, settings)
        super().__init__(settings.queue_prefix, settings.error_queue, hint)
        self.settings = settings

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


def place(client: Any) -> park_targets.Place:
    """The partition and region of a boto3 or aioboto3 client."""
    return str(client.meta.partition), str(client.meta.region_name)


class ParkTargets:
    """`core.park_targets.ParkTargets` under these settings, for a client's queues (the
    drivers give their client, whose region and partition name the error queue's ARN)."""

    def __init__(self, settings: Settings, resolver: QueueLookup) -> None:
        self.settings = settings
        self.targets = park_targets.ParkTargets(
            settings.schedule_group, settings.send_config().park_role, resolver
        )

    def lookup(self, t: QueueTrio, client: Any, account: str = "") -> Flow[ParkTarget | None]:
        return (yield from self.targets.lookup(t, place(client), account))
