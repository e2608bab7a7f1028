"""The EMF documents of one flush and the lines EmfWriter writes (core/emf.py), checked
against the specification (tests/support/emf.py)."""

from __future__ import annotations

import json
import time

import pytest

from sqsdelay.core.emf import MAX_VALUES, EmfWriter, objects
from sqsdelay.core.metrics import Tally
from tests.support import emf

NOW_MS = round(time.time()) * 1000 + 500  # Powertools warns of a timestamp out of range


def test_lateness_is_split_at_the_limit_and_counts_go_in_the_first_object() -> None:
    tally = Tally()
    for i in range(2 * MAX_VALUES + 1):
        tally.handed_over("orders", i)
    tally.count("orders", "HandedOver", 2 * MAX_VALUES + 1)
    found = list(objects(tally, "sqsdelay", NOW_MS, None))
    assert [len(o.get("HandOverLateness", [])) for o in found] == [MAX_VALUES, MAX_VALUES, 1]
    assert ["HandedOver" in o for o in found] == [True, False, False]
    assert all(o["_aws"]["Timestamp"] == NOW_MS for o in found)
    lines = [json.dumps(o) for o in found]  # what the specification check reads
    orders = emf.values(emf.parse(lines), Destination="orders")
    assert sorted(orders["HandOverLateness"]) == list(range(2 * MAX_VALUES + 1))


def test_a_quiet_period_is_nothing_but_the_offset_and_the_backlog() -> None:
    assert list(objects(Tally(), "sqsdelay", NOW_MS, None)) == []
    [offset, backlog] = objects(Tally(), "ns", NOW_MS, 12, backlog=(0, 0))
    assert offset["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[]]
    assert offset["ClockOffset"] == [12.0]
    # written even at zero: scaling in needs the zeros
    assert (backlog["BacklogVisible"], backlog["BacklogDue"]) == ([0.0], [0.0])


def test_calls_without_a_metric_of_their_service_are_left_out() -> None:
    tally = Tally()
    tally.calls[("sqs", "ReceiveMessage")] += 3
    tally.calls[("nosuchservice", "Call")] += 9
    [sqs] = objects(tally, "sqsdelay", NOW_MS, None)
    assert (sqs["Service"], sqs["Api"]) == ("sqs", "ReceiveMessage")
    assert sqs["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Service", "Api"], []]


# -- the writer ---------------------------------------------------------------------------

NOW = round(time.time()) + 0.5


def flush(
    tally: Tally, offset: int | None = 7, *, namespace: str = "sqsdelay", enabled: bool = True
) -> list[str]:
    """The lines an EmfWriter writes for one flush (SQSDELAY_METRICS=emf: `enabled`)."""
    out: list[str] = []
    writer = EmfWriter(namespace, enabled=enabled, write=out.append, clock=lambda: NOW)
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
    found = emf.parse(flush(tally))
    assert [len(o.get("HandOverLateness", [])) for o in found if "Destination" in o] == [
        0,  # billing
        100,
        100,
        50,
    ]
    assert all(o["_aws"]["Timestamp"] == int(NOW * 1000) for o in found)
    assert all(o["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "sqsdelay" for o in found)
    orders = emf.values(found, Destination="orders")
    assert sorted(orders["HandOverLateness"]) == list(range(250))
    assert orders["HandedOver"] == [250] and emf.values(found, Destination="billing") == {
        "Held": [3]
    }
    # The totals the alarms watch: the same metrics without a dimension.
    totals = emf.values(found)
    assert len(totals["HandOverLateness"]) == 250 and totals["Held"] == [3]
    assert totals["ClockOffset"] == [7]
    sends = emf.values(found, Service="sqs", Api="SendMessageBatch")
    assert sends == {"SqsRequests": [25], "SqsThrottled": [2]}
    assert emf.values(found, Service="scheduler", Api="CreateSchedule") == {
        "SchedulerRequests": [4]
    }
    assert emf.units(found)["HandOverLateness"] == "Milliseconds"
    assert not tally  # what was flushed is not flushed again


def test_no_service_dimension_even_when_powertools_is_told_a_service_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "payments")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "other")
    tally = Tally()
    tally.count("orders", "Requeued")
    [obj, _offset] = emf.parse(flush(tally, namespace="acme/delays"))
    assert "service" not in obj
    assert obj["_aws"]["CloudWatchMetrics"][0] == {
        "Namespace": "acme/delays",
        "Dimensions": [["Destination"], []],
        "Metrics": [{"Name": "Requeued", "Unit": "Count"}],
    }


def test_metrics_off_writes_nothing_and_a_quiet_period_only_the_offset() -> None:
    tally = Tally()
    tally.count("orders", "Requeued")
    assert flush(tally, enabled=False) == []
    assert not tally  # counted, then dropped: switching metrics on later starts afresh
    assert [list(emf.values(emf.parse([line]))) for line in flush(Tally())] == [["ClockOffset"]]
    assert flush(Tally(), offset=None) == []


def test_a_flush_that_fails_is_dropped_and_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> list[dict[str, object]]:
        raise ValueError("a bug of ours")

    monkeypatch.setattr("sqsdelay.core.emf.objects", broken)
    tally = Tally()
    tally.count("orders", "Requeued")
    assert flush(tally) == []  # a worker batch or a Lambda invocation never sees it
    assert not tally
