"""The schedulers' own declarations as recurring schedules (pure): Celery beat's crontab
fields and intervals, taskiq's `schedule` labels, a Dramatiq actor's `periodic`; their
names, rates and zones. What cannot map is refused with `InvalidSchedule` naming the entry
and what to do. The adapters that read the libraries' objects: `sqsdelay.schedule_sources`
(docs/schedules.md, "Moving off beat").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, Final

from sqsdelay.core import cron
from sqsdelay.core.recurring import check_name
from sqsdelay.errors import InvalidSchedule

_NOT_IN_NAME: Final = re.compile(r"[^0-9A-Za-z_.-]+")
_UNITS: Final = (("day", 86_400), ("hour", 3600), ("minute", 60))


def refused(source: str, entry: str, why: str) -> InvalidSchedule:
    return InvalidSchedule(f"{source} {entry!r}: {why}")


def schedule_name(source: str, entry: str) -> str:
    """A Scheduler name for an entry: its characters outside Scheduler's rule become '-'
    (`add every 30s` -> `add-every-30s`, `tasks:report` -> `tasks-report`)."""
    name = _NOT_IN_NAME.sub("-", entry).strip("-")
    if not name or len(name) > 64:
        raise refused(
            source,
            entry,
            "its name does not make a Scheduler name of 1-64 "
            "characters: rename the entry (or give the schedule a schedule_id)",
        )
    try:
        return check_name(name)
    except InvalidSchedule as exc:
        raise refused(source, entry, str(exc)) from None


def unique(source: str, names: Iterable[tuple[str, str]]) -> None:
    """Refuse two entries that make one schedule name: (entry, name) pairs."""
    seen: dict[str, str] = {}
    for entry, name in names:
        if name in seen:
            raise refused(
                source,
                entry,
                f"makes the schedule name {name!r}, as {seen[name]!r} does: rename one of them",
            )
        seen[name] = entry


def rate_of(seconds: float, source: str, entry: str) -> str:
    """An interval as Scheduler's rate: whole minutes, hours or days, at least a minute."""
    if seconds != seconds or seconds < 60 or seconds % 60:
        raise refused(
            source,
            entry,
            f"an interval of {seconds:g} s: Scheduler's rate is whole minutes "
            "(at least 1): make it a multiple of 60 s, or a cron",
        )
    for unit, size in _UNITS:
        if seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}" + ("s" if n != 1 else "")
    raise AssertionError("unreachable: seconds is a whole number of minutes")


def interval_seconds(value: Any, source: str, entry: str) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise refused(source, entry, f"{value!r} is not an interval: give seconds or a timedelta")


def _field(value: Any) -> str:
    """One of Celery's crontab fields as a Unix cron field: '*/15', 5, {1, 3}, 'mon-fri'."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, set | frozenset | list | tuple | range):
        return ",".join(str(v) for v in sorted(value))
    return str(value).replace(" ", "").upper()


def celery_cron(
    minute: Any, hour: Any, day_of_month: Any, month_of_year: Any, day_of_week: Any, entry: str
) -> str:
    """Celery's crontab(minute, hour, day_of_week, day_of_month, month_of_year) as
    Scheduler's cron. Celery runs a crontab that restricts both day fields on the days that
    match both; Scheduler takes one of them only, so that is refused."""
    fields = [_field(v) for v in (minute, hour, day_of_month, month_of_year, day_of_week)]
    if fields[2] != "*" and fields[4] != "*":
        raise refused(
            "beat entry",
            entry,
            f"crontab(day_of_month={fields[2]!r}, day_of_week="
            f"{fields[4]!r}) runs on days matching both, which Scheduler's cron cannot say: keep "
            "one of them, or leave the entry out and put it by hand (the first Monday is "
            "sqsdelay schedule put --cron 'cron(0 9 ? * 2#1 *)')",
        )
    text = " ".join(fields)
    try:
        return cron.parse_expression(text).expression
    except InvalidSchedule as exc:
        raise refused("beat entry", entry, f"crontab {text!r}: {exc}") from None


def zone_name(zone: Any, source: str, entry: str) -> str:
    """A zone as an IANA name: a ZoneInfo's key, a name, UTC, or a whole-hour fixed offset
    (timedelta, as taskiq's cron_offset takes it) as Etc/GMT-N (whose sign is inverted)."""
    if isinstance(zone, timedelta):
        hours, rest = divmod(zone.total_seconds(), 3600)
        if rest or not -12 <= hours <= 14:
            raise refused(
                source,
                entry,
                f"a fixed offset of {zone}: Scheduler takes IANA zones, which "
                "name whole-hour offsets only (Etc/GMT-2 is UTC+2): give the zone's name, "
                "e.g. Asia/Kolkata",
            )
        h = int(hours)
        name = "UTC" if h == 0 else f"Etc/GMT{-h:+d}"
    else:
        name = str(getattr(zone, "key", None) or zone)
    if name.upper() in ("UTC", "Z", "GMT", "ETC/UTC"):
        return "UTC"
    try:
        cron.zone(name)
    except InvalidSchedule as exc:
        raise refused(source, entry, f"its time zone {name!r}: {exc}") from None
    return name


def taskiq_timing(entry: dict[str, Any], source: str, where: str) -> dict[str, Any]:
    """A taskiq `schedule` label entry's timing as RecurringSchedule fields (cron or rate,
    timezone). A one-off `time` is refused: it is a delayed send, not a schedule."""
    if entry.get("time") is not None:
        raise refused(
            source,
            where,
            "a one-off time is not a recurring schedule: send it with a delay "
            "(task.kicker().with_labels(delay=...).kiq(), which sqsdelay.taskiq delays by any "
            "time) or give a cron or interval",
        )
    if entry.get("cron") is not None:
        text = str(entry["cron"])
        try:
            expression = cron.parse_expression(text).expression
        except InvalidSchedule as exc:
            raise refused(source, where, f"cron {text!r}: {exc}") from None
        offset = entry.get("cron_offset")
        zone = "UTC" if offset is None else zone_name(offset, source, where)
        return {"cron": expression, "timezone": zone}
    if entry.get("interval") is not None:
        seconds = interval_seconds(entry["interval"], source, where)
        return {"rate": rate_of(seconds, source, where)}
    raise refused(source, where, "has no cron, interval or time")
