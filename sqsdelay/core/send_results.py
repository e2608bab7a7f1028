"""What a send answers: the `SendResult` of a planned send (logged as `delay.scheduled`, or
`delay.duplicate`), a batch's results read off SendMessageBatch's answer and its failures,
and the end of a send's span (`traced`; how sends are traced is `send_tracing.py`). The flows
that send are `send_flows.py`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqsdelay.core import batch_entries
from sqsdelay.core.send import BatchResult, PlannedSend, SendFailure, SendResult
from sqsdelay.core.send_tracing import Producer
from sqsdelay.errors import BatchSendError, SqsOperationError
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.aws.sender")  # the name operators' log filters know


def result_of(
    planned: PlannedSend,
    url: str,
    sqs_message_id: str | None,
    index: int = 0,
    *,
    parked: bool = False,
    duplicate: bool = False,
) -> SendResult:
    message_id = planned.message_id
    result = SendResult(
        message_id=message_id,
        route="parked" if parked else planned.route,
        queue=planned.queue,
        queue_url=url,
        destination=planned.destination,
        delay_seconds=planned.delay_seconds,
        size_bytes=planned.size_bytes,
        index=index,
        sqs_message_id=sqs_message_id,
        nservicebus_message_id=planned.nservicebus_message_id,
        duplicate=duplicate,
    )
    if duplicate:
        log.info("delay.duplicate", message_id=message_id, destination=planned.destination)
        return result
    log.info(
        "delay.scheduled",
        message_id=message_id,
        destination=planned.destination,
        queue=planned.queue,
        delay_seconds=planned.delay_seconds,
        size_bytes=planned.size_bytes,
        route=result.route,
        sqs_message_id=sqs_message_id,
    )
    return result


def collect(
    result: BatchResult,
    planned: Sequence[PlannedSend],
    batch: list[int],
    url: str,
    response: dict[str, Any],
) -> None:
    ok, failed = batch_entries.read_batch_response(response, (str(i) for i in batch))
    for index in batch:
        entry_id = str(index)
        if entry_id in ok:
            result.sent.append(result_of(planned[index], url, ok[entry_id]["MessageId"], index))
        else:
            f = failed[entry_id]
            result.failed.append(SendFailure(index, planned[index].queue, f.code, f.message))


def traced(
    producer: Producer | None, planned: PlannedSend, result: SendResult, now: float
) -> SendResult:
    """End the send's span with what was sent (`sqsdelay.otel`)."""
    if producer is not None:
        due_ms = int(now * 1000) + planned.delay_ms
        producer.sent(result.queue, result.sqs_message_id, result.message_id, due_ms)
    return result


def fail_batch(
    result: BatchResult, planned: Sequence[PlannedSend], batch: list[int], err: SqsOperationError
) -> None:
    for index in batch:
        result.failed.append(SendFailure(index, planned[index].queue, err.code, err.detail))


def finish(result: BatchResult, total: int, raise_on_failure: bool) -> BatchResult:
    result.sent.sort(key=lambda r: r.index)
    result.failed.sort(key=lambda f: f.index)
    if result.failed:
        log.error("delay.batch_failed", failed=len(result.failed), total=total)
        if raise_on_failure:
            raise BatchSendError(result, len(result.failed), total)
    return result
