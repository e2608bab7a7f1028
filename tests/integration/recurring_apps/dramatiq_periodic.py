"""A Dramatiq actor with `sqsdelay.dramatiq.periodic`, as periodiq's users write
`periodic=`; `sqsdelay schedule sync --dramatiq-module
tests.integration.recurring_apps.dramatiq_periodic` reads it and a real Dramatiq worker runs
what Scheduler (the emulator's) sends. No periodiq runs."""

from __future__ import annotations

import os

import dramatiq

from sqsdelay.dramatiq import SQSBroker, periodic

broker = SQSBroker(
    namespace=os.environ["RECURRING_TEST_NAME"],
    endpoint_url=os.environ["RECURRING_TEST_ENDPOINT"],
    region_name="us-east-1",
    aws_access_key_id="testing",
    aws_secret_access_key="testing",
)
dramatiq.set_broker(broker)


@periodic(cron="0 3 * 1 *", timezone="Europe/Berlin", args=("cron",), name="d-nights")
@dramatiq.actor(actor_name="tick")
def tick(tag: str) -> None:
    with open(os.environ["RECURRING_TEST_OUT"], "a") as out:
        out.write(f"{tag}\n")
