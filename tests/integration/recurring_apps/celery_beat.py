"""A Celery app with a beat_schedule, as a user writes it; `sqsdelay schedule sync
--celery-app tests.integration.recurring_apps.celery_beat:app` reads it and a real Celery
worker runs what Scheduler (the emulator's) sends. No beat runs."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from celery import Celery
from celery.schedules import crontab

NAME = os.environ["RECURRING_TEST_NAME"]  # Celery's queue_name_prefix: NAME-
port = os.environ["RECURRING_TEST_ENDPOINT"].rsplit(":", 1)[1]
app = Celery("celery_beat", broker=f"sqs://testing:testing@127.0.0.1:{port}")
app.conf.update(
    broker_transport_options={
        "region": "us-east-1",
        "queue_name_prefix": f"{NAME}-",
        "wait_time_seconds": 0,  # moto's long poll: see tests/integration/celery_app.py
        "polling_interval": 0.1,
    },
    worker_enable_remote_control=False,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    timezone="Europe/Berlin",
    beat_schedule={
        # 03:00 in Berlin, in January (the suite's real-clock runner never reaches it)
        "january nights": {
            "task": "tick",
            "schedule": crontab(minute=0, hour=3, month_of_year=1),
            "args": ["cron"],
        },
        "daily": {"task": "tick", "schedule": timedelta(days=1), "kwargs": {"tag": "rate"}},
    },
)


@app.task(name="tick", bind=True)
def tick(self: Any, tag: str) -> None:
    with open(os.environ["RECURRING_TEST_OUT"], "a") as out:
        out.write(f"{tag} {self.request.id}\n")
