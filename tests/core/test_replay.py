"""`replay-errors`'s flow (core/replay.py) against the in-memory stub: what is ours goes back
to the delay queue and leaves the error queue, what is not stays, and nothing is lost."""

from __future__ import annotations

import json

import pytest

from sqsdelay.core import failure_record, message_shape, quotas, wire_format
from sqsdelay.core.flows import drive
from sqsdelay.core.received import Received
from sqsdelay.core.replay import replay_errors
from sqsdelay.errors import SqsOperationError
from tests.support.stub import StubAws

ERROR, DELAY = "p-error", "p-orders-delay.fifo"


def dead(stub: StubAws, body: str, queue: str = DELAY, delay: str = "60") -> None:
    attrs = {wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute(delay)}
    written = failure_record.attributes(
        Received("m", "r", body, attrs), "bad", queue, quotas.MAX_MESSAGE_BYTES
    )
    stub.queues[ERROR].append(
        {"MessageBody": body, "MessageAttributes": written, "MessageId": f"e-{body}"}
    )


def left_in_error_queue(stub: StubAws) -> list[str]:
    return [
        m["MessageBody"]
        for i, m in enumerate(stub.queues[ERROR])
        if f"{ERROR}#{i}" not in stub.deleted[ERROR]
    ]


def test_ours_go_back_and_the_rest_stay_visible() -> None:
    stub = StubAws()
    dead(stub, "a")
    dead(stub, "foreign", queue="other-delay.fifo")
    dead(stub, "b")
    result = drive(replay_errors(ERROR, DELAY), stub)
    assert result.replayed == ["e-a", "e-b"] and list(result.skipped) == ["e-foreign"]
    assert [m["MessageBody"] for m in stub.queues[DELAY]] == ["a", "b"]
    back = stub.queues[DELAY][0]
    assert back["MessageAttributes"] == {
        wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute("60"),
        # A new token for each replay: the error-queue message's id (issue 58).
        wire_format.REPLAY_ATTRIBUTE: message_shape.string_attribute("e-a"),
    }
    assert back["MessageGroupId"] == back["MessageDeduplicationId"]
    assert left_in_error_queue(stub) == ["foreign"]
    assert not stub.in_flight[ERROR]  # the skipped one was made visible again at once


def test_a_failed_send_or_delete_keeps_the_message() -> None:
    stub = StubAws()
    dead(stub, "a")
    dead(stub, "b")
    stub.fail("SendMessage", "ServiceUnavailable", times=1, status=503)
    stub.timeout("DeleteMessage", times=1)
    result = drive(replay_errors(ERROR, DELAY), stub)
    assert result.failed == {"e-a": "ServiceUnavailable: stubbed"}
    # Sent, then not deleted: not a failure to send, and not done either.
    assert result.not_deleted == {"e-b": "TimeoutError: no answer"}
    assert result.replayed == [] and left_in_error_queue(stub) == ["a", "b"]
    assert [m["MessageBody"] for m in stub.queues[DELAY]] == ["b"]


def test_the_workers_dead_letter_to_a_standard_delay_queue_sent_but_not_deleted() -> None:
    """The worker's own dead letters, without the registry: a standard delay queue has no
    deduplication id, so a second run sends a second copy, which the report warns of."""
    standard = "p-orders-delay"
    stub = StubAws()
    dead(stub, "a", queue=standard)
    stub.fail("DeleteMessage", "ServiceUnavailable", times=1, status=503)
    first = drive(replay_errors(ERROR, standard), stub)
    assert first.not_deleted == {"e-a": "ServiceUnavailable: stubbed"} and not first.failed
    assert "MessageDeduplicationId" not in stub.queues[standard][0]
    again = drive(replay_errors(ERROR, standard), stub)
    assert again.replayed == ["e-a"] and len(stub.queues[standard]) == 2


def test_limit_and_scan() -> None:
    stub = StubAws()
    for i in range(25):
        dead(stub, str(i))
    assert len(drive(replay_errors(ERROR, DELAY, limit=12), stub).replayed) == 12
    assert stub.count("ReceiveMessage") == 2  # 10 and 2: never more than the limit asks for
    result = drive(replay_errors(ERROR, DELAY, scan=5), stub)
    assert len(result.replayed) == 5 and len(left_in_error_queue(stub)) == 8


