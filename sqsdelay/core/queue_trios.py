"""A destination's queues, standard or FIFO: their names by role, and the attributes each
is created with. The one type that the installer, the worker's check, the step, discovery
and the bill's queue matching derive from. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from sqsdelay.core import defaults, queue_names, quotas, wire_format
from sqsdelay.core.types import Target

Role = Literal["destination", "delay", "staging", "error"]
ERROR_QUEUE_RETENTION_SECONDS = quotas.MAX_RETENTION_SECONDS
# How a destination's own queues are named after it: (the queue's ending, what replaces it
# to give the destination's name). Discovery finds delay queues by the first two; the bill
# books a queue's lines to its destination by all three, with their roles, in Spark, where
# no Python runs.
DELAY_QUEUE_ENDINGS = (
    (wire_format.DELAY_QUEUE_SUFFIX, ""),
    (wire_format.FIFO_DELAY_QUEUE_SUFFIX, wire_format.FIFO_SUFFIX),
)
SERVING_QUEUE_ENDINGS: tuple[tuple[str, str, Role], ...] = (
    *((ending, back, "delay") for ending, back in DELAY_QUEUE_ENDINGS),
    (wire_format.STAGING_QUEUE_SUFFIX, wire_format.FIFO_SUFFIX, "staging"),
)


def handover_queue(destination: str) -> tuple[Role, str]:
    """The queue a destination's hand-overs land in, by the names alone (the cost report
    prices what the log says, it does not check names): a FIFO destination's staging queue,
    else the destination itself. Its standard requests are that queue's."""
    if queue_names.is_fifo(destination):
        return "staging", queue_names.staging_queue_of(destination)
    return "destination", destination


@dataclass(frozen=True)
class QueueConfig:
    """What a delay queue is created and checked with; `Settings.queue_config()` builds it."""

    max_native_delay_seconds: int
    delay_queue_retention_seconds: int
    kms_key_id: str | None


@dataclass(frozen=True)
class QueueSpec:
    """One queue to create or check: its role, its name, and the destination as the user
    named it (what `sqsdelay install` takes)."""

    role: Role
    name: str
    requested: str


@dataclass(frozen=True)
class QueueTrio:
    """A destination as the user names it, and the queues that serve it. A FIFO
    destination's trio also has a staging queue, drained by its own trio that `forwards`
    (every message goes on to the destination now, in its group)."""

    requested: str
    destination: str
    error: str
    forwards: bool = False

    @property
    def fifo(self) -> bool:
        return queue_names.is_fifo(self.destination)

    @property
    def delay(self) -> str:
        """The queue this trio drains: the delay queue (the staging queue when it forwards).
        Raises InvalidQueueName for a destination too long to have a delay queue."""
        if self.forwards:
            return queue_names.staging_queue_name(self.destination)
        return queue_names.delay_queue_name(self.destination)

    @property
    def staging(self) -> str | None:
        """A FIFO destination's staging queue."""
        return queue_names.staging_queue_name(self.destination) if self.fifo else None

    @property
    def stages(self) -> bool:
        """Hand-overs go to the staging queue, which takes DelaySeconds
        (docs/fifo-destinations.md); a forward goes to the destination itself."""
        return self.fifo and not self.forwards

    def forwarding(self) -> QueueTrio:
        """The trio that drains this FIFO destination's staging queue."""
        return replace(self, forwards=True)

    def of(self, target: Target) -> str:
        """The queue a decision's target names."""
        if target == "destination":
            return (
                queue_names.staging_queue_name(self.destination)
                if self.stages
                else self.destination
            )
        return {"delay": self.delay, "error": self.error}[target]

    def specs(self) -> list[QueueSpec]:
        """The queues of this destination (not the shared error queue), in creation order."""
        out = [
            QueueSpec("destination", self.destination, self.requested),
            QueueSpec("delay", queue_names.delay_queue_name(self.destination), self.requested),
        ]
        if self.staging is not None:
            out.append(QueueSpec("staging", self.staging, self.requested))
        return out


def trio(queue: str, prefix: str, error_queue: str) -> QueueTrio:
    """The queues of a destination as the user names it (without the prefix)."""
    return QueueTrio(
        requested=queue,
        destination=queue_names.destination_name(queue, prefix),
        error=queue_names.error_queue_name(error_queue, prefix),
    )


def trio_of_delay_queue(delay_queue: str, prefix: str, error_queue: str) -> QueueTrio:
    """The trio a delay queue belongs to, or that drains a staging queue (Lambda knows only
    its event source)."""
    forwards = delay_queue.endswith(wire_format.STAGING_QUEUE_SUFFIX)
    if forwards:
        destination = queue_names.destination_of_staging_queue(delay_queue)
    else:
        destination = queue_names.destination_of_delay_queue(delay_queue)
    return QueueTrio(
        requested=destination.removeprefix(prefix),
        destination=destination,
        error=queue_names.error_queue_name(error_queue, prefix),
        forwards=forwards,
    )


def specs(trios: list[QueueTrio]) -> list[QueueSpec]:
    """Every queue these destinations need, the error queue once, in creation order."""
    out = [spec for t in trios for spec in t.specs()]
    if trios:
        out.append(QueueSpec("error", trios[0].error, trios[0].requested))
    return out


def sse_attributes(config: QueueConfig) -> dict[str, str]:
    if config.kms_key_id:
        return {"KmsMasterKeyId": config.kms_key_id}
    return {"SqsManagedSseEnabled": "true"}


def expected_attributes(spec: QueueSpec, config: QueueConfig) -> dict[str, str]:
    """Attributes a queue is created with."""
    role = spec.role
    if role == "delay":
        return {
            "FifoQueue": "true",
            "DelaySeconds": str(config.max_native_delay_seconds),
            "MessageRetentionPeriod": str(config.delay_queue_retention_seconds),
            "VisibilityTimeout": str(defaults.DELAY_QUEUE_VISIBILITY_TIMEOUT_SECONDS),
            **quotas.HIGH_THROUGHPUT_ATTRIBUTES,
            **sse_attributes(config),
        }
    if role == "error":
        return {
            "MessageRetentionPeriod": str(ERROR_QUEUE_RETENTION_SECONDS),
            **sse_attributes(config),
        }
    if role == "staging":  # a queue-level delay would apply to hand-overs with 0 s left
        # The delay queue's retention: a pause holds forwards here as long as it holds the
        # delay queue's messages (SQS's default, 4 days, lost a longer pause's forwards).
        return {
            "DelaySeconds": "0",
            "MessageRetentionPeriod": str(config.delay_queue_retention_seconds),
            **sse_attributes(config),
        }
    if queue_names.is_fifo(spec.name):  # a FIFO destination: we always give deduplication ids
        return {"FifoQueue": "true", **sse_attributes(config)}
    return sse_attributes(config)
