"""What the sender's flows are configured with (`SendConfig`), frozen: `Settings.send_config()`
builds it, as `StepConfig` is built for the worker's step, so that the flows read no
settings and no environment."""

from __future__ import annotations

from dataclasses import dataclass

from sqsdelay.core.send import SendLimits


@dataclass(frozen=True)
class SendConfig:
    limits: SendLimits  # what a send is checked and routed by (prefix, delays, wire format)
    call_timeout: float
    error_queue: str
    park_concurrency: int = 10  # parks and registry writes at once
    # Parking at send time: the threshold in force (None: parking is off), the schedule
    # group, and the role Scheduler sends with.
    park_after: int | None = None
    schedule_group: str = "sqsdelay"
    scheduler_role_arn: str | None = None
    registry_table: str | None = None  # SQSDELAY_REGISTRY=dynamodb: the table
    region: str | None = None  # the configured Region (a client's own wins)

    @property
    def parking(self) -> bool:
        return self.park_after is not None

    @property
    def park_role(self) -> str | None:
        """The role parked messages go back with; None: parking is off."""
        return self.scheduler_role_arn if self.parking else None
