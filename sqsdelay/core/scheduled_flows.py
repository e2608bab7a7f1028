"""Flows on what was sent and is still scheduled: cancel (one, or every message with a
tag), move its due time, and list it (the registry's records, a console page of them, the
parked messages Scheduler holds). The `Sender` and `AsyncSender` of `aws/sender.py` drive
them; what was sent is `core/send_flows.py`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypedDict

from sqsdelay.core import identity, message_tags, parked, registry, registry_pages, schedules
from sqsdelay.core.delays import DelayLike, delay_milliseconds
from sqsdelay.core.flows import Flow, gather
from sqsdelay.core.queue_lookup import QueueLookup
from sqsdelay.core.send_config import SendConfig
from sqsdelay.core.types import CancelOutcome, RescheduleOutcome
from sqsdelay.errors import (
    ConfigError,
    InvalidDelay,
    InvalidInput,
    RegistryError,
    SqsOperationError,
)
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.aws.sender")  # the name operators' log filters know


class NewDueTime(TypedDict, total=False):
    """The keyword arguments of `reschedule`: one of them."""

    delay: DelayLike | None
    at: datetime | None


class ScheduledQuery(TypedDict, total=False):
    """The keyword arguments of `scheduled` (their defaults: `scheduled_flow`'s)."""

    due_before: datetime | None
    state: registry.State | None
    limit: int


class ScheduledFlows:
    """Cancel, reschedule and list a destination's scheduled messages, by the ids `send`
    returned: in the registry (SQSDELAY_REGISTRY=dynamodb) and, when parking, in Scheduler."""

    def __init__(
        self, config: SendConfig, resolver: QueueLookup, *, clock: Callable[[], float]
    ) -> None:
        self.config = config
        self.resolver = resolver
        self._clock = clock
        self._table = config.registry_table

    def _check_findable(self, what: str, message_id: str) -> None:
        """Before a cancel or a reschedule: a valid id, and somewhere to find it."""
        identity.check_message_id(message_id)
        if self._table is None and not self.config.parking:
            raise ConfigError(
                f"{what} needs the registry (SQSDELAY_REGISTRY=dynamodb) or a parked message "
                "(SQSDELAY_PARKING=scheduler); a message in the loop without a record cannot "
                "be found"
            )

    def cancel_flow(self, queue: str, message_id: str) -> Flow[CancelOutcome]:
        """Cancel a scheduled message by the id `send` returned. With the registry:
        `cancelled` until it is handed over, then `too-late`; `unknown` without a record
        (a parked one is still found by its schedule). Without: parked messages only."""
        self._check_findable("cancel", message_id)
        trio = yield from self.resolver.destination(queue)
        outcome: CancelOutcome = "unknown"
        if self._table is not None:
            status, _ = yield from registry.cancel(
                self._table,
                trio.destination,
                message_id,
                int(self._clock() * 1000),
                self.config.call_timeout,
            )
            outcome = status
        if self.config.parking and outcome != "too-late":
            # Parked: delete the schedule too (with a record, that is tidying: the worker
            # drops a cancelled message whatever brings it back).
            name = identity.schedule_name(trio.delay, message_id)
            cycle = self.config.limits.max_native_delay_seconds
            group = self.config.schedule_group
            try:
                deleted = yield from schedules.cancel(name, group, now=self._clock(), cycle=cycle)
            except SqsOperationError as exc:
                if outcome != "cancelled":
                    raise
                log.warning("schedule.delete_failed", schedule=name, code=exc.code)
                deleted = "too-late"
            if outcome == "unknown":
                outcome = "cancelled" if deleted == "cancelled" else "unknown"
            if self._table is None and deleted == "too-late":
                outcome = "too-late"
        log.info("delay.cancel", message_id=message_id, queue=trio.delay, outcome=outcome)
        return outcome

    def cancel_tagged_flow(
        self, queue: str, tag: tuple[str, str], *, dry_run: bool = False, sample: int = 10
    ) -> Flow[message_tags.BulkCancel]:
        """Cancel every message of a destination sent with `tag` (or, `dry_run`, only count
        them and name a `sample`): each with `cancel_flow`'s conditional cancel, its outcome
        counted (`cancelled`, `too-late`, `unknown`), `park_concurrency` at a time."""
        message_tags.parse(f"{tag[0]}={tag[1]}")
        if self._table is None:
            raise ConfigError("cancel --tag needs the registry: set SQSDELAY_REGISTRY=dynamodb")
        trio = yield from self.resolver.destination(queue)
        timeout = self.config.call_timeout
        ids = yield from message_tags.matching(self._table, trio.destination, tag, timeout)
        shown = f"{tag[0]}={tag[1]}"
        found = message_tags.BulkCancel(shown, len(ids), ids[:sample], dry_run)
        log.info("delay.cancel_tagged", queue=trio.delay, tag=shown, matched=len(ids))
        if dry_run:
            return found
        step = max(1, self.config.park_concurrency)
        for start in range(0, len(ids), step):
            chunk = ids[start : start + step]
            for outcome in (yield from gather([self.cancel_flow(queue, i) for i in chunk])):
                found.count(outcome)
        log.info("delay.cancelled_tagged", queue=trio.delay, tag=shown, **found.outcomes)
        return found

    def tagged_flow(
        self, queue: str, tag: tuple[str, str], *, limit: int = 100
    ) -> Flow[tuple[int, list[registry.Record]]]:
        """How many messages of a destination carry `tag`, and the records of up to `limit`
        of them, soonest first (the console's tag filter)."""
        message_tags.parse(f"{tag[0]}={tag[1]}")
        if self._table is None:
            raise ConfigError("tags need the registry: set SQSDELAY_REGISTRY=dynamodb")
        trio = yield from self.resolver.destination(queue)
        timeout = self.config.call_timeout
        ids = yield from message_tags.matching(self._table, trio.destination, tag, timeout)
        found = yield from registry.read(self._table, trio.destination, ids[:limit], timeout)
        if found.fault is not None:
            raise RegistryError("BatchGetItem", self._table, found.fault.code, found.fault.detail)
        return len(ids), sorted(found.records.values(), key=lambda r: (r.due_ms, r.message_id))

    def reschedule_flow(
        self,
        queue: str,
        message_id: str,
        *,
        delay: DelayLike | None = None,
        at: datetime | None = None,
    ) -> Flow[tuple[RescheduleOutcome, int]]:
        """Move the due time of a scheduled message (a delay from now, or a time): the
        outcome and the new due time (epoch ms). With the registry, the worker follows the
        record at the message's next hop; a parked message's schedule is moved as well."""
        self._check_findable("reschedule", message_id)
        now = self._clock()
        millis = delay_milliseconds(delay, deliver_at=at, now=now)
        if at is not None and at.timestamp() <= now:
            raise InvalidDelay(f"--at {at.isoformat()} is in the past: give a later time")
        if millis > self.config.limits.max_delay_seconds * 1000:
            raise InvalidDelay(
                f"the new due time is {millis / 1000:.0f} s away, beyond the maximum delay of "
                f"{self.config.limits.max_delay_seconds} s (SQSDELAY_MAX_DELAY_SECONDS)"
            )
        due_ms = int(now * 1000) + millis
        trio = yield from self.resolver.destination(queue)
        outcome: RescheduleOutcome = "rescheduled"
        if self._table is not None:
            status, _ = yield from registry.reschedule(
                self._table,
                trio.destination,
                message_id,
                due_ms,
                int(now * 1000),
                self.config.call_timeout,
            )
            if status != "done":
                outcome = "unknown" if status == "unknown" else "too-late"
        if self.config.parking and outcome == "rescheduled":
            name = identity.schedule_name(trio.delay, message_id)
            moved = yield from schedules.move(
                name,
                self.config.schedule_group,
                message_id,
                due_ms=due_ms,
                now=now,
                cycle=self.config.limits.max_native_delay_seconds,
            )
            if self._table is None and moved != "rescheduled":
                outcome = "too-late"
        log.info("delay.rescheduled", message_id=message_id, queue=trio.delay, outcome=outcome)
        return outcome, due_ms

    def scheduled_flow(
        self,
        queue: str,
        *,
        due_before: datetime | None = None,
        state: registry.State | None = "scheduled",
        limit: int = 100,
    ) -> Flow[list[registry.Record]]:
        """The registry's records of a destination, soonest first."""
        if self._table is None:
            raise ConfigError("listing needs the registry: set SQSDELAY_REGISTRY=dynamodb")
        if limit < 1:
            raise InvalidInput(f"--limit {limit}: give 1 or more")
        if due_before is not None and due_before.tzinfo is None:
            raise InvalidDelay("--due-before needs a time zone, e.g. 2027-01-31T09:00:00Z")
        trio = yield from self.resolver.destination(queue)
        before = int(due_before.timestamp() * 1000) if due_before is not None else None
        return (
            yield from registry.listed(
                self._table,
                trio.destination,
                due_before_ms=before,
                state=state,
                limit=limit,
                timeout=self.config.call_timeout,
            )
        )

    def scheduled_page_flow(
        self, query: registry_pages.PageQuery, start: dict[str, Any] | None = None
    ) -> Flow[registry_pages.Page]:
        """One page of a destination's records (the console's Scheduled page), from `start`,
        the key the previous page returned."""
        if self._table is None:
            raise ConfigError("listing needs the registry: set SQSDELAY_REGISTRY=dynamodb")
        trio = yield from self.resolver.destination(query.destination)
        # the registry keys records by the destination's full (prefixed) name
        query = dataclasses.replace(query, destination=trio.destination)
        if start is not None and not registry_pages.is_start_key(start, trio.destination):
            raise InvalidInput("the continuation key is not one of this destination's")
        timeout = self.config.call_timeout
        return (yield from registry_pages.page(self._table, query, start, timeout))

    def parked_flow(self, queue: str, *, scan: int = 200) -> Flow[parked.ParkedList]:
        """A destination's parked messages among the first `scan` schedules of the group
        (the console's Scheduled page without the registry)."""
        if not self.config.parking:
            raise ConfigError("listing parked messages needs SQSDELAY_PARKING=scheduler")
        trio = yield from self.resolver.destination(queue)
        return (
            yield from parked.listed(
                self.config.schedule_group,
                trio.delay,
                scan=scan,
                timeout=self.config.call_timeout,
            )
        )
