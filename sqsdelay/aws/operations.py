"""Operations: inspect queues, and replay dead-lettered messages once their problem is fixed."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sqsdelay.aws.clients import sync_client, translate
from sqsdelay.aws.installer import Installer, QueueReport
from sqsdelay.aws.queue_urls import QueueResolver
from sqsdelay.core import discovery, identity, message_shape, queue_names, quotas, wire_format
from sqsdelay.core.decision import parse_natural
from sqsdelay.core.record_decisions import from_boto
from sqsdelay.core.types import Attributes
from sqsdelay.errors import InvalidQueueName
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.aws.operations")
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
class Replay:
    """Where a dead-lettered message goes back to, and with which attributes (pure)."""

    queue: str
    attributes: Attributes


def plan_replay(message: Any, delay_queue: str) -> Replay | str:
    """A Replay for a message dead-lettered from `delay_queue`, or why it cannot be replayed."""
    raw = message.attributes.get(wire_format.FAILURE_ATTRIBUTE, {}).get("StringValue")
    if raw is None:
        return "no sqsdelay.Failure record (no room for it), so its queue is unknown"
    try:
        record = json.loads(raw)
    except json.JSONDecodeError:
        return "sqsdelay.Failure record is not JSON"
    if record.get("queue") != delay_queue:
        return f"belongs to {record.get('queue')!r}"
    delay = str(record.get("delay_seconds") or "")
    if parse_natural(delay) is None:
        return f"no valid delay to restore ({record.get('reason', 'unknown reason')})"
    attrs = {k: v for k, v in message.attributes.items() if k != wire_format.FAILURE_ATTRIBUTE}
    attrs[wire_format.DELAY_ATTRIBUTE] = message_shape.string_attribute(delay)
    due = parse_natural(str(record.get("due_at") or ""))
    if due is not None:  # keeps the original due time; if it has passed, delivery is immediate
        attrs[wire_format.DUE_AT_ATTRIBUTE] = message_shape.number_attribute(due)
    return Replay(delay_queue, attrs)


@dataclass
class ReplayResult:
    replayed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def replay_errors(
    settings: Settings,
    queue: str,
    *,
    limit: int = 100,
    scan: int = 1000,
    client: Any = None,
) -> ReplayResult:
    """Move up to `limit` messages of `queue` from the error queue back to its delay queue,
    looking at no more than `scan` messages of the (shared) error queue.

    Each message is sent before it is deleted, with a deduplication id derived from its
    error-queue message id, so a replay that dies half-way and is run again within five
    minutes does not duplicate anything. Messages of other queues are made visible again at
    once, and count towards `scan`.
    """
    sqs = client or sync_client(settings)
    resolver = QueueResolver(settings)
    queues = resolver.trio(queue)
    delay_queue = queues.delay
    error_url = resolver.url(sqs, queues.error)
    delay_url = resolver.url(sqs, delay_queue)
    result = ReplayResult()
    seen: set[str] = set()  # at most `scan` ids
    while len(result.replayed) + len(result.failed) < limit and len(seen) < scan:
        wanted = min(quotas.MAX_BATCH_ENTRIES, limit - len(result.replayed) - len(result.failed))
        resp = sqs.receive_message(
            QueueUrl=error_url,
            MaxNumberOfMessages=max(1, min(wanted, scan - len(seen))),
            WaitTimeSeconds=1,
            VisibilityTimeout=30,
            MessageAttributeNames=["All"],
        )
        batch = [from_boto(m) for m in resp.get("Messages", [])]
        fresh = [m for m in batch if m.message_id not in seen]
        left = [m.receipt_handle for m in batch if m.message_id in seen]
        for m in fresh:
            seen.add(m.message_id)
            plan = plan_replay(m, delay_queue)
            if isinstance(plan, str):
                result.skipped[m.message_id] = plan
                left.append(m.receipt_handle)
                continue
            dedup = identity.replay_dedup_id(m.message_id)
            try:
                sqs.send_message(
                    QueueUrl=delay_url,
                    MessageBody=m.body,
                    MessageAttributes=plan.attributes,
                    MessageGroupId=dedup,
                    MessageDeduplicationId=dedup,
                )
                sqs.delete_message(QueueUrl=error_url, ReceiptHandle=m.receipt_handle)
            except (ClientError, BotoCoreError) as exc:
                err = translate(exc, "SendMessage", delay_queue)
                result.failed[m.message_id] = f"{err.code}: {err.detail}"
                left.append(m.receipt_handle)
                continue
            result.replayed.append(m.message_id)
            log.info("delay.replayed", message_id=m.message_id, queue=delay_queue)
        _release(sqs, error_url, left)  # not ours, or failed: visible again at once
        if not fresh:
            break
    return result


def _release(sqs: Any, url: str, handles: list[str]) -> None:
    for start in range(0, len(handles), quotas.MAX_BATCH_ENTRIES):
        entries = [
            {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
            for i, h in enumerate(handles[start : start + quotas.MAX_BATCH_ENTRIES])
        ]
        # if this fails, they become visible after the 30 s timeout anyway
        with contextlib.suppress(ClientError, BotoCoreError):
            sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
