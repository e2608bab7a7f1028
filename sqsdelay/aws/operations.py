"""Operations: inspect queues, and replay dead-lettered messages once their problem is fixed
(the replay's flow and record are `core/replay.py` and `core/failure_record.py`), list a
destination's dead letters for the console, and pause or resume a destination (its delay
queue's tag, `core/pause.py`)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sqsdelay.aws.callers import SyncCaller
from sqsdelay.aws.clients import sync_client, translate
from sqsdelay.aws.installer import Installer, QueueReport
from sqsdelay.aws.queue_urls import QueueResolver
from sqsdelay.core import (
    discovery,
    message_shape,
    parking,
    pause,
    queue_names,
    quotas,
    replay,
    wire_format,
)
from sqsdelay.core.flows import Fault, drive
from sqsdelay.core.parking import NotReplayable
from sqsdelay.core.received import Received, from_boto
from sqsdelay.core.replay import ReplayResult
from sqsdelay.core.types import AttributeValue
from sqsdelay.errors import InvalidQueueName
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.aws.operations")
LIST_WAIT_SECONDS = 1  # a long poll: a short one samples some of SQS's servers only
COUNTS = {
    "visible": "ApproximateNumberOfMessages",
    "in_flight": "ApproximateNumberOfMessagesNotVisible",
    "delayed": "ApproximateNumberOfMessagesDelayed",
}


@dataclass
class QueueState:
    report: QueueReport
    counts: dict[str, int] = field(default_factory=dict)


def discovered(settings: Settings, *, client: Any = None) -> list[str]:
    """The destinations whose delay queues are under the queue prefix (as the worker's
    `--all` finds them): ListQueues, every page."""
    sqs = client or sync_client(settings)
    prefix = settings.queue_prefix
    urls: list[str] = []
    try:
        pages = sqs.get_paginator("list_queues").paginate(
            **({"QueueNamePrefix": prefix} if prefix else {}), PaginationConfig={"PageSize": 1000}
        )
        for page in pages:
            urls += page.get("QueueUrls", [])
    except (ClientError, BotoCoreError) as exc:
        raise translate(exc, "ListQueues", prefix or "*") from None
    found = []
    for name in discovery.delay_queues(urls, prefix):
        try:
            found.append(queue_names.destination_of_delay_queue(name))
        except InvalidQueueName as exc:  # the worker skips it too
            log.warning("queue.skipped", queue=name, problems=[str(exc)])
    return found


def inspect(settings: Settings, queues: Sequence[str], *, client: Any = None) -> list[QueueState]:
    """The installer's configuration check plus message counts of every queue."""
    sqs = client or sync_client(settings)
    states = []
    for report in Installer(settings, client=sqs).run(queues, create=False):
        state = QueueState(report)
        if report.url:
            try:
                attrs = sqs.get_queue_attributes(
                    QueueUrl=report.url, AttributeNames=list(COUNTS.values())
                )["Attributes"]
            except (ClientError, BotoCoreError) as exc:
                raise translate(exc, "GetQueueAttributes", report.spec.name) from None
            state.counts = {k: int(attrs.get(v, 0)) for k, v in COUNTS.items()}
        states.append(state)
    return states


def lambda_problems(
    settings: Settings, functions: Sequence[str], *, client: Any = None
) -> list[Any]:
    """The worker functions whose recursive loop detection would stop them
    (core/lambda_checks.py); lambda:GetFunctionRecursionConfig on each."""
    from sqsdelay.aws.clients import service_kwargs
    from sqsdelay.core.lambda_checks import recursion_problem

    if client is None:
        import boto3

        client = boto3.client("lambda", **service_kwargs(settings))
    problems = []
    for function in functions:
        try:
            reply = client.get_function_recursion_config(FunctionName=function)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, "GetFunctionRecursionConfig", function) from None
        problem = recursion_problem(function, reply)
        if problem is not None:
            problems.append(problem)
    return problems


@dataclass(frozen=True)
class PauseState:
    """Whether a destination is paused: `since` is when `sqsdelay pause` tagged it (ISO 8601,
    UTC), None when it is not paused."""

    destination: str  # as the user named it
    delay_queue: str
    since: str | None

    @property
    def paused(self) -> bool:
        return self.since is not None


def set_paused(
    settings: Settings, queue: str, paused: bool, *, client: Any = None, now: float | None = None
) -> PauseState:
    """Pause (tag its delay queue `sqsdelay:paused`) or resume (untag) a destination. Every
    worker and Lambda handler sees it within SQSDELAY_PAUSE_CHECK_SECONDS. A missing delay
    queue stops it with its fix; a refused call (sqs:TagQueue, sqs:UntagQueue) says which."""
    sqs = client or sync_client(settings)
    resolver = QueueResolver(settings)
    trio = resolver.trio(queue)
    name = pause.tag_queue(trio)
    caller = SyncCaller({"sqs": sqs}, resolver)
    drive(resolver.lookup(name), caller)
    moment = time.time() if now is None else now
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment)) if paused else None
    fault = drive(pause.set_paused(name, paused, since or ""), caller)
    if fault is not None:
        raise resolver.failure(fault, "TagQueue" if paused else "UntagQueue", name)
    log.info(
        "destination.paused" if paused else "destination.resumed",
        queue=name,
        destination=trio.destination,
        by="operator",
    )
    return PauseState(queue, name, since)


