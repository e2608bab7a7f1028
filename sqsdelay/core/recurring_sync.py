"""What `schedule sync` changes (pure): a set of recurring schedules, read from a file,
against the group's schedules; only the set's own are updated or deleted (docs/schedules.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from sqsdelay.core.recurring import RecurringSchedule, check_name, managed_set
from sqsdelay.errors import InvalidSchedule


@dataclass(frozen=True)
class SyncPlan:
    create: list[dict[str, Any]] = field(default_factory=list)
    update: list[dict[str, Any]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The diff as `sync` prints it: + created, ~ updated (with the fields), - deleted."""
        out = [
            f"+ {r['Name']}  {r['ScheduleExpression']} {r['ScheduleExpressionTimezone']}"
            for r in self.create
        ]
        out += [f"~ {r['Name']}  ({', '.join(r.get('_changed', []))})" for r in self.update]
        out += [f"- {name}" for name in self.delete]
        return out


def _comparable(value: Any) -> Any:
    if isinstance(value, datetime):
        return int(value.timestamp())
    if isinstance(value, Mapping):
        return {k: _comparable(v) for k, v in value.items() if k != "_changed"}
    return value


_COMPARED: Final = (
    "Description",
    "ScheduleExpression",
    "ScheduleExpressionTimezone",
    "FlexibleTimeWindow",
    "State",
    "Target",
    "StartDate",
    "EndDate",
)


def differences(wanted: Mapping[str, Any], existing: Mapping[str, Any]) -> list[str]:
    """The fields in which a schedule differs from the request that would make it."""
    return [k for k in _COMPARED if _comparable(wanted.get(k)) != _comparable(existing.get(k))]


def plan_sync(
    wanted: Iterable[Mapping[str, Any]],
    existing: Mapping[str, Mapping[str, Any]],
    set_name: str,
) -> SyncPlan:
    """What `sync` changes: `wanted` are requests (`request(..., set_name=)`), `existing`
    every schedule of the group by name (GetSchedule answers). Only this set's schedules
    are updated or deleted; a wanted name held by another set or by hand is refused."""
    plan = SyncPlan()
    names = set()
    for r in wanted:
        name = r["Name"]
        if name in names:
            raise InvalidSchedule(f"{name!r} is in the set twice: give each schedule once")
        names.add(name)
        found = existing.get(name)
        if found is None:
            plan.create.append(dict(r))
            continue
        if refused := taken(name, r["GroupName"], found, set_name):
            raise refused
        changed = differences(r, found)
        if changed:
            plan.update.append({**r, "_changed": changed})
        else:
            plan.unchanged.append(name)
    for name, found in sorted(existing.items()):
        if name not in names and managed_set(found) == set_name:
            plan.delete.append(name)
    return plan


def read_set(data: Any, default_name: str) -> tuple[str, str | None, list[RecurringSchedule]]:
    """A sync file (YAML or JSON: `set`, `group`, `schedules: [{name, cron|rate, ...}]`) as
    its set name, group (None: the default) and checked schedules."""
    if not isinstance(data, Mapping) or not isinstance(data.get("schedules", []), list):
        raise InvalidSchedule(
            "a sync file is a mapping with a list under 'schedules': e.g. schedules: "
            "[{name: nightly, cron: '0 2 * * *', queue: orders, body: '{}'}]"
        )
    unknown = set(data) - {"set", "group", "schedules"}
    if unknown:
        raise InvalidSchedule(f"unknown keys {sorted(unknown)}: give set, group and schedules")
    set_name = check_name(str(data.get("set") or default_name), "set name")
    group = data.get("group")
    out = []
    for i, entry in enumerate(data.get("schedules") or []):
        if not isinstance(entry, Mapping):
            raise InvalidSchedule(
                f"schedules[{i}] is not a mapping of name, cron|rate, queue, body"
            )
        fields = {str(k).replace("-", "_"): v for k, v in entry.items()}
        try:
            out.append(RecurringSchedule.of(**fields))
        except InvalidSchedule as exc:
            raise InvalidSchedule(f"schedules[{i}] ({entry.get('name')!r}): {exc}") from None
        except TypeError as exc:
            raise InvalidSchedule(f"schedules[{i}]: {exc}") from None
    return set_name, (None if group is None else check_name(str(group), "group name")), out


def taken(
    name: str, group: str, found: Mapping[str, Any] | None, mine: str
) -> InvalidSchedule | None:
    """Why a schedule that exists may not be changed by the set `mine` ("": `put`): it
    belongs to another set, to `put`, or to no sqsdelay set; None when it is mine (or gone)."""
    owner = None if found is None else managed_set(found)
    if found is None or owner == mine:
        return None
    held = "no sqsdelay set" if owner is None else f"set {owner!r}" if owner else "put"
    wanted = f"set {mine!r}" if mine else "put"
    return InvalidSchedule(
        f"{name!r} exists in group {group!r} and belongs to {held}, not to {wanted}: "
        f"delete it (sqsdelay schedule delete {name}) or rename yours"
    )
