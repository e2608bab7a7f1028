"""Recurring schedules on EventBridge Scheduler: put, get, list, pause, resume, delete and
sync, as flows (`core/flows.py`) driven with boto3 (`Schedules`) or aioboto3
(`AsyncSchedules`). The rules are `core/recurring.py`'s; docs/schedules.md.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from sqsdelay.aws.callers import AsyncCaller, SyncCaller
from sqsdelay.aws.clients import async_clients, async_service, sync_client, sync_service
from sqsdelay.aws.queue_urls import trio
from sqsdelay.core import parking, recurring, recurring_sync, tags
from sqsdelay.core.flows import Call, Fault, Flow, adrive, drive
from sqsdelay.core.recurring import RecurringSchedule
from sqsdelay.core.recurring_sync import SyncPlan
from sqsdelay.errors import ConfigError, ScheduleSyncError, SqsOperationError
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.schedules")
T = TypeVar("T")
LIST_PAGE = 100


def _raise(fault: Fault | None, operation: str, name: str) -> None:
    if fault is not None:
        raise SqsOperationError(operation, name, fault.code, fault.detail)


@dataclass(frozen=True)
class Summary:
    name: str
    state: str
    expression: str
    timezone: str
    set_name: str | None  # "" put by hand; None: not sqsdelay's


@dataclass
class SyncResult:
    plan: SyncPlan
    dry_run: bool
    changed: list[str] = field(default_factory=list)


class ScheduleFlows:
    """The flows, with what they need of the settings: the group, the role, the queues."""

    def __init__(self, settings: Settings, group: str | None = None) -> None:
        self.settings = settings
        self.group = recurring.check_name(group or settings.recurring_group, "group name")

    def _role(self) -> str:
        role = self.settings.scheduler_role_arn
        if not role:
            raise ConfigError(
                "a recurring schedule needs the role Scheduler sends with: set "
                "SQSDELAY_SCHEDULER_ROLE_ARN (sqs:SendMessage on the destination queues and "
                "the error queue; docs/schedules.md#permissions)"
            )
        return role

    def target(self, queue: str) -> Flow[recurring.Target]:
        """The destination's URL and the error queue's ARN (Scheduler's dead-letter queue)."""
        queues = trio(queue, self.settings)
        urls = yield [
            Call("sqs", "GetQueueUrl", {"QueueName": queues.destination}),
            Call("sqs", "GetQueueUrl", {"QueueName": queues.error}),
        ]
        for reply, name in zip(urls, (queues.destination, queues.error), strict=True):
            _raise(reply.fault, "GetQueueUrl", name)
        params = {"QueueUrl": urls[1].response["QueueUrl"], "AttributeNames": ["QueueArn"]}
        [arn] = yield [Call("sqs", "GetQueueAttributes", params)]
        _raise(arn.fault, "GetQueueAttributes", queues.error)
        return recurring.Target(
            self.group,
            self._role(),
            urls[0].response["QueueUrl"],
            arn.response["Attributes"]["QueueArn"],
        )

    def requests(
        self, schedules: Iterable[RecurringSchedule], now: float, set_name: str | None = None
    ) -> Flow[list[dict[str, Any]]]:
        """Every schedule checked (dates against `now`) before any call, then its request."""
        listed = list(schedules)
        for s in listed:
            s.check_dates(now)
        targets: dict[str, recurring.Target] = {}
        out = []
        for s in listed:
            if s.queue not in targets:
                targets[s.queue] = yield from self.target(s.queue)
            out.append(
                recurring.request(
                    s, targets[s.queue], self.settings.send_limits(), set_name=set_name
                )
            )
        return out

    def ensure_group(self) -> Flow[bool]:
        """Create the group when missing; True when created."""
        [got] = yield [Call("scheduler", "GetScheduleGroup", {"Name": self.group})]
        if got.fault is None:
            return False
        if got.fault.code != "ResourceNotFoundException":
            _raise(got.fault, "GetScheduleGroup", self.group)
        params = {"Name": self.group, "Tags": tags.tag_list("schedule-group")}
        [made] = yield [Call("scheduler", "CreateScheduleGroup", params)]
        if made.fault is not None and made.fault.code != "ConflictException":
            _raise(made.fault, "CreateScheduleGroup", self.group)
        log.info("schedule_group.created", group=self.group)
        return True

    def put(self, schedule: RecurringSchedule, now: float) -> Flow[Literal["created", "updated"]]:
        [request] = yield from self.requests([schedule], now)
        yield from self.ensure_group()
        [made] = yield [Call("scheduler", "CreateSchedule", request)]
        if made.fault is None:
            return "created"
        if made.fault.code != "ConflictException":
            _raise(made.fault, "CreateSchedule", schedule.name)
        found = yield from self.get(schedule.name)  # only what `put` made: not a set's
        if refused := recurring_sync.taken(schedule.name, self.group, found, ""):
            raise refused
        [updated] = yield [Call("scheduler", "UpdateSchedule", request)]
        _raise(updated.fault, "UpdateSchedule", schedule.name)
        return "updated"

    def get(self, name: str) -> Flow[dict[str, Any] | None]:
        [got] = yield [Call("scheduler", "GetSchedule", {"Name": name, "GroupName": self.group})]
        if got.fault is not None and got.fault.code == "ResourceNotFoundException":
            return None
        _raise(got.fault, "GetSchedule", name)
        return dict(got.response)

    def _names(self) -> Flow[list[str]]:
        names: list[str] = []
        token = None
        while True:
            params: dict[str, Any] = {"GroupName": self.group, "MaxResults": LIST_PAGE}
            if token:
                params["NextToken"] = token
            [reply] = yield [Call("scheduler", "ListSchedules", params)]
            if reply.fault is not None and reply.fault.code == "ResourceNotFoundException":
                return []  # no group yet: no schedules
            _raise(reply.fault, "ListSchedules", self.group)
            names += [s["Name"] for s in reply.response.get("Schedules", [])]
            token = reply.response.get("NextToken")
            if not token:
                return names

    def all(self) -> Flow[dict[str, dict[str, Any]]]:
        """Every schedule of the group, read in full (ListSchedules has no Description)."""
        found: dict[str, dict[str, Any]] = {}
        names = yield from self._names()
        for start in range(0, len(names), 10):
            chunk = names[start : start + 10]
            calls = [
                Call("scheduler", "GetSchedule", {"Name": n, "GroupName": self.group})
                for n in chunk
            ]
            for name, got in zip(chunk, (yield calls), strict=True):
                if got.fault is not None and got.fault.code == "ResourceNotFoundException":
                    continue  # deleted meanwhile
                _raise(got.fault, "GetSchedule", name)
                found[name] = dict(got.response)
        return found

    def list(self) -> Flow[list[Summary]]:
        found = yield from self.all()
        return [
            Summary(
                name,
                str(s.get("State", "")),
                str(s.get("ScheduleExpression", "")),
                str(s.get("ScheduleExpressionTimezone", "UTC")),
                recurring.managed_set(s),
            )
            for name, s in sorted(found.items())
            if recurring.managed_set(s) is not None
        ]

    def _existing(self, name: str) -> Flow[dict[str, Any]]:
        found = yield from self.get(name)
        if found is None or recurring.managed_set(found) is None:
            raise SqsOperationError(
                "GetSchedule",
                name,
                "ResourceNotFoundException",
                f"no recurring schedule {name!r} in group {self.group!r}: see "
                "sqsdelay schedule list",
            )
        return found

    def pause(self, name: str, now: float) -> Flow[bool]:
        """Disable; False when it was already paused."""
        found = yield from self._existing(name)
        if found.get("State") == "DISABLED":
            return False
        [reply] = yield [
            Call(
                "scheduler", "UpdateSchedule", recurring.update_of(found, now=now, State="DISABLED")
            )
        ]
        _raise(reply.fault, "UpdateSchedule", name)
        return True

    def resume(self, name: str, *, now: float, catch_up: bool = False) -> Flow[datetime | None]:
        """Enable. Occurrences missed while paused are skipped, as Scheduler skips them;
        `catch_up` sends the latest one first (returned), as its occurrence (same id)."""
        found = yield from self._existing(name)
        sent = None
        if catch_up and found.get("State") == "DISABLED":
            paused_at = found.get("LastModificationDate")
            schedule = _as_schedule(found)
            if isinstance(paused_at, datetime) and schedule is not None:
                sent = recurring_latest(schedule, found, paused_at, now)
            if sent is not None:
                text = recurring.substituted(found["Target"]["Input"], sent)
                [reply] = yield [Call("sqs", "SendMessage", parking.send_message_of(text))]
                _raise(reply.fault, "SendMessage", name)
        if found.get("State") != "ENABLED":
            [reply] = yield [
                Call(
                    "scheduler",
                    "UpdateSchedule",
                    recurring.update_of(found, now=now, State="ENABLED"),
                )
            ]
            _raise(reply.fault, "UpdateSchedule", name)
        return sent

    def delete(self, name: str) -> Flow[bool]:
        """False when there was none."""
        yield from self._existing(name)
        ident = {"Name": name, "GroupName": self.group}
        [reply] = yield [Call("scheduler", "DeleteSchedule", ident)]
        if reply.fault is not None and reply.fault.code == "ResourceNotFoundException":
            return False
        _raise(reply.fault, "DeleteSchedule", name)
        return True

    def sync(
        self, schedules: Iterable[RecurringSchedule], set_name: str, *, now: float, dry_run: bool
    ) -> Flow[SyncResult]:
        """Make the group's schedules of `set_name` exactly `schedules`: every one checked and
        planned before the first change; on a failed call, `ScheduleSyncError` lists what
        had changed."""
        wanted = yield from self.requests(schedules, now, set_name)
        existing = yield from self.all()
        plan = recurring_sync.plan_sync(wanted, existing, set_name)
        result = SyncResult(plan, dry_run)
        if dry_run:
            return result
        steps: list[tuple[str, str, Call]] = []
        for r in plan.create:
            steps.append(
                (
                    f"created {r['Name']}",
                    f"CreateSchedule {r['Name']}",
                    Call("scheduler", "CreateSchedule", r),
                )
            )
        for r in plan.update:
            body = {k: v for k, v in r.items() if k != "_changed"}
            steps.append(
                (
                    f"updated {r['Name']}",
                    f"UpdateSchedule {r['Name']}",
                    Call("scheduler", "UpdateSchedule", body),
                )
            )
        for name in plan.delete:
            ident = {"Name": name, "GroupName": self.group}
            steps.append(
                (
                    f"deleted {name}",
                    f"DeleteSchedule {name}",
                    Call("scheduler", "DeleteSchedule", ident),
                )
            )
        if steps:
            try:
                yield from self.ensure_group()
            except SqsOperationError as exc:
                raise ScheduleSyncError(
                    f"the group {self.group}", exc.code, exc.detail, []
                ) from None
        for done, what, call in steps:  # one at a time: a failure says exactly where it was
            [reply] = yield [call]
            if reply.fault is not None:
                raise ScheduleSyncError(what, reply.fault.code, reply.fault.detail, result.changed)
            result.changed.append(done)
        return result


def _as_schedule(found: Mapping[str, Any]) -> RecurringSchedule | None:
    """Enough of a GetSchedule answer to compute its fire times."""
    try:
        return RecurringSchedule.of(
            name=found["Name"],
            expression=found["ScheduleExpression"],
            timezone=found.get("ScheduleExpressionTimezone") or "UTC",
            start=found.get("StartDate"),
            end=found.get("EndDate"),
            queue="x",
            body="x",
        )
    except Exception:  # not a schedule sqsdelay can read: nothing to catch up
        return None


def recurring_latest(
    schedule: RecurringSchedule, found: Mapping[str, Any], paused_at: datetime, now: float
) -> datetime | None:
    from sqsdelay.core.cron import latest_before

    return latest_before(
        schedule.parsed,
        schedule.timezone,
        after=paused_at,
        before=datetime.fromtimestamp(now, UTC),
        start=schedule.start or found.get("CreationDate"),
    )


class Schedules:
    """Recurring schedules with boto3. `Schedules(settings)`, or `Schedules.of(sender)`
    for a sender's settings."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        group: str | None = None,
        sqs: Any = None,
        scheduler: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or Settings()
        self.flows = ScheduleFlows(self.settings, group)
        clients = {
            "sqs": sqs or sync_client(self.settings),
            "scheduler": scheduler or sync_service(self.settings, "scheduler"),
        }
        self._caller = SyncCaller(clients)
        self._clock = clock

    @classmethod
    def of(cls, sender: Any, *, group: str | None = None) -> Schedules:
        return cls(sender.settings, group=group, sqs=getattr(sender, "_client", None))

    def _run(self, flow: Flow[T]) -> T:
        return drive(flow, self._caller)

    def put(self, schedule: RecurringSchedule) -> str:
        return self._run(self.flows.put(schedule, self._clock()))

    def get(self, name: str) -> dict[str, Any] | None:
        return self._run(self.flows.get(name))

    def list(self) -> list[Summary]:
        return self._run(self.flows.list())

    def pause(self, name: str) -> bool:
        return self._run(self.flows.pause(name, self._clock()))

    def resume(self, name: str, *, catch_up: bool = False) -> datetime | None:
        return self._run(self.flows.resume(name, now=self._clock(), catch_up=catch_up))

    def delete(self, name: str) -> bool:
        return self._run(self.flows.delete(name))

    def sync(
        self, schedules: Iterable[RecurringSchedule], set_name: str, *, dry_run: bool = False
    ) -> SyncResult:
        return self._run(self.flows.sync(schedules, set_name, now=self._clock(), dry_run=dry_run))


class AsyncSchedules:
    """As `Schedules`, with aioboto3: `async with AsyncSchedules(settings) as schedules:`."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        group: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or Settings()
        self.flows = ScheduleFlows(self.settings, group)
        self._clock = clock
        self._stack = contextlib.AsyncExitStack()
        self._caller: AsyncCaller | None = None

    async def __aenter__(self) -> AsyncSchedules:
        import aioboto3

        session = aioboto3.Session()
        clients = dict(await async_clients(self.settings, session, self._stack, max_pool=10))
        if "scheduler" not in clients:  # made only with parking on
            clients["scheduler"] = await async_service(
                self.settings, session, self._stack, "scheduler"
            )
        self._caller = AsyncCaller(clients)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    async def _run(self, flow: Flow[T]) -> T:
        if self._caller is None:
            raise RuntimeError("use as `async with AsyncSchedules(...) as schedules:`")
        return await adrive(flow, self._caller)

    async def put(self, schedule: RecurringSchedule) -> str:
        return await self._run(self.flows.put(schedule, self._clock()))

    async def get(self, name: str) -> dict[str, Any] | None:
        return await self._run(self.flows.get(name))

    async def list(self) -> list[Summary]:
        return await self._run(self.flows.list())

    async def pause(self, name: str) -> bool:
        return await self._run(self.flows.pause(name, self._clock()))

    async def resume(self, name: str, *, catch_up: bool = False) -> datetime | None:
        return await self._run(self.flows.resume(name, now=self._clock(), catch_up=catch_up))

    async def delete(self, name: str) -> bool:
        return await self._run(self.flows.delete(name))

    async def sync(
        self, schedules: Iterable[RecurringSchedule], set_name: str, *, dry_run: bool = False
    ) -> SyncResult:
        return await self._run(
            self.flows.sync(schedules, set_name, now=self._clock(), dry_run=dry_run)
        )
