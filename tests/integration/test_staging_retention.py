"""A FIFO destination's staging queue keeps its messages as long as its delay queue does
(SQSDELAY_DELAY_QUEUE_RETENTION_SECONDS), so that a pause that holds both loses neither:
`sqsdelay install` creates it so, `install --check` warns about one that keeps less (as
staging queues were created before: SQS's default, 4 days), and `--fix` raises it. Through
the command line against the emulator."""

from __future__ import annotations

from typing import Any

from tests.support.cli import run

FOUR_DAYS, FOURTEEN_DAYS = "345600", "1209600"


def retention(sqs: Any, name: str) -> str:
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MessageRetentionPeriod"])
    return str(attrs["Attributes"]["MessageRetentionPeriod"])


def test_the_staging_queue_takes_the_delay_queues_retention_and_check_warns_when_shorter(
    env: dict[str, str], prefix: str, sqs: Any
) -> None:
    env = {**env, "SQSDELAY_DELAY_QUEUE_RETENTION_SECONDS": FOURTEEN_DAYS}
    staging, delay = f"{prefix}orders-fifo-staging", f"{prefix}orders-delay-fifo.fifo"
    # A staging queue from before: SQS's default retention, 4 days.
    sqs.create_queue(QueueName=staging, Attributes={"DelaySeconds": "0"})
    assert retention(sqs, staging) == FOUR_DAYS
    installed = run(env, "install", "orders.fifo")
    assert installed.returncode == 0, installed.stderr
    assert retention(sqs, delay) == FOURTEEN_DAYS
    assert retention(sqs, staging) == FOUR_DAYS  # install never changes a queue that exists

    check = run(env, "install", "orders.fifo", "--check")
    assert check.returncode == 0, check.stdout  # a warning: the check passes
    assert (
        f"warning: retention is {FOUR_DAYS} s, shorter than SQSDELAY_DELAY_QUEUE_RETENTION_SECONDS "
        f"({FOURTEEN_DAYS} s, the delay queues' setting): a pause of the destination longer than "
        "4 days loses the forwards it holds here"
    ) in check.stdout
    # the fix names the setting, so that --fix raises it to this value
    assert "--delay-queue-retention-seconds 1209600 install orders.fifo --fix" in check.stdout

    fixed = run(env, "install", "orders.fifo", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert retention(sqs, staging) == FOURTEEN_DAYS
    again = run(env, "install", "orders.fifo", "--check")
    assert again.returncode == 0 and "warning" not in again.stdout, again.stdout


def test_a_new_staging_queue_is_created_with_the_delay_queues_retention(
    env: dict[str, str], prefix: str, sqs: Any
) -> None:
    env = {**env, "SQSDELAY_DELAY_QUEUE_RETENTION_SECONDS": "864000"}  # 10 days
    installed = run(env, "install", "billing.fifo")
    assert installed.returncode == 0, installed.stderr
    assert retention(sqs, f"{prefix}billing-fifo-staging") == "864000"
    assert retention(sqs, f"{prefix}billing-delay-fifo.fifo") == "864000"
    check = run(env, "install", "billing.fifo", "--check")
    assert check.returncode == 0 and "warning" not in check.stdout, check.stdout
