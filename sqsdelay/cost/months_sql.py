"""UTC calendar months as integer arithmetic in Spark SQL text (pure).

The job spreads every message over the calendar months of its delay. Spark's own date
functions (`trunc(ts, 'month')`, `add_months`, a cast of a date to a timestamp,
`date_format(m, 'yyyy-MM')`) go through `java.time` and a `ZoneId` on every row, and the
month as a string key is hashed and compared as bytes: a profile of a warm 2M-row
aggregation had a third of its samples there. Here a month is an integer, the months since
0000-01 (`year * 12 + month - 1`), found from the epoch microseconds with integer
operations only (Howard Hinnant's `civil_from_days` and `days_from_civil`,
https://howardhinnant.github.io/date_algorithms.html), and turned into `yyyy-MM` once per
group. The arithmetic is UTC's, as the report's session is (`session.py`).

Spark's `div` truncates towards zero and `%` keeps the dividend's sign: every division
here is of a non-negative number, for any time Spark holds (years -290307 to 294247),
because the days are counted from a March 1,600 years before year 0.
"""

from __future__ import annotations

MICROS_PER_DAY = 86_400_000_000
DAYS_PER_ERA = 146_097  # 400 Gregorian years
ERAS_BACK = 800  # before Spark's oldest time: every count below is non-negative
# Days from 1 March, ERAS_BACK eras before year 0, to 1970-01-01: the algorithms count from
# a March, when a leap day is the year's last.
EPOCH_SHIFT = 719_468 + ERAS_BACK * DAYS_PER_ERA
MONTHS_BACK = ERAS_BACK * 400 * 12


def month_layers(micros: str, name: str) -> list[str]:
    """The month (months since 0000-01) of the UTC day holding `micros`, a BIGINT of epoch
    microseconds, as select-list items layer by layer, the last one named `name`: each
    layer uses only the columns of the ones before it (`nested`). Written as one expression
    the intermediates would appear many times over (35 `pmod`s), and Spark computed each
    occurrence: six times slower than its own date functions. Spark (3.3 on) keeps a
    subquery's costly column that its parent uses twice rather than inlining it: that is
    what the layers rely on. NULL stays NULL."""
    era, doe = f"{name}_era", f"{name}_doe"
    z = f"(({micros} - pmod({micros}, {MICROS_PER_DAY})) div {MICROS_PER_DAY} + {EPOCH_SHIFT})"
    yoe = f"(({doe} - {doe} div 1460 + {doe} div 36524 - {doe} div 146096) div 365)"
    doy = f"({doe} - (365 * {yoe} + {yoe} div 4 - {yoe} div 100))"  # from 1 March
    return [
        # z: days since the first March, floored (pmod: also before 1970); its era of 400
        # years and its day in the era, [0, 146096]
        f"{z} div {DAYS_PER_ERA} AS {era}, pmod({z}, {DAYS_PER_ERA}) AS {doe}",
        # year * 12 + month - 1, with January and February counted in the next year; the
        # month from March: (5 * doy + 2) div 153, 0 = March ... 11 = February
        f"({yoe} + {era} * 400) * 12 + (5 * {doy} + 2) div 153 + 2 - {MONTHS_BACK} AS {name}",
    ]


def nested(source: str, layers: list[str]) -> str:
    """`source` (a query) with each layer's select-list items added, one subquery a layer."""
    query = source
    for items in layers:
        query = f"SELECT *, {items} FROM ({query})"  # noqa: S608 (our names)
    return query


def month_start_micros(month: str) -> str:
    """The epoch microseconds of the first instant (UTC) of `month` (months since
    0000-01)."""
    t = f"({month} - 2 + {MONTHS_BACK})"  # months since the first March
    era = f"(({t} div 12) div 400)"
    yoe = f"({t} div 12 - {era} * 400)"
    doy = f"((153 * ({t} % 12) + 2) div 5)"  # the month's first day, from 1 March
    doe = f"({yoe} * 365 + {yoe} div 4 - {yoe} div 100 + {doy})"
    return f"(({era} * {DAYS_PER_ERA} + {doe} - {EPOCH_SHIFT}) * {MICROS_PER_DAY})"


def month_text(month: str) -> str:
    """`yyyy-MM` of `month` (months since 0000-01), as `date_format(m, 'yyyy-MM')` writes
    it: padded for years 0 to 9999, Spark's own text (a sign, more digits) beyond them."""
    year = f"lpad(CAST({month} div 12 AS STRING), 4, '0')"
    number = f"lpad(CAST({month} % 12 + 1 AS STRING), 2, '0')"
    beyond = (
        f"date_format(make_date(CAST(floor({month} / 12) AS INT),"
        f" CAST(pmod({month}, 12) + 1 AS INT), 1), 'yyyy-MM')"
    )
    padded = f"concat({year}, '-', {number})"
    return f"CASE WHEN {month} BETWEEN 0 AND 119999 THEN {padded} ELSE {beyond} END"
