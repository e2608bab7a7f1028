"""The embedded emulator behaves as SQS does where moto 5.2 does not (sqsdelay.dev.sqs_fidelity):
the FIFO deduplication window outlives a delete (per group with DeduplicationScope
messageGroup), and a long poll returns a message of a group as soon as the group's message in
flight is deleted, or a message as soon as it is released. Over HTTP, on the suite's
emulator."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.sender import Sender
from sqsdelay.settings import Settings
from tests.support.handovers import assert_handed_over_in_time
from tests.support.lambdas import lambda_function
from tests.support.logs import capture_logs, logged
from tests.support.workerkit import Collector, RunningWorker


def _fifo(sqs: Any, **attributes: str) -> str:
    name = f"f{uuid.uuid4().hex[:8]}.fifo"
    queue = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true", **attributes})
    return str(queue["QueueUrl"])


def _long_poll(sqs: Any, url: str) -> tuple[dict[str, Any], threading.Thread]:
    """A 20 s long poll in a thread: its reply and when it came, once the thread ends."""
    got: dict[str, Any] = {}

    def poll() -> None:
        got["reply"] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20)
        got["at"] = time.monotonic()

    poller = threading.Thread(target=poll)
    poller.start()
    return got, poller


def test_a_deleted_event_source_mapping_invokes_nothing(sqs: Any, moto_url: str) -> None:
    """A queue's mapping to a function, deleted (as the smoke test's dry run does before its
    stand-in workers poll): the messages stay for the queue's own consumers, received first
    by them. moto alone kept invoking the function at each send, with every visible message
    (the sent one included): here a zip function that cannot start Docker, so the messages
    came back received twice and once more; the dry run's image function failed the send."""
    lam, function = lambda_function(moto_url)
    url = sqs.create_queue(QueueName=f"m{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    mapping = lam.create_event_source_mapping(
        EventSourceArn=arn["QueueArn"], FunctionName=function, BatchSize=10
    )
    lam.delete_event_source_mapping(UUID=mapping["UUID"])
    sqs.send_message(QueueUrl=url, MessageBody="first")
    sqs.send_message(QueueUrl=url, MessageBody="second")
    got = Collector(sqs, url).until_all({"first", "second"}, timeout=10)
    assert sorted(d.body for d in got) == ["first", "second"]
    assert [d.system["ApproximateReceiveCount"] for d in got] == ["1", "1"]


def test_a_long_poll_returns_a_message_as_soon_as_it_is_released(sqs: Any) -> None:
    """A worker releases a message it cannot move now (visibility 0, or a short backoff):
    SQS hands it to the long poll waiting on the queue at once (moto alone: after 1.00 s)."""
    url = _fifo(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="m1", MessageGroupId="G", MessageDeduplicationId="1")
    [m1] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"]
    got, poller = _long_poll(sqs, url)
    time.sleep(0.3)  # the poll is waiting
    released = time.monotonic()
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=m1["ReceiptHandle"], VisibilityTimeout=0
    )
    poller.join(25)
    assert [m["Body"] for m in got["reply"]["Messages"]] == ["m1"]
    assert got["at"] - released < 0.5


def test_with_message_group_scope_the_same_deduplication_id_in_another_group_is_kept(
    sqs: Any,
) -> None:
    """High-throughput FIFO (DeduplicationScope=messageGroup) deduplicates within a group:
    moto compared the id across the queue while the first copy was queued."""
    url = _fifo(sqs, DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId")
    for group in ("A", "B", "A"):
        sqs.send_message(
            QueueUrl=url, MessageBody=group, MessageGroupId=group, MessageDeduplicationId="same"
        )
    bodies = []
    for _ in range(3):
        bodies += [
            m["Body"]
            for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        ]
    assert sorted(bodies) == ["A", "B"]  # A's second copy is dropped, B is its own


def test_a_long_poll_returns_a_message_of_a_group_once_its_message_in_flight_is_deleted(
    sqs: Any,
) -> None:
    url = _fifo(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="m1", MessageGroupId="G", MessageDeduplicationId="1")
    [m1] = sqs.receive_message(QueueUrl=url)["Messages"]
    got, poller = _long_poll(sqs, url)
    sqs.send_message(QueueUrl=url, MessageBody="m2", MessageGroupId="G", MessageDeduplicationId="2")
    time.sleep(0.3)  # the poll is waiting, m2 behind m1 in its group
    assert "reply" not in got
    deleted = time.monotonic()
    sqs.delete_message(QueueUrl=url, ReceiptHandle=m1["ReceiptHandle"])
    poller.join(25)
    assert [m["Body"] for m in got["reply"]["Messages"]] == ["m2"]
    assert got["at"] - deleted < 1.0  # moto alone: nothing, after the whole 20 s


def test_a_deduplication_id_is_remembered_for_five_minutes_after_its_message_is_deleted(
    sqs: Any,
) -> None:
    url = _fifo(sqs)
    send = {"QueueUrl": url, "MessageGroupId": "G", "MessageDeduplicationId": "same"}
    sqs.send_message(MessageBody="first", **send)
    [first] = sqs.receive_message(QueueUrl=url)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    sqs.send_message(MessageBody="again", **send)  # accepted, and dropped, as SQS does
    sqs.send_message(MessageBody="new", **{**send, "MessageDeduplicationId": "other"})
    bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]]
    assert bodies == ["new"]