def pause_states(
    settings: Settings, queues: Sequence[str], *, client: Any = None
) -> list[PauseState]:
    """Whether each destination is paused (ListQueueTags on its delay queue)."""
    sqs = client or sync_client(settings)
    resolver = QueueResolver(settings)
    caller = SyncCaller({"sqs": sqs}, resolver)
    states = []
    for queue in queues:
        name = pause.tag_queue(resolver.trio(queue))
        drive(resolver.lookup(name), caller)
        tags = drive(pause.read(name), caller)
        if isinstance(tags, Fault):
            raise resolver.failure(tags, "ListQueueTags", name)
        states.append(PauseState(queue, name, pause.paused_in(tags)))
    return states


def replay_errors(
    settings: Settings,
    queue: str,
    *,
    limit: int = 100,
    scan: int = 1000,
    client: Any = None,
    only: frozenset[str] | None = None,
) -> ReplayResult:
    """Drive `core.replay.replay_errors` for a destination with boto3 (`sqsdelay
    replay-errors`; the console's selection: `only` these error-queue message ids): the
    worker's dead letters and EventBridge Scheduler's (parked messages and recurring
    occurrences its schedules could not deliver). A missing error or delay queue stops it
    first, with its fix."""
    sqs = client or sync_client(settings)
    resolver = QueueResolver(settings)
    trio = resolver.trio(queue)
    caller = SyncCaller({"sqs": sqs}, resolver)
    for name in (trio.error, trio.delay):
        drive(resolver.lookup(name), caller)
    flow = replay.replay_errors(trio.error, trio.delay, limit=limit, scan=scan, only=only)
    return drive(flow, caller)


@dataclass(frozen=True)
class DeadLetter:
    """A dead-lettered message as the console lists it: never its body."""

    message_id: str  # the error queue's SQS message id (what `replay` selects)
    reason: str
    size_bytes: int
    attributes: dict[str, str]  # name -> value as text (shown only when asked for)
    sent_ms: int


def dead_letters(
    settings: Settings, queue: str, *, scan: int = 100, client: Any = None
) -> list[DeadLetter]:
    """QUEUE's messages in the (shared) error queue, looking at no more than `scan`: each is
    received for 30 s and made visible again as soon as the scan ends. Long polls of 1 s
    (`LIST_WAIT_SECONDS`): SQS answers a short poll from a sample of its servers,
    so an empty short poll does not say that the queue has no more; the scan ends at the
    first empty long poll (or when a receive brings nothing new)."""
    sqs = client or sync_client(settings)
    resolver = QueueResolver(settings)
    queues = resolver.trio(queue)
    error_url = resolver.url(sqs, queues.error)
    found: dict[str, DeadLetter] = {}
    seen: set[str] = set()
    held: list[str] = []  # hidden until the scan ends, so that each receive brings new ones
    try:
        _list(sqs, error_url, queues.error, queues.delay, scan, found, seen, held)
    finally:
        _release(sqs, error_url, held)
    return list(found.values())


def _list(
    sqs: Any,
    error_url: str,
    error_queue: str,
    delay_queue: str,
    scan: int,
    found: dict[str, DeadLetter],
    seen: set[str],
    held: list[str],
) -> None:
    while len(seen) < scan:
        try:
            resp = sqs.receive_message(
                QueueUrl=error_url,
                MaxNumberOfMessages=min(quotas.MAX_BATCH_ENTRIES, scan - len(seen)),
                WaitTimeSeconds=LIST_WAIT_SECONDS,
                VisibilityTimeout=30,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["SentTimestamp"],
            )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, "ReceiveMessage", error_queue) from None
        batch = [from_boto(m) for m in resp.get("Messages", [])]
        fresh = [m for m in batch if m.message_id not in seen]
        for m in fresh:
            seen.add(m.message_id)
            reason = _reason(m, delay_queue)
            if reason is None:
                continue
            found[m.message_id] = DeadLetter(
                message_id=m.message_id,
                reason=reason,
                size_bytes=len(m.body.encode()),
                attributes={k: _shown(v) for k, v in m.attributes.items()},
                sent_ms=int(m.system.get("SentTimestamp", 0)),
            )
        held += [m.receipt_handle for m in batch]
        if not fresh:
            break


def _reason(message: Received, delay_queue: str) -> str | None:
    """Why a dead letter of this destination failed, or None for another's: the worker's
    record, or what EventBridge Scheduler said of a schedule that sends to it."""
    if not parking.is_scheduler_dead_letter(message.attributes):
        failure = message.attributes.get(wire_format.FAILURE_ATTRIBUTE)
        record = _failure_record(failure.get("StringValue") if failure else None)
        if record.get("queue") != delay_queue:
            return None
        return str(record.get("reason", "unknown reason"))
    try:
        queue = parking.resend_of_dead_letter(message.body).queue
    except NotReplayable:
        return None  # whose it is cannot be read: replay-errors lists it as skipped
    if queue not in replay.own_queues(delay_queue):
        return None
    said = [
        message_shape.string_value(message.attributes, name) or ""
        for name in ("ERROR_CODE", "ERROR_MESSAGE")
    ]
    return "EventBridge Scheduler could not deliver it: " + (": ".join(filter(None, said)) or "?")


def _shown(value: AttributeValue) -> str:
    """An attribute value as text: a string as it is, a binary one by its size."""
    if "StringValue" in value:
        return value["StringValue"]
    return f"(binary, {len(value.get('BinaryValue', b''))} bytes)"


def _failure_record(raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        record = json.loads(raw)
    except json.JSONDecodeError:
        return {}
    return record if isinstance(record, dict) else {}


def _release(sqs: Any, url: str, handles: list[str]) -> None:
    for start in range(0, len(handles), quotas.MAX_BATCH_ENTRIES):
        entries = [
            {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
            for i, h in enumerate(handles[start : start + quotas.MAX_BATCH_ENTRIES])
        ]
        # if this fails, they become visible after the 30 s timeout anyway
        with contextlib.suppress(ClientError, BotoCoreError):
            sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
