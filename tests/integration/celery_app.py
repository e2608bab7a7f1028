"""The Celery app of the Celery tests, as a user would write it. The worker process reads
its broker from the environment the test gives it; the test's publisher calls `make_app`."""

from __future__ import annotations

import os
import time
from typing import Any

from celery import Celery

import sqsdelay.celery
from sqsdelay.settings import Settings


def make_app(broker: str, prefix: str, *, delays: bool = True, **settings: Any) -> Celery:
    app = Celery("celery_app", broker=broker)
    app.conf.update(
        broker_transport_options={
            "region": "us-east-1",
            "queue_name_prefix": prefix,
            # Short polls every 0.1 s: moto's long poll sees a delayed message become
            # visible only once a second (real SQS answers a long poll at once).
            "wait_time_seconds": 0,
            "polling_interval": 0.1,
        },
        worker_enable_remote_control=False,  # no pidbox fanout queues on SQS
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
    )
    if delays:
        sqsdelay.celery.configure(app, settings=Settings(**settings))  # the line sqsdelay adds

    @app.task(name="record")
    def record(tag: str) -> None:
        """Append `tag` and the time it ran to the file the test reads."""
        with open(os.environ["CELERY_TEST_OUT"], "a") as out:
            out.write(f"{tag} {time.time():.3f}\n")

    @app.task(name="flaky", bind=True, max_retries=None)
    def flaky(self: Any, tag: str, countdowns: list[float]) -> None:
        """Record the run, then retry with the next countdown (same task id) until none is
        left: len(countdowns) + 1 runs."""
        record(tag)
        if self.request.retries < len(countdowns):
            raise self.retry(countdown=countdowns[self.request.retries])

    return app


if "CELERY_TEST_BROKER" in os.environ:  # `celery -A tests.integration.celery_app worker`
    app = make_app(os.environ["CELERY_TEST_BROKER"], os.environ["CELERY_TEST_PREFIX"])
