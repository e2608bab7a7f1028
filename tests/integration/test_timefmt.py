"""The console's times (console/timefmt.py): which are readable, how far off they are shown,
and a typed time that must say its zone."""

from __future__ import annotations

import pytest

from sqsdelay.console import timefmt
from sqsdelay.errors import InvalidDelay


@pytest.mark.parametrize(
    ("ms", "ok"),
    [
        (0, True),
        (1_900_000_000_000, True),
        (-(10**12), True),
        (10**20, False),
        (253_402_300_800_000, False),
        (-(10**18), False),
        (None, False),
        (True, False),
    ],
)
def test_a_time_is_readable_within_the_years_1_to_9999(ms: object, ok: bool) -> None:
    assert timefmt.readable(ms) is ok


@pytest.mark.parametrize(
    ("delta_s", "shown"),
    [
        (0, "now"),
        (0.4, "now"),
        (42, "in 42 s"),
        (3 * 3600 + 12 * 60 + 5, "in 3 h 12 min"),
        (-300, "5 min ago"),
        (2 * 86400 + 3 * 3600 + 60, "in 2 d 3 h"),
        (3600, "in 1 h"),
    ],
)
def test_relative_times(delta_s: float, shown: str) -> None:
    now = 1_800_000_000_000
    assert timefmt.relative(now + int(delta_s * 1000), now) == shown


def test_a_time_needs_a_zone() -> None:
    assert timefmt.parse_time(" 2027-01-31T09:00:00Z ", "x").isoformat() == (
        "2027-01-31T09:00:00+00:00"
    )
    assert timefmt.parse_time("2027-01-31T09:00:00+01:00", "x").utcoffset() is not None
    with pytest.raises(InvalidDelay, match="has no time zone: add Z"):
        timefmt.parse_time("2027-01-31T09:00:00", "the new time")
    with pytest.raises(InvalidDelay, match="not an ISO 8601 time"):
        timefmt.parse_time("tomorrow", "the new time")
    assert timefmt.utc(0) == "1970-01-01 00:00:00 UTC"