def test_a_trace_header_sent_in_a_batch_is_kept(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=f"s{uuid.uuid4().hex[:8]}")["QueueUrl"]
    header = {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-a-b"}}
    entries = [{"Id": "1", "MessageBody": "b", "MessageSystemAttributes": header}]
    sqs.send_message_batch(QueueUrl=url, Entries=entries)
    [got] = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["AWSTraceHeader"])[
        "Messages"
    ]
    assert got["Attributes"]["AWSTraceHeader"] == "Root=1-a-b"  # moto alone: dropped


def test_requeued_twice_with_one_receive_loop_twenty_messages_are_handed_over_within_a_second(
    make_settings: Any, sqs: Any, record_property: Any
) -> None:
    """A requeue goes into its original's group, and the original is deleted only when its
    batch ends (after the hand-overs' fractions of a second). With moto's own long poll the
    loop's next poll missed such a requeue for its whole 20 s wait."""
    settings: Settings = make_settings(max_native_delay_seconds=1, concurrency=1)
    Installer(settings, client=sqs).run(["orders"])
    url = sqs.get_queue_url(QueueName=f"{settings.queue_prefix}orders")["QueueUrl"]
    collector = Collector(sqs, url)
    sender = Sender(settings, client=sqs)
    due_ms: dict[str, int] = {}
    earliest_ms: dict[str, int] = {}
    ids: dict[str, str] = {}
    out = capture_logs("DEBUG")  # every hop's delay.requeued
    with RunningWorker(settings, ["orders"]):
        for i in range(20):  # 3.5 s on a 1 s cycle: requeued twice, then a 0.5 s wait
            # Due 3.5 s after SQS took the send: after the call began, before its answer
            # came back. Lateness counts from the answer (timed from before the call, a send
            # the loaded emulator took half a second to take counted as the worker's), and
            # "never early" from before the call.
            earliest_ms[f"m{i}"] = int(time.time() * 1000) + 3500
            ids[f"m{i}"] = sender.send("orders", f"m{i}", delay=3.5).message_id
            due_ms[f"m{i}"] = int(time.time() * 1000) + 3500
            collector.poll()
            time.sleep(0.3)  # batches in hand overlap the next ones' requeues
        collector.until(20, timeout=60)
    # Handed over = sent to the destination: the emulator's SentTimestamp, on the same clock,
    # in ms. The test's consumer only checks that nothing came early: on a loaded machine its
    # own polls add their own delay to when it sees a message.
    late = sorted(int(d.system["SentTimestamp"]) - due_ms[d.body] for d in collector.got)
    seen = sorted(round(d.at * 1000) - earliest_ms[d.body] for d in collector.got)
    record_property("lateness_max_ms", late[-1])
    record_property("consumer_lateness_max_ms", seen[-1])
    assert len(collector.got) == 20 and seen[0] >= 0, (late, seen)
    hops = logged(out)  # due times kept, no requeue too many, none with a cycle or less left
    for body, message_id in ids.items():
        around = ((earliest_ms[body] - 3500) / 1000, (due_ms[body] - 3500) / 1000)
        assert_handed_over_in_time(hops, message_id, delay=3.5, cycle=1, sent_between=around)
    # A requeue missed for a 20 s long poll (moto's own) shows; a cycle (1 s) late is the
    # checks' above: a busy machine delays the worker's sends by as much (3.3 s seen).
    assert late[-1] < 5000, (late, seen)
