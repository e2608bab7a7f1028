"""Operations: inspect queues, and replay dead-lettered messages once their problem is fixed
(the replay's flow and record are `core/replay.py` and `core/failure_record.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sqsdelay.aws.callers import SyncCaller
from sqsdelay.aws.clients import sync_client, translate
from sqsdelay.aws.installer import Installer, QueueReport
from sqsdelay.aws.queue_urls import QueueResolver
from sqsdelay.core import discovery, queue_names, replay
from sqsdelay.core.flows import drive
from sqsdelay.core.replay import ReplayResult
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


def replay_errors(
    settings: Settings,
    queue: str,
    *,
    limit: int = 100,
    scan: int = 1000,
    client: Any = None,
) -> ReplayResult:
    """Drive `core.replay.replay_errors` for a destination with boto3 (`sqsdelay
    replay-errors`). A missing error or delay queue stops it first, with its fix."""
    sqs = client or sync_client(settings)
    resolver = QueueResolver(settings)
    trio = resolver.trio(queue)
    caller = SyncCaller({"sqs": sqs}, resolver)
    for name in (trio.error, trio.delay):
        drive(resolver.lookup(name), caller)
    return drive(replay.replay_errors(trio.error, trio.delay, limit=limit, scan=scan), caller)
