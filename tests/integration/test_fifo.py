"""FIFO destinations against the moto server: delays of any length (none, short through the
staging queue, long through the FIFO delay queue) reach `<name>.fifo` in the sender's message
group, once, never early; what cannot be forwarded goes to the error queue; install, check,
discovery and the command line as the README writes them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.core import wire_format
from sqsdelay.errors import InvalidMessage, InvalidQueueName
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.cli import run
from tests.support.logs import capture_logs, events
from tests.support.queues import install
from tests.support.workerkit import Collector, RunningWorker

CYCLE = 2


@pytest.fixture
def fifo(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(
        max_native_delay_seconds=CYCLE, visibility_timeout_seconds=3, wait_time_seconds=1
    )


def test_install_creates_and_checks_what_a_fifo_destination_needs(fifo: Settings, sqs: Any) -> None:
    p = fifo.queue_prefix
    urls = install(fifo, sqs, "orders.fifo", check=True)
    assert sorted(urls) == sorted(
        ["orders.fifo", "orders-delay-fifo.fifo", "orders-fifo-staging", "error"]
    )
    assert all(url.rsplit("/", 1)[1].startswith(p) for url in urls.values())
    kinds = {
        name: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        for name, url in urls.items()
    }
    assert kinds["orders.fifo"]["FifoQueue"] == "true"
    assert kinds["orders-delay-fifo.fifo"]["DelaySeconds"] == str(CYCLE)
    assert "FifoQueue" not in kinds["orders-fifo-staging"]  # standard: takes DelaySeconds
    tags = sqs.list_queue_tags(QueueUrl=urls["orders-fifo-staging"])["Tags"]
    assert tags == {"sqsdelay:component": "delay-queue", "sqsdelay:destination": f"{p}orders.fifo"}
    # a staging queue with a queue-level delay would hold back what is due now: found, fixed
    staging = urls["orders-fifo-staging"]
    sqs.set_queue_attributes(QueueUrl=staging, Attributes={"DelaySeconds": "5"})
    [problem] = [p for r in Installer(fifo, client=sqs).run(["orders.fifo"], create=False)
                 for p in r.problems]  # fmt: skip
    assert problem.queue == staging.rsplit("/", 1)[1] and "DelaySeconds is 5" in problem.problem
    Installer(fifo, client=sqs).run(["orders.fifo"], create=False, fix=True)
    install(fifo, sqs, "orders.fifo", check=True)


def test_delays_of_every_length_reach_the_group_once_and_never_early(
    fifo: Settings, sqs: Any
) -> None:
    p = fifo.queue_prefix
    urls = install(fifo, sqs, "orders.fifo", check=True)
    sender = Sender(fifo, client=sqs)
    sent_at = time.time()
    delays = {"now": 0, "short": 1.5, "long": CYCLE * 2 + 0.5}
    with RunningWorker(fifo, ["orders.fifo"]):
        results = {
            body: sender.send("orders.fifo", body, delay=d, group_id=f"g-{body}")
            for body, d in delays.items()
        }
        got = Collector(sqs, urls["orders.fifo"]).until(3, timeout=30)
    assert [r.queue for r in results.values()] == [
        f"{p}orders.fifo", f"{p}orders-fifo-staging", f"{p}orders-delay-fifo.fifo"
    ]  # fmt: skip
    assert sorted(d.body for d in got) == sorted(delays)
    for d in got:
        assert d.system["MessageGroupId"] == f"g-{d.body}"
        assert d.at >= sent_at + delays[d.body], f"{d.body} was early"
        assert wire_format.GROUP_ID_ATTRIBUTE not in d.attributes  # ours stays ours
    short = next(d for d in got if d.body == "short")
    ident = short.attributes[wire_format.MESSAGE_ID_ATTRIBUTE]["StringValue"]
    assert ident == results["short"].message_id


def test_a_delayed_message_joins_its_group_when_it_is_due(fifo: Settings, sqs: Any) -> None:
    urls = install(fifo, sqs, "orders.fifo", check=True)
    sender = Sender(fifo, client=sqs)
    with RunningWorker(fifo, ["orders.fifo"]):
        sender.send("orders.fifo", "first, due later", delay=CYCLE + 1, group_id="order-7")
        sender.send("orders.fifo", "second, due now", delay=0, group_id="order-7")
        got = Collector(sqs, urls["orders.fifo"]).until(2, timeout=30)
    assert [d.body for d in got] == ["second, due now", "first, due later"]


def test_a_retried_hand_over_is_delivered_once_and_a_new_send_of_its_id_again(
    fifo: Settings, sqs: Any
) -> None:
    """Two copies of one send in the staging queue (a hand-over retried after a failed
    delete): one delivery, by the deduplication id of the message id and the send's due
    time. A new send of the same id (a Celery retry) is delivered too: the emulator keeps
    SQS's five-minute window, so a key of the id alone would drop it."""
    urls = install(fifo, sqs, "orders.fifo", check=True)
    staging = urls["orders-fifo-staging"]

    def attrs(ident: str, due: int) -> dict[str, Any]:
        return {
            wire_format.GROUP_ID_ATTRIBUTE: {"DataType": "String", "StringValue": "g"},
            wire_format.MESSAGE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": ident},
            wire_format.DUE_AT_ATTRIBUTE: {"DataType": "Number", "StringValue": str(due)},
        }

    for _ in range(2):
        sqs.send_message(QueueUrl=staging, MessageBody="once", MessageAttributes=attrs("m-1", 1))
    sqs.send_message(QueueUrl=staging, MessageBody="another", MessageAttributes=attrs("m-2", 1))
    with RunningWorker(fifo, ["orders.fifo"]) as running:
        collector = Collector(sqs, urls["orders.fifo"])
        collector.until(2, timeout=30)
        collector.quiet_for(2)
        assert running.worker.stats.events["delay.forwarded"] == 3  # both copies were sent
        sqs.send_message(QueueUrl=staging, MessageBody="anew", MessageAttributes=attrs("m-1", 2))
        collector.until(3, timeout=30)
    assert sorted(d.body for d in collector.got) == ["anew", "another", "once"]


