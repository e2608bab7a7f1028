"""The taskiq app of the taskiq tests, as a user would write it: taskiq-aio-sqs's broker,
imported from sqsdelay, with taskiq's own retry middleware, taskiq-aio-sqs's S3 result
backend and its S3 bucket for large tasks. The worker process (`taskiq worker
tests.integration.taskiq_app:broker`) and the test's publisher read the endpoint, queues and
buckets from the environment, and sqsdelay's settings from SQSDELAY_* variables."""

from __future__ import annotations

import os
import time

from taskiq import SmartRetryMiddleware, TaskiqMessage, TaskiqMiddleware
from taskiq_aio_sqs import S3Backend, SQSQueue

from sqsdelay.taskiq import SQSBroker  # was: from taskiq_aio_sqs import SQSBroker

ENDPOINT = os.environ["TASKIQ_TEST_ENDPOINT"]
FIFO = os.environ["TASKIQ_TEST_FIFO"]
RETRY_DELAY = float(os.environ["TASKIQ_TEST_RETRY_DELAY"])
KEYS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _write(line: str) -> None:
    with open(os.environ["TASKIQ_TEST_OUT"], "a") as out:
        out.write(line + "\n")


class KickLog(TaskiqMiddleware):
    """Writes every kick, before it is sent, with its delay label (the retry middleware's
    backoff included)."""

    def pre_send(self, message: TaskiqMessage) -> TaskiqMessage:
        try:
            delay = float(message.labels.get("delay") or 0)
        except ValueError:  # a bad label, which the broker refuses
            delay = float("nan")
        tag = str(message.args[0] if message.args else message.kwargs.get("tag"))[:40]
        _write(f"kicked:{tag} {time.time():.3f} {delay}")
        return message


broker = (
    SQSBroker(
        os.environ["TASKIQ_TEST_QUEUE"],
        endpoint_url=ENDPOINT,
        region_name="us-east-1",
        # an unacknowledged task would be received again 5 s later: "runs once" checks acks
        visibility_timeout=5,
        use_task_id_for_deduplication=True,  # the FIFO queue has no content deduplication
        # a task of 1 MiB or more goes to S3, on taskiq-aio-sqs's route and on sqsdelay's
        s3_extended_bucket_name=os.environ["TASKIQ_TEST_LARGE_BUCKET"],
        **KEYS,
    )
    .with_queues(SQSQueue(name=FIFO, is_fifo=True, wait_time_seconds=10, visibility_timeout=5))
    .with_result_backend(
        S3Backend(bucket_name=os.environ["TASKIQ_TEST_BUCKET"], endpoint_url=ENDPOINT, **KEYS)
    )
    .with_middlewares(
        KickLog(),
        SmartRetryMiddleware(default_retry_count=3, default_delay=RETRY_DELAY, use_jitter=True),
    )
)


@broker.task
async def record(tag: str) -> None:
    """Append `tag` and the time it ran to the file the test reads."""
    _write(f"{tag} {time.time():.3f}")


@broker.task(retry_on_error=True, max_retries=3)
async def flaky(tag: str) -> None:
    """Fails every time: runs once and is retried twice, each backoff beyond the cycle."""
    _write(f"{tag} {time.time():.3f}")
    raise RuntimeError("fails on purpose")


@broker.task
async def large(tag: str, blob: str) -> None:
    """Append `tag`, the time it ran and the size of its argument (never the argument)."""
    _write(f"{tag} {time.time():.3f} {len(blob)}")


@broker.task
async def add(tag: str, a: int, b: int) -> int:
    _write(f"{tag} {time.time():.3f}")
    return a + b
