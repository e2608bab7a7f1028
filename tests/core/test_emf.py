"""The EMF documents of one flush (core/emf.py), checked against the specification
(tests/support/emf.py): no writer, no stdout (aws/emf.py's are tests/aws/test_emf.py)."""

from __future__ import annotations

import json
import time

from sqsdelay.core.emf import MAX_VALUES, objects
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