def test_what_cannot_be_forwarded_goes_to_the_error_queue_with_the_reason(
    fifo: Settings, sqs: Any
) -> None:
    p = fifo.queue_prefix
    urls = install(fifo, sqs, "orders.fifo", check=True)
    staging = urls["orders-fifo-staging"]
    bad = {"no group": {}, "bad group": {"DataType": "String", "StringValue": "has space"}}
    for body, value in bad.items():
        attrs = {wire_format.GROUP_ID_ATTRIBUTE: value} if value else {}
        sqs.send_message(QueueUrl=staging, MessageBody=body, MessageAttributes=attrs)
    with RunningWorker(fifo, ["orders.fifo"]):
        Sender(fifo, client=sqs).send("orders.fifo", "good", delay=1, group_id="g")
        errors = Collector(sqs, urls["error"]).until(2, timeout=30)
        good = Collector(sqs, urls["orders.fifo"]).until(1, timeout=30)
    assert [d.body for d in good] == ["good"]
    assert sorted(d.body for d in errors) == sorted(bad)
    for d in errors:
        failure = json.loads(d.attributes[wire_format.FAILURE_ATTRIBUTE]["StringValue"])
        assert wire_format.GROUP_ID_ATTRIBUTE in failure["reason"]
        assert failure["queue"] == f"{p}orders-fifo-staging"


def test_a_fifo_destination_without_a_group_is_refused_before_sending(
    fifo: Settings, sqs: Any
) -> None:
    install(fifo, sqs, "orders.fifo", "plain", check=True)
    sender = Sender(fifo, client=sqs)
    for delay in (0, 1, CYCLE + 1):
        with pytest.raises(InvalidMessage, match="needs a message group id"):
            sender.send("orders.fifo", "x", delay=delay)
    with pytest.raises(InvalidMessage, match="is not one"):
        sender.send("orders.fifo", "x", delay=1, group_id="g" * 129)
    with pytest.raises(InvalidMessage, match="is not one SQS takes"):  # a fair queue's
        sender.send("plain", "x", delay=1, group_id="g" * 129)
    with pytest.raises(InvalidQueueName, match="delay queue of the standard destination"):
        sender.send("plain-delay.fifo", "x", delay=1, group_id="g")
    counts = [
        sqs.get_queue_attributes(QueueUrl=u, AttributeNames=["ApproximateNumberOfMessages"])
        for u in sqs.list_queues(QueueNamePrefix=fifo.queue_prefix)["QueueUrls"]
    ]
    assert {c["Attributes"]["ApproximateNumberOfMessages"] for c in counts} == {"0"}


def test_the_command_line_and_discovery_serve_a_fifo_destination(
    fifo: Settings, sqs: Any, env: dict[str, str]
) -> None:
    p = fifo.queue_prefix
    env = {**env, "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": str(CYCLE)}
    created = run(env, "install", "orders.fifo")
    assert created.returncode == 0, created.stderr
    check = run(env, "install", "orders.fifo", "--check")
    assert check.returncode == 0, check.stderr
    refused = run(env, "send", "orders.fifo", "--delay", "5", "--body", "x")
    assert refused.returncode == 2 and "--group-id" in refused.stderr
    sent = run(env, "send", "orders.fifo", "--delay", "5", "--body", "hello", "--group-id", "g1")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["queue"] == f"{p}orders-delay-fifo.fifo"
    inspect = run(env, "inspect", "--all")
    assert inspect.returncode == 0, inspect.stderr
    assert f"{p}orders-fifo-staging" in inspect.stdout
    url = sqs.get_queue_url(QueueName=f"{p}orders.fifo")["QueueUrl"]
    with RunningWorker(fifo.model_copy(update={"discovery_interval_seconds": 1}), ["*"]):
        [got] = Collector(sqs, url).until(1, timeout=30)
    assert got.body == "hello" and got.system["MessageGroupId"] == "g1"


def test_discovery_skips_a_fifo_destination_whose_staging_queue_is_missing(
    fifo: Settings, sqs: Any
) -> None:
    """The others go on; it is said at each refresh, and drained once it is installed again."""
    p = fifo.queue_prefix
    urls = install(fifo, sqs, "orders.fifo", "plain", check=True)
    sqs.delete_queue(QueueUrl=urls["orders-fifo-staging"])
    out = capture_logs()
    sender = Sender(fifo, client=sqs)
    fleet = fifo.model_copy(update={"discovery_interval_seconds": 1})
    with RunningWorker(fleet, ["*"]):
        wait_for(lambda: events(out, "queue.skipped"), timeout=30)
        sender.send("plain", "plain", delay=CYCLE + 1)
        Collector(sqs, urls["plain"]).until(1, timeout=30)
        install(fifo, sqs, "orders.fifo", check=True)
        sender.send("orders.fifo", "back", delay=CYCLE + 1, group_id="g")
        [got] = Collector(sqs, urls["orders.fifo"]).until(1, timeout=30)
    assert got.body == "back"
    skipped = events(out, "queue.skipped")
    assert {e["queue"] for e in skipped} == {f"{p}orders-delay-fifo.fifo"}
    assert "could not be read" in " ".join(skipped[0]["problems"])
    added = {e["queue"] for e in events(out, "queue.added")}
    assert {f"{p}orders-delay-fifo.fifo", f"{p}orders-fifo-staging"} <= added
