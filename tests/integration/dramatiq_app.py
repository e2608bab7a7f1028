"""The Dramatiq app of the Dramatiq tests, as a user would write it: dramatiq-sqs's broker,
imported from sqsdelay. The worker process (`dramatiq tests.integration.dramatiq_app`) and
the test's publisher read the broker's endpoint and namespace from the environment, and
sqsdelay's settings from SQSDELAY_* variables."""

from __future__ import annotations

import os
import time
from typing import Any

import dramatiq

from sqsdelay.dramatiq import SQSBroker  # was: from dramatiq_sqs import SQSBroker

broker = SQSBroker(
    namespace=os.environ["DRAMATIQ_TEST_NAMESPACE"],
    endpoint_url=os.environ["DRAMATIQ_TEST_ENDPOINT"],
    region_name="us-east-1",
    aws_access_key_id="testing",
    aws_secret_access_key="testing",
)


def _write(line: str) -> None:
    with open(os.environ["DRAMATIQ_TEST_OUT"], "a") as out:
        out.write(line + "\n")


class EnqueueLog(dramatiq.Middleware):
    """Writes every enqueue, before it is sent, with its delay (the Retries middleware's
    backoff included)."""

    def before_enqueue(self, broker: Any, message: Any, delay: Any) -> None:
        _write(f"enqueued:{message.args[0]} {time.time():.3f} {delay or 0}")


broker.add_middleware(EnqueueLog())
dramatiq.set_broker(broker)


@dramatiq.actor
def record(tag: str) -> None:
    """Append `tag` and the time it ran to the file the test reads."""
    _write(f"{tag} {time.time():.3f}")


@dramatiq.actor(max_retries=2, min_backoff=3000, max_backoff=5000)
def flaky(tag: str) -> None:
    """Fails every time: runs once and retries twice, each backoff beyond a 2 s cycle."""
    _write(f"{tag} {time.time():.3f}")
    raise RuntimeError("fails on purpose")
