"""A taskiq broker whose tasks carry `schedule` labels, as a user writes them for taskiq's
LabelScheduleSource; `sqsdelay schedule sync --taskiq-broker
tests.integration.recurring_apps.taskiq_labels:broker` reads them and a real taskiq worker
runs what Scheduler (the emulator's) sends. No taskiq scheduler runs."""

from __future__ import annotations

import os

from taskiq import Context, TaskiqDepends

from sqsdelay.taskiq import SQSBroker

broker = SQSBroker(
    os.environ["RECURRING_TEST_NAME"],
    endpoint_url=os.environ["RECURRING_TEST_ENDPOINT"],
    region_name="us-east-1",
    aws_access_key_id="testing",
    aws_secret_access_key="testing",
)


@broker.task(
    task_name="tick",
    schedule=[
        {"cron": "0 3 * 1 *", "cron_offset": "Europe/Berlin", "args": ["cron"]},
        {"interval": 86_400, "args": ["rate"], "schedule_id": "tq-daily"},
    ],
)
async def tick(tag: str, context: Context = TaskiqDepends()) -> None:  # noqa: B008 (taskiq's)
    _write(f"{tag} {context.message.task_id}")


def _write(line: str) -> None:
    with open(os.environ["RECURRING_TEST_OUT"], "a") as out:
        out.write(line + "\n")
