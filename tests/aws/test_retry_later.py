"""`retry_later`'s calls (aws/retry_later.py) against a recording SQS client of two accounts,
and `handle_batch` when its sender cannot be made (issue 58, 9 and 6)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sqsdelay import consumer
from sqsdelay.aws import retry_later as retry_later_module
from sqsdelay.aws.sender import Sender
from sqsdelay.core import wire_format
from sqsdelay.errors import ConfigError
from sqsdelay.settings import Settings

OWN = "111111111111"  # the consumer's account: the sender's credentials
OTHER = "222222222222"  # the queue's owner, which lets the consumer read it


class TwoAccounts:
    """boto3's SQS client, as far as retry_later calls it, in us-east-1: `orders` and its
    queues exist in both accounts; GetQueueUrl answers for the caller's own account unless
    asked for another's (QueueOwnerAWSAccountId), as SQS does."""

    meta = SimpleNamespace(region_name="us-east-1", partition="aws")

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.deleted: list[str] = []

    @staticmethod
    def get_queue_url(QueueName: str, QueueOwnerAWSAccountId: str = OWN) -> dict[str, Any]:
        return {
            "QueueUrl": f"https://sqs.us-east-1.amazonaws.com/{QueueOwnerAWSAccountId}/{QueueName}"
        }

    def send_message(self, **params: Any) -> dict[str, Any]:
        self.sent.append(params)
        return {"MessageId": f"sqs-{len(self.sent)}"}

    def delete_message(self, QueueUrl: str, ReceiptHandle: str) -> dict[str, Any]:
        self.deleted.append(QueueUrl)
        return {}


def record(account: str = OTHER, region: str = "us-east-1", **attributes: str) -> dict[str, Any]:
    return {
        "messageId": "m-1",
        "receiptHandle": "rh-1",
        "body": "charge order 7",
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {
            wire_format.MESSAGE_ID_ATTRIBUTE: {"dataType": "String", "stringValue": "order-7"},
            **{k: {"dataType": "String", "stringValue": v} for k, v in attributes.items()},
        },
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{region}:{account}:orders",
    }


def url(account: str, name: str) -> str:
    return f"https://sqs.us-east-1.amazonaws.com/{account}/{name}"


@pytest.mark.parametrize(
    ("delay", "queue"),
    [(5, "orders"), (3 * 86_400, "orders-delay.fifo")],  # direct, or through the delay queue
)
@pytest.mark.parametrize("account", [OTHER, OWN])
def test_a_retry_goes_to_the_queues_of_the_account_the_message_came_from(
    delay: int, queue: str, account: str
) -> None:
    """Issue 58.9: the original was deleted in its owner's queue, but the retry was sent by
    name, to the same-named queue of the consumer's own account."""
    sqs = TwoAccounts()
    sender = Sender(Settings(region="us-east-1"), client=sqs)
    done = consumer.retry_later(record(account), delay, sender=sender)
    assert done.sent is not None and done.sent.queue_url == url(account, queue)
    assert [m["QueueUrl"] for m in sqs.sent] == [url(account, queue)]
    assert sqs.deleted == [url(account, "orders")]


def test_a_give_up_goes_to_the_error_queue_of_the_account_the_message_came_from() -> None:
    sqs = TwoAccounts()
    sender = Sender(Settings(region="us-east-1", error_queue="error"), client=sqs)
    policy = consumer.RetryPolicy(consumer.Backoff(max_attempts=0))
    done = policy.retry(record(), "partner down", sender=sender)
    assert done.dead_lettered is not None
    assert [m["QueueUrl"] for m in sqs.sent] == [url(OTHER, "error")]
    assert sqs.deleted == [url(OTHER, "orders")]


def test_a_message_of_another_region_is_refused_before_anything_is_sent() -> None:
    sqs = TwoAccounts()
    sender = Sender(Settings(region="us-east-1"), client=sqs)
    with pytest.raises(ConfigError, match=r"in eu-west-1.*client is in us-east-1"):
        consumer.retry_later(record(region="eu-west-1"), 5, sender=sender)
    policy = consumer.RetryPolicy(consumer.Backoff(max_attempts=0))
    with pytest.raises(ConfigError, match="eu-west-1"):
        policy.retry(record(region="eu-west-1"), "down", sender=sender)
    assert sqs.sent == [] and sqs.deleted == []


def test_the_same_account_is_looked_up_once_per_queue_and_sends_by_its_url() -> None:
    """The owner's lookups are kept in the sender's resolver: a second retry asks nothing."""
    sqs = TwoAccounts()
    asked: list[dict[str, Any]] = []
    lookup = sqs.get_queue_url

    def counted(**params: Any) -> dict[str, Any]:
        asked.append(params)
        return lookup(**params)

    sqs.get_queue_url = counted  # type: ignore[method-assign,assignment]
    sender = Sender(Settings(region="us-east-1"), client=sqs)
    for _ in range(2):
        consumer.retry_later(record(), 5, sender=sender)
    assert asked == [{"QueueName": "orders", "QueueOwnerAWSAccountId": OTHER}]
    # The sender's own sends still go to its own account.
    assert sender.send("orders", "mine", delay=0).queue_url == url(OWN, "orders")


