"""UTC calendar months as integer arithmetic in Spark SQL text (pure).

The job spreads every message over the calendar months of its delay. Spark's own date
functions (`trunc(ts, 'month')`, `add_months`, a cast of a date to a timestamp,
`date_format(m, 'yyyy-MM')`) go through `java.time` and a `ZoneId` on every row, and the
month as a string key is hashed and compared as bytes: a profile of a warm 2M-row
aggregation had a third of its samples there. Here a month is an integer, the months since
0000-01 (`year * 12 + month - 1`), found from the epoch microseconds with integer
operations only (Howard Hinnant's `civil_from_days` and `days_from_civil`,
https://howardhinnant.github.io/date_algorithms.html), and turned into `yyyy-MM` once per
group. UTC always: the report's months are UTC months whatever the session's time zone.
Valid from 0001-01-01 (the oldest time Spark has) on: every division is of a non-negative
number, where Spark's `div` (which truncates) is a floor.
"""

from __future__ import annotations

MICROS_PER_DAY = 86_400_000_000
# Days from 0000-03-01 to 1970-01-01: the algorithms count from a March, when a leap day
# is the year's last.
EPOCH_SHIFT = 719_468
DAYS_PER_ERA = 146_097  # 400 Gregorian years


def month_layers(micros: str, name: str) -> list[str]:
    """The month (months since 0000-01) of the UTC day holding `micros`, a BIGINT of epoch
    microseconds, as select-list items layer by layer, the last one named `name`: each
    layer uses only the columns of the ones before it (`nested`). Written as one expression
    the intermediates would appear many times over (35 `pmod`s), and Spark computed each
    occurrence: six times slower than its own date functions. NULL stays NULL."""
    p = f"_{name}"
    z = f"(({micros} - pmod({micros}, {MICROS_PER_DAY})) div {MICROS_PER_DAY} + {EPOCH_SHIFT})"
    doe = f"{p}_doe"
    yoe = f"(({doe} - {doe} div 1460 + {doe} div 36524 - {doe} div 146096) div 365)"
    doy = f"({doe} - (365 * {yoe} + {yoe} div 4 - {yoe} div 100))"  # from 1 March
    return [
        # z: days since 0000-03-01, floored (pmod: also before 1970); its era of 400 years
        # and its day in the era, [0, 146096]
        f"{z} div {DAYS_PER_ERA} AS {p}_era, pmod({z}, {DAYS_PER_ERA}) AS {doe}",
        # year * 12 + month - 1, with January and February counted in the next year; the
        # month from March: (5 * doy + 2) div 153, 0 = March ... 11 = February
        f"({yoe} + {p}_era * 400) * 12 + (5 * {doy} + 2) div 153 + 2 AS {name}",
    ]


def nested(source: str, layers: list[list[str]]) -> str:
    """`source` (a query) with each layer's select-list items added, one subquery a layer."""
    query = source
    for items in layers:
        query = f"SELECT *, {', '.join(items)} FROM ({query})"  # noqa: S608 (our names)
    return query


def month_start_micros(month: str) -> str:
    """The epoch microseconds of the first instant (UTC) of `month` (months since 0000-01,
    at least 2: March of year 0)."""
    t = f"({month} - 2)"  # months since 0000-03
    era = f"(({t} div 12) div 400)"
    yoe = f"({t} div 12 - {era} * 400)"
    doy = f"((153 * ({t} % 12) + 2) div 5)"  # the month's first day, from 1 March
    doe = f"({yoe} * 365 + {yoe} div 4 - {yoe} div 100 + {doy})"
    return f"(({era} * {DAYS_PER_ERA} + {doe} - {EPOCH_SHIFT}) * {MICROS_PER_DAY})"


def month_text(month: str) -> str:
    """`yyyy-MM` of `month` (months since 0000-01), as `date_format(m, 'yyyy-MM')` wrote it."""
    year = f"lpad(CAST({month} div 12 AS STRING), 4, '0')"
    number = f"lpad(CAST({month} % 12 + 1 AS STRING), 2, '0')"
    return f"concat({year}, '-', {number})"