def test_a_failed_receive_raises_a_typed_error() -> None:
    stub = StubAws()
    stub.fail("ReceiveMessage", "AccessDenied")
    with pytest.raises(SqsOperationError, match="AccessDenied"):
        drive(replay_errors(ERROR, DELAY), stub)


def test_only_the_selection_goes_back_and_the_rest_is_held_until_the_scan_ends() -> None:
    """The console's replay of selected dead letters: the selection may sit behind others,
    which stay hidden while the scan goes on (else they come back and end it) and are made
    visible again once it ends."""
    stub = StubAws()
    for body in ("a", "b", "c", "d"):
        dead(stub, body)
    result = drive(replay_errors(ERROR, DELAY, only=frozenset({"e-c"})), stub)
    assert result.replayed == ["e-c"] and not result.failed
    assert [m["MessageBody"] for m in stub.queues[DELAY]] == ["c"]
    assert left_in_error_queue(stub) == ["a", "b", "d"]
    assert not stub.in_flight[ERROR]  # the held ones visible again


def test_a_failed_receive_gives_back_what_the_selection_held() -> None:
    stub = StubAws()
    for i in range(12):
        dead(stub, str(i))
    receives = iter(range(100))
    # the second receive fails, after the first held ten unselected messages
    stub.fail("ReceiveMessage", "ServiceUnavailable", when=lambda _: next(receives) == 1)
    with pytest.raises(SqsOperationError, match="ServiceUnavailable"):
        drive(replay_errors(ERROR, DELAY, only=frozenset({"e-11"})), stub)
    assert not stub.in_flight[ERROR] and len(left_in_error_queue(stub)) == 12


def test_ours_behind_a_batch_of_others_are_found_and_the_others_released_at_the_end() -> None:
    """Issue 58.11: the others were released at once, came back in the next receive, and a
    receive of nothing new ended the scan before ours, behind them, were reached."""
    stub = StubAws()
    for i in range(12):
        dead(stub, f"other-{i}", queue="other-delay.fifo")
    dead(stub, "a")
    dead(stub, "b")
    result = drive(replay_errors(ERROR, DELAY), stub)
    assert result.replayed == ["e-a", "e-b"] and len(result.skipped) == 12
    assert left_in_error_queue(stub) == [f"other-{i}" for i in range(12)]
    assert not stub.in_flight[ERROR]  # released when the scan ended


def test_the_scan_ends_at_an_empty_long_poll_and_polls_long() -> None:
    stub = StubAws()
    dead(stub, "a")
    drive(replay_errors(ERROR, DELAY), stub)
    receives = [c for c in stub.calls if c.api == "ReceiveMessage"]
    assert len(receives) == 2  # the one that found it, then the empty one that ended it
    assert all(c.params["WaitTimeSeconds"] >= 1 for c in receives)


def test_a_give_up_with_eight_attributes_of_its_own_is_replayed_without_its_due_time() -> None:
    """Its record says nothing is left to wait: the due time gives its slot to the token
    (found by an outside review: such a message, which the sender had accepted, was
    refused for want of room)."""
    stub = StubAws()
    own = {f"a{i}": message_shape.string_attribute("v") for i in range(8)}
    record = {"reason": "gave up", "queue": DELAY, "delay_seconds": "0", "due_at": "1"}
    own[wire_format.FAILURE_ATTRIBUTE] = message_shape.string_attribute(json.dumps(record))
    stub.queues[ERROR].append({"MessageBody": "x", "MessageAttributes": own, "MessageId": "e-x"})
    result = drive(replay_errors(ERROR, DELAY), stub)
    assert result.replayed == ["e-x"], result.skipped
    back = stub.queues[DELAY][0]["MessageAttributes"]
    assert len(back) == 10 and wire_format.DUE_AT_ATTRIBUTE not in back
    assert back[wire_format.REPLAY_ATTRIBUTE]["StringValue"] == "e-x"
