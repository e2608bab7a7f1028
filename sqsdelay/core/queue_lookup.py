"""Queue URLs by name, looked up once (a flow's `GetQueueUrl`), and the typed error of a
failed call on a queue: a missing queue's error says which command creates it.

Every sender, worker and Lambda handler looks its queues up here; `aws/queue_urls.py`
builds one from `Settings` and adds the lookups made on the spot with a boto3 or aioboto3
client (the CLI's and the installer's).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from sqsdelay.core import queue_names, queue_trios
from sqsdelay.core.flows import Call, Fault, Flow
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.errors import DelayQueueMissing, InvalidQueueName, QueueMissing, SqsOperationError
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.aws.queue_urls")  # the name operators' log filters know

# SQS's codes for a queue that does not exist (the JSON protocol's and the query protocol's).
MISSING_QUEUE_CODES = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})


class QueueLookup:
    """Queue URLs by name (and account), cached for the life of the process, and the trios
    of the destinations named so far (whose commands a missing queue's error gives)."""

    def __init__(
        self, queue_prefix: str, error_queue: str, install_hint: Callable[[str], str]
    ) -> None:
        self.queue_prefix = queue_prefix
        self.error_queue = error_queue
        # The `sqsdelay install` command that creates a destination's queues.
        self.install_hint = install_hint
        self._urls: dict[tuple[str, str], str] = {}
        self._owners: dict[str, QueueTrio] = {}
        self._trios: dict[str, QueueTrio] = {}

    def trio(self, queue: str) -> QueueTrio:
        if queue not in self._trios:
            made = queue_trios.trio(queue, self.queue_prefix, self.error_queue)
            t = self._trios[queue] = self.remember(made)
            if t.destination != queue_names.prefixed(queue, self.queue_prefix):
                # NServiceBus's naming changed it: said once, never silently.
                log.warning("queue.name_rewritten", queue=queue, destination=t.destination)
        return self._trios[queue]

    def trio_of_delay_queue(self, delay_queue: str) -> QueueTrio:
        made = queue_trios.trio_of_delay_queue(delay_queue, self.queue_prefix, self.error_queue)
        return self.remember(made)

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
        command = self.install_hint(owner.requested)
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

    def destination(self, queue: str) -> Flow[QueueTrio]:
        """The queues of `queue`, after checking that its delay queue exists (a cancel's, a
        listing's: a typo'd destination fails with its install command)."""
        t = self.trio(queue)
        yield from self.lookup(t.delay)
        return t
