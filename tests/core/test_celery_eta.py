"""Celery's eta header, read as the Celery worker reads it, and the way each task is sent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core.celery_eta import eta_of, plan
from sqsdelay.errors import InvalidDelay

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC).timestamp()
BERLIN = ZoneInfo("Europe/Berlin")


def at(seconds: float, zone: ZoneInfo | None = None) -> str:
    moment = datetime.fromtimestamp(NOW + seconds, UTC)
    if zone is None:
        return moment.isoformat()
    return moment.astimezone(zone).replace(tzinfo=None).isoformat()  # naive wall time


def test_no_eta_is_sent_as_kombu_sends_it() -> None:
    assert plan({"id": "t"}, UTC, now=NOW, max_native=900).how == "now"
    assert plan(None, UTC, now=NOW, max_native=900).how == "now"


def test_an_eta_in_the_past_runs_at_once() -> None:
    assert plan({"eta": at(-5)}, UTC, now=NOW, max_native=900).how == "now"


def test_a_naive_eta_is_read_in_the_apps_zone() -> None:
    # 10:00 wall time in Berlin on 24 November is 09:00 UTC; read as UTC it would be 10:00.
    decided = plan({"eta": at(3600, BERLIN)}, BERLIN, now=NOW, max_native=900)
    assert decided.due == pytest.approx(NOW + 3600) and decided.how == "delayed"
    eta = eta_of({"eta": "2026-11-24T10:00:00"}, BERLIN)
    assert eta == datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


@given(st.floats(min_value=0.001, max_value=10 * 365 * 86400))
def test_the_route_follows_the_rounded_up_delay(seconds: float) -> None:
    decided = plan({"eta": at(seconds)}, UTC, now=NOW, max_native=900)
    assert decided.due == pytest.approx(NOW + seconds, abs=1e-3)
    if decided.how == "native":
        assert decided.delay_seconds <= 900 and NOW + decided.delay_seconds >= decided.due
    else:
        assert decided.how == ("delayed" if decided.delay_seconds > 900 else "now")


def test_an_eta_that_is_not_a_time_is_a_typed_error() -> None:
    with pytest.raises(InvalidDelay, match="ISO 8601"):
        plan({"eta": "tomorrow"}, UTC, now=NOW, max_native=900)


def test_an_aware_datetime_header_is_taken_as_it_is() -> None:
    eta = datetime.fromtimestamp(NOW, UTC) + timedelta(hours=2)
    assert eta_of({"eta": eta}, BERLIN) == eta
