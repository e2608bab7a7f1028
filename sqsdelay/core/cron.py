"""EventBridge Scheduler's recurring expressions (pure): `cron(...)` and `rate(...)` checked
as Scheduler checks them, the five-field Unix form converted, and the fire times Scheduler
keeps, daylight saving time included.

The six fields are Scheduler's (Scheduler user guide, "Schedule types": minutes, hours,
day-of-month, month, day-of-week 1-7 = SUN-SAT, year 1970-2199; exactly one of the two day
fields is `?`). cronsim walks the wall clock of the schedule's zone as naive times; the
year field and `nW` are filtered here, as cronsim has neither. Scheduler's documented DST
rules are then applied to each wall time: one that does not exist (spring-forward) is
skipped, one that exists twice (fall-back) runs once, at its first instant. A rate counts
elapsed time from its start ("days" are 24 hours, whatever the clock says).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from sqsdelay.errors import InvalidSchedule

MONTHS: Final = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS: Final = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")  # Scheduler's 1-7
# name, low, high of each of Scheduler's six fields
_FIELDS: Final = (
    ("minutes", 0, 59),
    ("hours", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 1, 7),
    ("year", 1970, 2199),
)
MINUTES, HOURS, DOM, MONTH, DOW, YEAR = range(6)
_UNITS: Final = {"minute": 60, "hour": 3600, "day": 86_400}
_RATE: Final = re.compile(r"(?:rate\()?\s*(\d+)\s+(minute|hour|day)s?\s*\)?", re.IGNORECASE)
_UNIX_MACROS: Final = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
# cronsim is given the wall clock from here on; a walk stops after this many candidates that
# the year or W filters drop (an expression that never fires again ends, it does not spin).
_MAX_DROPPED: Final = 200_000

_EXAMPLES = (
    "e.g. cron(0 9 ? * MON-FRI *), the Unix form 0 9 * * MON-FRI, rate(5 minutes) or 5 minutes"
)


@dataclass(frozen=True)
class Cron:
    """A checked `cron(...)`: `fields` are Scheduler's six, normalised (upper case, `*/n`
    written `first/n`)."""

    fields: tuple[str, str, str, str, str, str]

    @property
    def expression(self) -> str:
        return "cron(" + " ".join(self.fields) + ")"


@dataclass(frozen=True)
class Rate:
    value: int
    unit: str  # minute, hour or day

    @property
    def seconds(self) -> int:
        return self.value * _UNITS[self.unit]

    @property
    def expression(self) -> str:
        return f"rate({self.value} {self.unit}{'s' if self.value != 1 else ''})"


Expression = Cron | Rate


def refuse(what: str, hint: str = _EXAMPLES) -> InvalidSchedule:
    return InvalidSchedule(f"{what}: {hint}")


def parse_rate(text: str) -> Rate:
    """`rate(5 minutes)` or `5 minutes`; `1 minutes` is written `rate(1 minute)`, as
    Scheduler wants a singular unit for one."""
    match = _RATE.fullmatch(text.strip())
    if match is None or (text.strip().startswith("rate(") != text.strip().endswith(")")):
        raise refuse(f"{text[:100]!r} is not a rate", "give rate(VALUE minutes|hours|days)")
    value = int(match[1])
    if value < 1:
        raise refuse(f"rate {text!r}: the value must be a positive whole number")
    return Rate(value, match[2].lower())


def parse_cron(text: str) -> Cron:
    """`cron(m h dom mon dow year)`, or the five-field Unix form (converted: `unix_to_cron`)."""
    stripped = text.strip()
    if stripped.startswith("cron(") and stripped.endswith(")"):
        parts = stripped[5:-1].split()
        if len(parts) != 6:
            raise refuse(
                f"{text[:100]!r} has {len(parts)} fields; Scheduler's cron has six "
                "(minutes hours day-of-month month day-of-week year)"
            )
        return _checked([p.upper() for p in parts])
    parts = _UNIX_MACROS.get(stripped.lower(), stripped).split()
    if len(parts) == 5:
        return unix_to_cron(parts)
    if len(parts) == 6:
        return _checked([p.upper() for p in parts])
    raise refuse(f"{text[:100]!r} is not a cron expression")


def parse_expression(text: str) -> Expression:
    """A `cron(...)` or `rate(...)` (each also without its brackets)."""
    stripped = text.strip()
    if stripped.startswith("rate(") or _RATE.fullmatch(stripped):
        return parse_rate(stripped)
    return parse_cron(stripped)


def zone(name: str) -> ZoneInfo:
    """An IANA time zone, e.g. Europe/Berlin (Scheduler's ScheduleExpressionTimezone)."""
    try:
        if not name or name != name.strip() or name.startswith(("/", ".")) or ".." in name:
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise refuse(
            f"unknown time zone {name[:60]!r}",
            "give an IANA name such as Europe/Berlin, America/New_York or UTC",
        ) from None


# ---- checking the six fields ----


def _number(field: int, text: str) -> int:
    name, low, high = _FIELDS[field]
    if field == MONTH and text in MONTHS:
        return MONTHS.index(text) + 1
    if field == DOW and text in DAYS:
        return DAYS.index(text) + 1
    if not text.isdigit() or not low <= int(text) <= high:
        names = " or JAN-DEC" if field == MONTH else " or SUN-SAT" if field == DOW else ""
        raise refuse(f"{name} {text!r} is not {low}-{high}{names}")
    return int(text)


def expand(field: int, text: str) -> set[int]:
    """The values a plain field (`*`, lists, ranges, steps) names, in Scheduler's numbering."""
    name, low, high = _FIELDS[field]
    values: set[int] = set()
    for term in text.split(","):
        base, slash, step_text = term.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) < 1:
                raise refuse(f"{name} {term!r}: the increment after / must be a positive number")
            step = int(step_text)
        if base == "*":
            first, last = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = _number(field, a), _number(field, b)
            if first > last:
                raise refuse(f"{name} range {base!r} runs backwards", "write it as two ranges: a,b")
        else:
            first = _number(field, base)
            last = high if slash else first
        values.update(range(first, last + 1, step))
    return values


