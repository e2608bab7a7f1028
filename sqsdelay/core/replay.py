"""`replay-errors` as a flow: move a destination's dead-lettered messages from the error
queue back to its delay queue, each sent before it is deleted (what each goes back with is
`core/failure_record.py`'s). EventBridge Scheduler's own dead letters (a parked message or
a recurring occurrence its schedule could not deliver) go where their schedule would have
sent them: the delay queue or the destination (`core/parking.py` reads them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqsdelay.core import identity, parking, queue_names, quotas
from sqsdelay.core.failure_record import plan_replay
from sqsdelay.core.flows import Call, Fault, Flow
from sqsdelay.core.parking import NotReplayable, Resend
from sqsdelay.core.received import Received, from_boto
from sqsdelay.errors import InvalidQueueName, SqsOperationError
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.replay")
# How long one receive of the error queue waits, and keeps what it took from other receivers.
RECEIVE_WAIT_SECONDS = 1
RECEIVE_VISIBILITY_SECONDS = 30
# A scan ends after this many receives in a row of messages it has seen (they outlived the
# receive's visibility): the rest of the queue is behind messages it cannot hold longer.
MAX_STALE_RECEIVES = 3


@dataclass
class ReplayResult:
    replayed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    # Sent, but the delete from the error queue failed: the message is back there, and a
    # run after the five minutes of FIFO deduplication (or any run, to a standard queue)
    # sends it again. Neither `replayed` nor `failed`: the caller must say both halves.
    not_deleted: dict[str, str] = field(default_factory=dict)
    # Scheduler's dead letters of this destination that cannot be sent again as their
    # schedule would have (also in `skipped`, as text): each stays in the error queue.
    refused: dict[str, NotReplayable] = field(default_factory=dict)


def own_queues(delay_queue: str) -> frozenset[str]:
    """Where a schedule of this destination sends: its delay queue (parking), and the
    destination itself (a recurring schedule)."""
    try:
        return frozenset({delay_queue, queue_names.destination_of_delay_queue(delay_queue)})
    except InvalidQueueName:
        return frozenset({delay_queue})


def plan(message: Received, delay_queue: str) -> Resend | str:
    """What a dead letter goes back as, or why it is left: the worker's (sqsdelay.Failure)
    to the delay queue, Scheduler's where its schedule would have sent it. Raises
    NotReplayable for a Scheduler dead letter of this destination it cannot send again."""
    if parking.is_scheduler_dead_letter(message.attributes):
        return parking.replay_of_dead_letter(
            message.body, message.message_id, own_queues(delay_queue)
        )
    replay = plan_replay(message, delay_queue)
    if isinstance(replay, str):
        return replay
    # Its own group: a replay waits for no other message of the delay queue.
    group = identity.replay_dedup_id(message.message_id)
    return Resend(replay.queue, message.body, replay.attributes, group)


def replay_errors(
    error_queue: str,
    delay_queue: str,
    *,
    limit: int = 100,
    scan: int = 1000,
    only: frozenset[str] | None = None,
) -> Flow[ReplayResult]:
    """Move up to `limit` messages of `delay_queue` from `error_queue` back to it, looking at
    no more than `scan` messages of the (shared) error queue.

    Each message is sent before it is deleted. A failed receive raises; a failed send
    leaves the message in the error queue and is reported in `failed`. A failed delete
    after a good send is reported in `not_deleted`: the message went out AND stays in the
    error queue, so a later run sends it again. Into a FIFO queue, a run within five
    minutes does not (the deduplication id is derived from the error-queue message id);
    into a standard destination (a recurring schedule's occurrence), or after those five
    minutes, it does, and only the replay token (`sqsdelay.Replay`, the same id: the
    registry or the guard) can then drop the copy. Messages of other queues are made
    visible again when the scan ends, and count towards `scan`. `only`:
    replay just these error-queue message ids (the console's selection). The scan ends at
    an empty long poll (a short poll samples some of SQS's servers only, and its empty
    answer says nothing), at `scan` messages, or at `limit` moved.
    """
    result = ReplayResult()
    seen: set[str] = set()  # at most `scan` ids
    # What this scan does not move (others' messages, the unselected, the skipped and the
    # failed) stays in hand until it ends: released at once, it came back in the next
    # receive, and a receive of nothing new ended the scan before the messages behind it.
    held: list[str] = []
    stale = 0  # receives in a row that brought nothing new
    while _tried(result) < limit and len(seen) < scan:
        wanted = min(quotas.MAX_BATCH_ENTRIES, limit - _tried(result))
        if only is not None:  # the selection may be behind others: read full batches
            wanted = quotas.MAX_BATCH_ENTRIES
        receive = {
            "MaxNumberOfMessages": max(1, min(wanted, scan - len(seen))),
            "WaitTimeSeconds": RECEIVE_WAIT_SECONDS,  # a long poll asks every server
            "VisibilityTimeout": RECEIVE_VISIBILITY_SECONDS,
            "MessageAttributeNames": ["All"],
        }
        [got] = yield [Call("sqs", "ReceiveMessage", receive, queue=error_queue)]
        if got.fault is not None:
            yield from _release(error_queue, held)
            raise SqsOperationError("ReceiveMessage", error_queue, got.fault.code, got.fault.detail)
        batch = [from_boto(m) for m in got.response.get("Messages", [])]
        if not batch:
            break  # an empty long poll: nothing more is visible
        fresh = [m for m in batch if m.message_id not in seen]
        held += [m.receipt_handle for m in batch if m.message_id in seen]  # back after 30 s
        for m in fresh:
            seen.add(m.message_id)
            if only is not None and m.message_id not in only:
                held.append(m.receipt_handle)
                continue
            try:
                resend = plan(m, delay_queue)
            except NotReplayable as exc:
                result.refused[m.message_id] = exc
                resend = f"not replayable: {exc}"
            if isinstance(resend, str):
                result.skipped[m.message_id] = resend
                held.append(m.receipt_handle)
                continue
            sent, fault = yield from _move(m, resend, error_queue)
            if fault is not None:
                why = f"{fault.code}: {fault.detail}"
                if sent:
                    result.not_deleted[m.message_id] = why
                    log.warning(
                        "delay.replayed_not_deleted", message_id=m.message_id, queue=resend.queue
                    )
                else:
                    result.failed[m.message_id] = why
                held.append(m.receipt_handle)
                continue
            result.replayed.append(m.message_id)
            log.info("delay.replayed", message_id=m.message_id, queue=resend.queue)
        stale = 0 if fresh else stale + 1
        if stale >= MAX_STALE_RECEIVES or (only is not None and only <= seen):
            break
    yield from _release(error_queue, held)  # not moved: visible again at once
    return result


def _tried(result: ReplayResult) -> int:
    return len(result.replayed) + len(result.failed) + len(result.not_deleted)


def _move(message: Received, resend: Resend, error_queue: str) -> Flow[tuple[bool, Fault | None]]:
    """Send one message back, then delete it from the error queue: whether it was sent, and
    the fault of whichever failed. Its deduplication id is derived from its error-queue
    message id, so a replay run again within five minutes does not send it twice to a FIFO
    queue (a standard queue has no such id)."""
    send: dict[str, Any] = {"MessageBody": resend.body, "MessageAttributes": resend.attributes}
    if resend.group_id is not None:
        send["MessageGroupId"] = resend.group_id
    if queue_names.is_fifo(resend.queue):
        send["MessageDeduplicationId"] = identity.replay_dedup_id(message.message_id)
    if resend.delay_seconds is not None:
        send["DelaySeconds"] = resend.delay_seconds
    if resend.system:
        send["MessageSystemAttributes"] = resend.system
    [sent] = yield [Call("sqs", "SendMessage", send, queue=resend.queue)]
    if sent.fault is not None:
        return False, sent.fault
    delete = {"ReceiptHandle": message.receipt_handle}
    [deleted] = yield [Call("sqs", "DeleteMessage", delete, queue=error_queue)]
    return True, deleted.fault


def _release(queue: str, handles: list[str]) -> Flow[None]:
    """Make these messages visible again at once; a failure is ignored (they come back after
    the receive's visibility timeout anyway)."""
    calls = []
    for start in range(0, len(handles), quotas.MAX_BATCH_ENTRIES):
        entries = [
            {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
            for i, h in enumerate(handles[start : start + quotas.MAX_BATCH_ENTRIES])
        ]
        calls.append(Call("sqs", "ChangeMessageVisibilityBatch", {"Entries": entries}, queue=queue))
    if calls:
        yield calls
