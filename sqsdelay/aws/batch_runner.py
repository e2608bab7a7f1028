"""What both drivers (the ECS worker, the Lambda handler) hold to run the core step on a
received batch: its configuration and state, and the park targets of each delay queue."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqsdelay import otel
from sqsdelay.aws.queue_urls import ParkTargets, QueueResolver
from sqsdelay.core import pause
from sqsdelay.core.flows import Flow
from sqsdelay.core.outcomes import BatchEnds
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.core.received import Received
from sqsdelay.core.step import StepConfig, StepState, handle
from sqsdelay.settings import Settings


class BatchRunner:
    def __init__(
        self,
        settings: Settings,
        resolver: QueueResolver,
        *,
        delete: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = StepConfig(
            limits=settings.limits(),
            call_timeout=settings.call_timeout_seconds,
            max_bytes=settings.max_message_bytes,
            park_concurrency=settings.park_concurrency,
            delete=delete,
            registry_table=settings.registry_table_name(),
            spans=otel.enabled(settings),
        )
        self.settings = settings
        self.state = StepState()
        self.state.pauses.check_seconds = settings.pause_check_seconds
        self.state.pauses.hold_seconds = settings.pause_hold_seconds
        self.park_targets = ParkTargets(settings, resolver)
        self._reading: set[str] = set()  # tag queues whose pause tags are being read
        self._read: set[str] = set()  # tag queues whose tags were read at least once
        # The step's budget and waits are durations: a wall clock that is stepped must not
        # shorten them (the drivers give the wall time of each batch as `local_ms`).
        self.clock = clock

    def flow(
        self,
        received: list[Received],
        trio: QueueTrio,
        client: Any,
        *,
        local_ms: int,
        deadline: float,  # on `self.clock`
        account: str = "",
        outcome: BatchEnds | None = None,
    ) -> Flow[BatchEnds]:
        """The step on one batch from `trio`'s delay queue, after reading whether its
        destination is paused (at most once a period, core/pause.py) and the park target
        lookup (`client` names the region of the error queue's ARN)."""
        yield from self.refresh_pauses([pause.tag_queue(trio)])
        target = yield from self.park_targets.lookup(trio, client, account)
        outcome = outcome if outcome is not None else BatchEnds()
        try:
            return (
                yield from handle(
                    received,
                    queues=trio,
                    park_target=target,
                    config=self.config,
                    state=self.state,
                    clock=self.clock,
                    local_ms=local_ms,
                    deadline=deadline,
                    outcome=outcome,
                )
            )
        finally:  # what moved has its span, even when the flow failed half-way
            otel.record_hops(self.settings, outcome.spans)
            outcome.spans.clear()

    def refresh_pauses(self, queues: list[str]) -> Flow[list[str]]:
        """Read the pause tags of `queues` due for a read; release what is held for the
        destinations found resumed.

        A queue whose tags another batch is reading goes by the state last read (at most a
        period and that read old), rather than read them again: every batch of a busy queue
        that started while the read was out read them too (372 ListQueueTags in a burst of
        50,000 on 8 queues, where a period needs 8). A queue never read yet is read by each
        batch until one read has answered: none hands over to a destination paused when the
        worker starts."""
        pauses = self.state.pauses
        timeout = self.config.call_timeout
        asked = [q for q in queues if q not in self._reading or q not in self._read]
        mine = [q for q in asked if q not in self._reading]
        self._reading.update(mine)
        try:
            resumed = yield from pause.refresh(pauses, asked, self.clock(), timeout)
        finally:
            self._reading.difference_update(mine)
        # Only an answer counts: after a fault the state is still unknown (or old).
        self._read.update(q for q in asked if pauses.answered(q))
        return resumed