_NTH: Final = re.compile(r"([A-Z0-9]+)#(\d)")
_LAST_OF: Final = re.compile(r"([A-Z0-9]+)L")
_NEAREST: Final = re.compile(r"(\d{1,2})W")


def _checked(fields: list[str]) -> Cron:
    dom, dow = fields[DOM], fields[DOW]
    if (dom == "?") == (dow == "?"):
        raise refuse(
            f"day-of-month {dom!r} and day-of-week {dow!r}: exactly one of them must be ?",
            "e.g. cron(0 9 * * ? *) for every day, cron(0 9 ? * MON-FRI *) for weekdays",
        )
    out: list[str] = []
    for i, text in enumerate(fields):
        name = _FIELDS[i][0]
        if text == "?":
            if i not in (DOM, DOW):
                raise refuse(f"{name} cannot be ?: only day-of-month or day-of-week can")
            out.append(text)
            continue
        if i == DOM and (text in ("L", "LW") or _NEAREST.fullmatch(text)):
            if text.endswith("W") and text != "LW":
                _number(DOM, text[:-1])
            out.append(text)
            continue
        if i == DOW and (text == "L" or _LAST_OF.fullmatch(text) or _NTH.fullmatch(text)):
            if (nth := _NTH.fullmatch(text)) is not None:
                _number(DOW, nth[1])
                if not 1 <= int(nth[2]) <= 5:
                    raise refuse(f"day-of-week {text!r}: the week after # is 1-5")
            elif text != "L":
                _number(DOW, text[:-1])
            out.append(text)
            continue
        if any(c in re.sub(r"[A-Z]{3}", "", text) for c in "LW#?"):  # not JUL, WED
            raise refuse(
                f"{name} {text!r}: L, W, # and ? stand alone in their day field",
                "e.g. L, LW, 15W (day-of-month), 6L or 2#1 (day-of-week); '3#1,6#3' is two "
                "schedules",
            )
        expand(i, text)
        # `*/n` is written `first/n`, the form Scheduler's documentation shows
        out.append(re.sub(r"(^|,)\*/", rf"\g<1>{_FIELDS[i][1]}/", text))
    cron = Cron((out[0], out[1], out[2], out[3], out[4], out[5]))
    _walker(cron)  # refuses an expression that can never fire (30 FEB)
    return cron


def unix_to_cron(parts: list[str]) -> Cron:
    """The five-field Unix form (`0 9 * * MON-FRI`; day-of-week 0-7, 0 and 7 Sunday) as
    Scheduler's six fields. Unix runs a job when EITHER restricted day field matches,
    which Scheduler cannot say: such a line is refused."""
    minute, hour, dom, month, dow = (p.upper() for p in parts)
    if any(c in re.sub(r"[A-Z]{3}", "", " ".join(parts).upper()) for c in "LW#?"):
        raise refuse(
            f"{' '.join(parts)!r} uses L, W, # or ?, which Unix cron does not have",
            "write Scheduler's form: cron(minutes hours day-of-month month day-of-week year)",
        )
    if dom != "*" and dow != "*":
        raise refuse(
            f"{' '.join(parts)!r} restricts both day-of-month and day-of-week, which Unix cron "
            "reads as either one; Scheduler cannot say that",
            "make two schedules, one per day field",
        )
    if dow == "*":
        return _checked([minute, hour, dom, month, "?", "*"])
    listed = ",".join(DAYS[d] for d in sorted(_unix_days(dow)))
    return _checked([minute, hour, "?", month, listed, "*"])


def _unix_days(text: str) -> set[int]:
    """A Unix day-of-week field's days, 0-6 from Sunday (7 is Sunday too: 5-7 is FRI-SUN)."""

    def number(part: str) -> int:
        if part in DAYS:
            return DAYS.index(part)
        if not part.isdigit() or int(part) > 7:
            raise refuse(f"Unix day-of-week {part!r} is not 0-7 or SUN-SAT")
        return int(part)

    days: set[int] = set()
    for term in text.split(","):
        base, slash, step_text = term.partition("/")
        if slash and (not step_text.isdigit() or int(step_text) < 1):
            raise refuse(f"day-of-week {term!r}: the increment after / must be a positive number")
        step = int(step_text) if slash else 1
        if base == "*":
            first, last = 0, 6
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = number(a), number(b)
            if first > last:
                raise refuse(f"day-of-week range {base!r} runs backwards", "write it as a,b")
        else:
            first = number(base)
            last = 6 if slash else first
        days.update(d % 7 for d in range(first, last + 1, step))
    return days


