"""Two features of the SQS of 2026 pass through a delay of any length, on the moto server:
a standard destination's message group (SQS fair queues: the tenant), and the X-Ray trace
header (`AWSTraceHeader`), through every requeue, park, hand-over and forward, in the worker
and the Lambda."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.aws_lambda import Handler
from sqsdelay.core import tracing, wire_format
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.cli import run
from tests.support.lambda_events import invoke_as_lambda
from tests.support.workerkit import Collector, RunningWorker

CYCLE = 2
TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
ROLE = "arn:aws:iam::123456789012:role/sqsdelay-scheduler"


@pytest.fixture
def short(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(
        max_native_delay_seconds=CYCLE, visibility_timeout_seconds=5, wait_time_seconds=1
    )


def urls_of(settings: Settings, sqs: Any, *queues: str, **clients: Any) -> dict[str, str]:
    reports = Installer(settings, client=sqs, **clients).run(list(queues))
    return {r.spec.name.removeprefix(settings.queue_prefix): str(r.url) for r in reports}


def test_a_delayed_message_reaches_a_fair_queue_in_its_tenants_group(
    short: Settings, sqs: Any, env: dict[str, str]
) -> None:
    urls = urls_of(short, sqs, "tenants")
    sender = Sender(short, client=sqs)
    started = time.time()
    sender.send("tenants", "direct", delay=1, group_id="tenant-a")
    sender.send("tenants", "looped", delay=3 * CYCLE + 0.5, group_id="tenant-b")
    sender.send("tenants", "no-tenant", delay=CYCLE + 1)
    cli = {**env, "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": str(CYCLE)}
    sent = run(
        cli, "send", "tenants", "--delay", str(CYCLE + 1), "--body", "cli", "--group-id", "c"
    )
    assert sent.returncode == 0, sent.stderr
    with RunningWorker(short, ["tenants"]):
        got = Collector(sqs, urls["tenants"]).until(4, timeout=40)
    groups = {d.body: d.system.get("MessageGroupId") for d in got}
    assert groups == {"direct": "tenant-a", "looped": "tenant-b", "no-tenant": None, "cli": "c"}
    assert all(wire_format.GROUP_ID_ATTRIBUTE not in d.attributes for d in got)
    assert next(d for d in got if d.body == "looped").at >= started + 3 * CYCLE + 0.5


def test_a_trace_header_survives_every_hop_of_the_worker(
    short: Settings, sqs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given or ambient, to a standard destination (several cycles) and to a FIFO one
    (through its delay and staging queues); a bad ambient one is left out, a bad given one is
    refused before sending."""
    urls = urls_of(short, sqs, "orders", "orders.fifo")
    sender = Sender(short, client=sqs)
    sender.send("orders", "given", delay=3 * CYCLE + 0.5, trace_header=TRACE)
    sender.send("orders.fifo", "fifo", delay=2 * CYCLE + 0.5, group_id="g", trace_header=TRACE)
    sender.send("orders.fifo", "staged", delay=1, group_id="g", trace_header=TRACE)
    ambient = TRACE.replace("Parent=53995c3f42cd8ad8", "Parent=1111111111111111")
    monkeypatch.setenv(tracing.AMBIENT, ambient)
    sender.send("orders", "ambient", delay=2 * CYCLE + 1)
    monkeypatch.setenv(tracing.AMBIENT, "not a header")
    sender.send("orders", "untraced", delay=CYCLE + 1)
    with pytest.raises(ValueError, match="X-Ray trace header"):
        sender.send("orders", "refused", delay=1, trace_header="Root=1-x y")
    with RunningWorker(short, ["orders", "orders.fifo"]):
        got = Collector(sqs, urls["orders"]).until(3, timeout=40)
        got += Collector(sqs, urls["orders.fifo"]).until(2, timeout=40)
    headers = {d.body: d.system.get(tracing.ATTRIBUTE) for d in got}
    assert headers == {
        "given": TRACE,
        "fifo": TRACE,
        "staged": TRACE,
        "ambient": ambient,
        "untraced": None,
    }


def test_a_trace_header_survives_parking_and_the_lambda(
    make_settings: Callable[..., Settings], moto_url: str, sqs: Any
) -> None:
    scheduler = boto3.client("scheduler", endpoint_url=moto_url, region_name="us-east-1")
    parked = make_settings(
        max_native_delay_seconds=CYCLE,
        wait_time_seconds=1,
        parking="scheduler",
        scheduler_role_arn=ROLE,
        park_after_seconds=6,
    )
    urls = urls_of(parked, sqs, "orders", scheduler=scheduler)
    Installer(parked, client=sqs, scheduler=scheduler).schedule_group(["orders"])
    sender = Sender(parked, client=sqs, scheduler=scheduler)
    assert sender.send("orders", "parked", delay=8, trace_header=TRACE).route == "parked"
    sender.send("orders", "lambda", delay=2 * CYCLE + 0.5, trace_header=TRACE, group_id="t")
    plain = parked.model_copy(update={"parking": "off"})  # parked by the Lambda, not at send
    Sender(plain, client=sqs).send("orders", "lambda-parked", delay=10, trace_header=TRACE)
    handler = Handler(parked, client=sqs, scheduler=scheduler)
    collector = Collector(sqs, urls["orders"])

    def round_of_lambda() -> bool:
        invoke_as_lambda(sqs, urls["orders-delay.fifo"], handler)
        collector.poll()
        return len(collector.got) >= 3

    wait_for(round_of_lambda, timeout=40, interval=0.1)
    assert {d.body: d.system.get(tracing.ATTRIBUTE) for d in collector.got} == {
        "parked": TRACE,
        "lambda": TRACE,
        "lambda-parked": TRACE,
    }
    assert next(d for d in collector.got if d.body == "lambda").system["MessageGroupId"] == "t"
