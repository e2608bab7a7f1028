"""What a send answers (core/send_results.py): a planned send's result, parked or a
duplicate; a batch's entries read off SendMessageBatch's answer, in order, each sent or
failed; a batch with a failure raises with the whole result unless asked not to."""

from __future__ import annotations

import pytest

from sqsdelay.core import send, send_results
from sqsdelay.core.send import BatchResult, Message
from sqsdelay.errors import BatchSendError, SqsOperationError
from sqsdelay.settings import Settings

LIMITS = Settings(region="us-east-1").send_limits()


def _planned(n: int) -> list[send.PlannedSend]:
    return [send.plan("orders", Message(f"m{i}", delay=3600), LIMITS, now=0) for i in range(n)]


def test_a_result_says_its_route_parked_or_duplicate() -> None:
    [p] = _planned(1)
    sent = send_results.result_of(p, "https://q", "sqs-1", 4)
    assert (sent.route, sent.index, sent.sqs_message_id, sent.duplicate) == (
        "delay-queue",
        4,
        "sqs-1",
        False,
    )
    assert send_results.result_of(p, "https://q", None, parked=True).route == "parked"
    assert send_results.result_of(p, "https://q", None, duplicate=True).duplicate


def test_a_batch_answer_is_read_entry_by_entry_and_its_failure_raises() -> None:
    planned = _planned(4)
    result = BatchResult()
    answer = {
        "Successful": [{"Id": "2", "MessageId": "b"}, {"Id": "0", "MessageId": "a"}],
        "Failed": [{"Id": "1", "Code": "KMS.Throttling", "Message": "slow", "SenderFault": False}],
    }
    send_results.collect(result, planned, [0, 1, 2], "https://q", answer)
    send_results.fail_batch(result, planned, [3], SqsOperationError("S", "q", "Down", "gone"))
    kept = send_results.finish(result, 4, raise_on_failure=False)
    assert [(r.index, r.sqs_message_id) for r in kept.sent] == [(0, "a"), (2, "b")]
    assert [(f.index, f.code) for f in kept.failed] == [(1, "KMS.Throttling"), (3, "Down")]
    with pytest.raises(BatchSendError, match="2 of 4") as raised:
        send_results.finish(result, 4, raise_on_failure=True)
    assert raised.value.result is result