# ---- fire times ----


def _nearest_weekday(year: int, month: int, day: int) -> int:
    """Quartz's `nW`: the weekday nearest the day, within its month."""
    last = calendar.monthrange(year, month)[1]
    day = min(day, last)
    weekday = calendar.weekday(year, month, day)  # Monday 0
    if weekday == 5:
        return day - 1 if day > 1 else day + 2
    if weekday == 6:
        return day + 1 if day < last else day - 2
    return day


def _five(cron: Cron) -> str:
    """The wall-clock part for cronsim, in Unix numbering (day-of-week 0-6, Sunday 0)."""
    m, h, dom, month, dow, _ = cron.fields
    plain = [",".join(map(str, sorted(expand(i, f)))) for i, f in ((0, m), (1, h), (3, month))]
    if dom == "?" or _NEAREST.fullmatch(dom):
        day = "*"
    elif dom in ("L", "LW"):
        day = dom
    else:
        day = ",".join(map(str, sorted(expand(DOM, dom))))
    if dow == "?":
        week = "*"
    elif dow == "L":
        week = "6"  # the last day of the week: Saturday
    elif (last := _LAST_OF.fullmatch(dow)) is not None:
        week = f"{_number(DOW, last[1]) - 1}L"
    elif (nth := _NTH.fullmatch(dow)) is not None:
        week = f"{_number(DOW, nth[1]) - 1}#{nth[2]}"
    else:
        week = ",".join(str(d - 1) for d in sorted(expand(DOW, dow)))
    return f"{plain[0]} {plain[1]} {day} {plain[2]} {week}"


def _walker(cron: Cron) -> str:
    five = _five(cron)
    try:
        CronSim(five, datetime(2000, 1, 1))
    except CronSimError as exc:
        raise refuse(f"{cron.expression} can never fire ({exc})") from None
    return five


def wall_times(cron: Cron, after: datetime) -> Iterator[datetime]:
    """The naive wall-clock times `cron` names, strictly after the naive `after`."""
    five = _walker(cron)
    years = expand(YEAR, cron.fields[YEAR])
    nearest = _NEAREST.fullmatch(cron.fields[DOM])
    dropped = 0
    cursor = after
    while True:
        for when in CronSim(five, cursor):
            if when.year > max(years):
                return
            if when.year not in years:  # on to the next year the field names
                following = min(y for y in years if y > when.year)
                cursor = datetime(following, 1, 1) - timedelta(seconds=1)
                break
            if nearest is not None and when.day != _nearest_weekday(
                when.year, when.month, int(nearest[1])
            ):
                dropped += 1
                if dropped > _MAX_DROPPED:
                    return
                continue
            yield when
        else:
            return


def exists(wall: datetime, tz: ZoneInfo) -> bool:
    """Whether a naive wall time happens in `tz` (not skipped at a spring-forward)."""
    local = wall.replace(tzinfo=tz)
    return local.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall


def fire_times(
    expression: Expression,
    tz_name: str,
    *,
    after: datetime,
    start: datetime | None = None,
    end: datetime | None = None,
) -> Iterator[datetime]:
    """The instants (UTC) Scheduler fires at, strictly after `after`, from `start` (a
    rate's first one; without it, `after` is) to `end` inclusive. Cron: in `tz_name`'s wall
    clock, a time skipped at spring-forward does not fire, one repeated at fall-back fires
    once (its first instant)."""
    after = after.astimezone(UTC)
    if isinstance(expression, Rate):
        anchor = (start or after).astimezone(UTC)
        period = timedelta(seconds=expression.seconds)
        k = 0 if after < anchor else (after - anchor) // period + 1
        while True:
            when = anchor + k * period
            if end is not None and when > end:
                return
            yield when
            k += 1
    tz = zone(tz_name)
    begin = after if start is None or start <= after else start - timedelta(seconds=1)
    wall_after = begin.astimezone(tz).replace(tzinfo=None)
    # a repeated hour: its wall times before `begin`'s second instant were already fired
    for wall in wall_times(expression, wall_after - timedelta(hours=3)):
        if not exists(wall, tz):
            continue  # skipped at spring-forward, as Scheduler does
        when = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
        if when <= begin:
            continue
        if end is not None and when > end:
            return
        yield when


def latest_before(
    expression: Expression,
    tz_name: str,
    *,
    after: datetime,
    before: datetime,
    start: datetime | None = None,
) -> datetime | None:
    """The last fire time in (`after`, `before`], or None: the one `resume --catch-up` sends."""
    last = None
    for when in fire_times(expression, tz_name, after=after, start=start, end=before):
        last = when
    return last
