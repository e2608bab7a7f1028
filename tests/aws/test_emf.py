"""The EMF lines a flush writes, checked against the specification (tests/support/emf.py)."""

from __future__ import annotations

import time

import pytest

from sqsdelay.aws.emf import EmfWriter
from sqsdelay.core.metrics import Tally
from sqsdelay.settings import Settings
from tests.support import emf

NOW = round(time.time()) + 0.5


def flush(tally: Tally, offset: int | None = 7, **settings: str) -> list[str]:
    out: list[str] = []
    writer = EmfWriter(Settings(**settings), write=out.append, clock=lambda: NOW)
    writer.flush(tally, offset)
    return "".join(out).splitlines()


def test_a_flush_splits_lateness_into_objects_of_at_most_100_values() -> None:
    tally = Tally()
    for i in range(250):
        tally.handed_over("orders", i)
    tally.count("orders", "HandedOver", 250)
    tally.count("billing", "Held", 3)
    tally.calls[("sqs", "SendMessageBatch")] += 25
    tally.throttled[("sqs", "SendMessageBatch")] += 2
    tally.calls[("scheduler", "CreateSchedule")] += 4
    objects = emf.parse(flush(tally))
    assert [len(o.get("HandOverLateness", [])) for o in objects if "Destination" in o] == [
        0,  # billing
        100,
        100,
        50,
    ]
    assert all(o["_aws"]["Timestamp"] == int(NOW * 1000) for o in objects)
    assert all(o["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "sqsdelay" for o in objects)
    orders = emf.values(objects, Destination="orders")
    assert sorted(orders["HandOverLateness"]) == list(range(250))
    assert orders["HandedOver"] == [250] and emf.values(objects, Destination="billing") == {
        "Held": [3]
    }
    # The totals the alarms watch: the same metrics without a dimension.
    totals = emf.values(objects)
    assert len(totals["HandOverLateness"]) == 250 and totals["Held"] == [3]
    assert totals["ClockOffset"] == [7]
    sends = emf.values(objects, Service="sqs", Api="SendMessageBatch")
    assert sends == {"SqsRequests": [25], "SqsThrottled": [2]}
    assert emf.values(objects, Service="scheduler", Api="CreateSchedule") == {
        "SchedulerRequests": [4]
    }
    assert emf.units(objects)["HandOverLateness"] == "Milliseconds"
    assert not tally  # what was flushed is not flushed again


def test_no_service_dimension_even_when_powertools_is_told_a_service_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "payments")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "other")
    tally = Tally()
    tally.count("orders", "Requeued")
    [obj, _offset] = emf.parse(flush(tally, metrics_namespace="acme/delays"))
    assert "service" not in obj
    assert obj["_aws"]["CloudWatchMetrics"][0] == {
        "Namespace": "acme/delays",
        "Dimensions": [["Destination"], []],
        "Metrics": [{"Name": "Requeued", "Unit": "Count"}],
    }


def test_metrics_off_writes_nothing_and_a_quiet_period_only_the_offset() -> None:
    tally = Tally()
    tally.count("orders", "Requeued")
    assert flush(tally, metrics="off") == []
    assert not tally  # counted, then dropped: switching metrics on later starts afresh
    assert [list(emf.values(emf.parse([line]))) for line in flush(Tally())] == [["ClockOffset"]]
    assert flush(Tally(), offset=None) == []


def test_a_flush_that_fails_is_dropped_and_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> list[dict[str, object]]:
        raise ValueError("a bug of ours")

    monkeypatch.setattr("sqsdelay.aws.emf.objects", broken)
    tally = Tally()
    tally.count("orders", "Requeued")
    assert flush(tally) == []  # a worker batch or a Lambda invocation never sees it
    assert not tally