def test_a_bad_setting_fails_only_the_records_that_need_the_sender(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 58.6: `Sender()` was made outside the try that records failures, so a bad
    SQSDELAY_* setting raised out of `handle_batch`, and Lambda returned the whole batch,
    the records that had succeeded included."""
    monkeypatch.setenv("SQSDELAY_MAX_NATIVE_DELAY_SECONDS", "not a number")
    ran: list[str] = []

    def handler(r: Any) -> None:
        ran.append(r["messageId"])
        if r["messageId"] == "later":
            raise consumer.RetryLater(60)

    records = [{**record(), "messageId": i} for i in ("ok-1", "later", "ok-2")]
    answer = consumer.handle_batch({"Records": records}, handler)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "later"}]}
    assert ran == ["ok-1", "later", "ok-2"]


def test_a_retry_whose_delete_fails_is_a_success_and_is_sent_once() -> None:
    """Issue 58.2: the retry was sent, then the failed delete made the record a failure, so
    Lambda handed it out again and the same attempt was retried a second time."""

    class NoDelete(TwoAccounts):
        def delete_message(self, QueueUrl: str, ReceiptHandle: str) -> dict[str, Any]:
            error = {"Error": {"Code": "AccessDenied", "Message": "no sqs:DeleteMessage"}}
            raise ClientError(error, "DeleteMessage")  # type: ignore[arg-type]

    sqs = NoDelete()
    sender = Sender(Settings(region="us-east-1"), client=sqs)

    def handler(r: Any) -> None:
        raise consumer.RetryLater(60)

    answer = consumer.handle_batch({"Records": [record()]}, handler, sender=sender)
    assert answer == {"batchItemFailures": []}
    assert len(sqs.sent) == 1


def test_without_a_sender_one_is_held_per_thread_and_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 60 §4: `retry_later` without `sender=` made a new `Sender` (a boto3 client, its
    queue URLs looked up again) on every call. Now one per thread, made again when a
    SQSDELAY_*/AWS_* variable changes."""
    sqs = TwoAccounts()
    made: list[Sender] = []

    def new_sender() -> Sender:
        made.append(Sender(Settings(region="us-east-1"), client=sqs))
        return made[-1]

    monkeypatch.setattr(retry_later_module, "Sender", new_sender)
    monkeypatch.setattr(retry_later_module, "_HELD", threading.local())  # none held yet
    consumer.retry_later(record(), 60)
    consumer.RetryPolicy().retry(record(), "again")
    answer = consumer.handle_batch({"Records": [record()]}, _retry_in(60))
    assert answer == {"batchItemFailures": []}
    assert len(made) == 1 and len(sqs.sent) == 3  # one sender made, three retries sent

    monkeypatch.setenv("SQSDELAY_MAX_NATIVE_DELAY_SECONDS", "60")
    consumer.retry_later(record(), 60)
    assert len(made) == 2  # the environment changed: a sender of the new settings
    consumer.retry_later(record(), 60)
    assert len(made) == 2

    others: list[Sender] = []
    thread = threading.Thread(target=lambda: others.append(retry_later_module.held_sender()))
    thread.start()
    thread.join(timeout=30)
    assert len(made) == 3 and others == [made[2]]  # another thread: its own
    assert retry_later_module.held_sender() is made[1]  # this thread's is still its own


def _retry_in(seconds: float) -> Any:
    def handler(r: Any) -> None:
        raise consumer.RetryLater(seconds)

    return handler


def test_a_held_sender_replaced_after_an_environment_change_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review finding 7: the sender held for a thread was dropped without `close()` when the
    environment changed (its call threads and any clients it made left open)."""
    closed: list[int] = []

    class Closing(Sender):
        def close(self) -> None:
            closed.append(id(self))
            super().close()

    made: list[Sender] = []

    def new_sender() -> Sender:
        made.append(Closing(Settings(region="us-east-1"), client=TwoAccounts()))
        return made[-1]

    monkeypatch.setattr(retry_later_module, "Sender", new_sender)
    monkeypatch.setattr(retry_later_module, "_HELD", threading.local())
    first = retry_later_module.held_sender()
    assert retry_later_module.held_sender() is first and closed == []
    monkeypatch.setenv("SQSDELAY_MAX_NATIVE_DELAY_SECONDS", "60")
    second = retry_later_module.held_sender()
    assert second is not first and closed == [id(first)]  # the replaced one, only
    assert retry_later_module.held_sender() is second and closed == [id(first)]
