"""Debounce by key (issue 61, 2; core/debounce.py) on the emulator (moto's SQS and
DynamoDB over HTTP, its transactions) with a compressed 1 s cycle and a running worker: the
last body arrives once, at its send + debounce, never past the first send + max_wait; two
sends racing from two threads deliver exactly one."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from sqsdelay.aws.sender import Sender
from sqsdelay.settings import Settings
from tests.support.queues import install
from tests.support.workerkit import Collector, RunningWorker

TOLERANCE = 2.5  # a hop of the worker on a shared machine


@pytest.fixture
def looping(make_settings: Callable[..., Settings], prefix: str) -> Settings:
    return make_settings(
        max_native_delay_seconds=1,
        visibility_timeout_seconds=5,
        wait_time_seconds=1,
        registry="dynamodb",
        registry_table=f"{prefix}scheduled",
    )


def test_the_last_body_arrives_once_at_its_debounce_or_at_max_wait(
    looping: Settings, sqs: Any, dynamodb: Any
) -> None:
    urls = install(looping, sqs, dynamodb=dynamodb)
    sender = Sender(looping, client=sqs, dynamodb=dynamodb)
    collector = Collector(sqs, urls["orders"])
    with RunningWorker(looping, ["orders"]):
        # Without max_wait: each send moves it to its own time + 8 s. The gaps between the
        # sends are the test's input: 1 s against a window of 8 s, so that a machine that
        # stalls for seconds between two sends (a's window closed once in a fresh clone's
        # make test beside a model run, with a window of 4 s) does not change it.
        for body in ("a", "b", "c"):
            last = time.time()
            sender.send("orders", body, id="plain", debounce=8)
            time.sleep(1)
        # With max_wait 10 s: the third send would be due at +11 s, the cap holds it at +10 s.
        first = time.time()
        for body in ("x", "y", "z"):
            sender.send("orders", body, id="capped", debounce=8, max_wait=10)
            time.sleep(1.5)
        got = {d.body: d for d in collector.until(2, timeout=40)}
        collector.poll(wait=3)  # nothing else comes
    assert sorted(d.body for d in collector.got) == ["c", "z"]
    assert last + 8 - 0.1 <= got["c"].at <= last + 8 + TOLERANCE
    assert first + 10 - 0.1 <= got["z"].at <= first + 10 + TOLERANCE


def test_two_threads_racing_on_one_key_deliver_exactly_one(
    looping: Settings, sqs: Any, dynamodb: Any
) -> None:
    urls = install(looping, sqs, dynamodb=dynamodb)
    sender = Sender(looping, client=sqs, dynamodb=dynamodb)
    sender.send("orders", "first", id="raced", debounce=3)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda b: sender.send("orders", b, id="raced", debounce=3), "pqrs"))
    assert len({r.message_id for r in results}) == 4  # four generations, one after another
    collector = Collector(sqs, urls["orders"])
    with RunningWorker(looping, ["orders"]):
        collector.until(1, timeout=30)
        collector.poll(wait=3)
    [delivered] = collector.got
    by_generation = {
        int(r.message_id.rsplit("#", 1)[1]): body for r, body in zip(results, "pqrs", strict=True)
    }
    assert sorted(by_generation) == [2, 3, 4, 5]
    assert delivered.body == by_generation[5]  # the last to commit wins
