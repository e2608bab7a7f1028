"""UTC calendar months as integers in Spark SQL text (pure).

The job spreads every message over the calendar months of its delay. Spark's functions of a
TIMESTAMP (`trunc(ts, 'month')`, `add_months`, a cast of a date to a timestamp,
`date_format(ts, 'yyyy-MM')`) go through `java.time` and the session's `ZoneId` on every
row, and the month as a string key is hashed and compared as bytes: a profile of a warm
2M-row aggregation had a third of its samples there. Here a month is an integer, the months
since 0000-01 (`year * 12 + month - 1`): the UTC day is integer arithmetic on the epoch
microseconds, its year and month come from Spark's functions of a DATE, which take no zone
(`LocalDate.ofEpochDay`), and `yyyy-MM` is written once per group.

Howard Hinnant's `civil_from_days` written out as SQL arithmetic was as fast per row, but
its long expressions cost every small report about 0.7 s of planning and code generation
(`CodeBlock.toString` in a profile of warm reports): the reports of the tests' event logs
are most of what the suite spends on Spark. The month's number and first instant take no
zone; its text goes through `date_format`, which casts the DATE to a TIMESTAMP at the
session zone's midnight and formats it in the same zone (the same date whatever the zone,
once per group). The report's session is UTC's (`session.py`).

At the very ends of Spark's TIMESTAMP range (its first and last month) a month's first
instant, and the first month's text, overflow a BIGINT: no event log holds such times (and
in the last month the job's `_sent + delay` overflows first).
"""

from __future__ import annotations

MICROS_PER_DAY = 86_400_000_000


def month_of(micros: str) -> str:
    """The month (months since 0000-01) of the UTC day holding `micros`, a BIGINT of epoch
    microseconds. `div` truncates towards zero: a time before 1970 that is not a day's
    first microsecond is one day earlier (and nothing here can overflow, where subtracting
    `pmod` first did in Spark's first day). NULL stays NULL."""
    floored = f"{micros} div {MICROS_PER_DAY} - CAST({micros} % {MICROS_PER_DAY} < 0 AS INT)"
    date = f"date_from_unix_date(CAST({floored} AS INT))"
    return f"(year({date}) * 12 + month({date}) - 1)"


def month_start_micros(month: str) -> str:
    """The epoch microseconds of the first instant (UTC) of `month` (months since
    0000-01)."""
    return f"(CAST(unix_date({_first_day(month)}) AS BIGINT) * {MICROS_PER_DAY})"


def month_text(month: str) -> str:
    """`yyyy-MM` of `month` (months since 0000-01), as `date_format` writes it."""
    return f"date_format({_first_day(month)}, 'yyyy-MM')"


def _first_day(month: str) -> str:
    """The DATE of the first day of `month`: `floor` and `pmod`, not `div` and `%`, which
    truncate towards zero before year 0."""
    year = f"CAST(floor(({month}) / 12) AS INT)"
    return f"make_date({year}, CAST(pmod({month}, 12) + 1 AS INT), 1)"
