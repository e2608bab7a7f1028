"""A message's identity: its id, and every id and deduplication key derived from it (pure),
but a FIFO destination's, whose whole rule is `fifo_dedup.py`'s.

Each key is one function, named for the hop that sends it, with the property it guarantees.
The values are part of the wire format: a worker of another version must derive the same
key from the same copy, so a function here is never changed, only added beside.

SQS's limits for a MessageGroupId or MessageDeduplicationId: 1 to 128 letters, digits and
ASCII punctuation. Every key below is a SHA-256 hex digest (64 characters) or, for a
message id or a caller's deduplication id, checked against those limits.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Final

from sqsdelay.core.types import Attributes
from sqsdelay.core.wire_format import MESSAGE_ID_ATTRIBUTE
from sqsdelay.errors import InvalidInput, InvalidMessage

# A message id is the FIFO group and deduplication id of its delay-queue messages: SQS's rule.
_MESSAGE_ID: Final = re.compile(
    r"[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}", re.ASCII
)
# Scheduler's schedule names are at most 64 characters: a prefix and 48 hex digits.
_SCHEDULE_PREFIX: Final = "sqsdelay-"
_SCHEDULE_DIGITS: Final = 48


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def is_message_id(text: str) -> bool:
    """Whether SQS takes `text` as a MessageGroupId or MessageDeduplicationId."""
    return _MESSAGE_ID.fullmatch(text) is not None


def check_message_id(message_id: str) -> str:
    """A caller's message id, as given: it becomes the delay-queue group and the registry's
    key, so it must be a valid MessageGroupId."""
    if not is_message_id(message_id):
        raise InvalidInput(
            f"the message id {message_id[:140]!r} is not 1 to 128 letters, digits or "
            "punctuation (it is the FIFO group id of its delay-queue messages): pick a key "
            "such as an order number or a UUID"
        )
    return message_id


def check_deduplication_id(dedup_id: object) -> str:
    """A caller's deduplication id, as given: SQS's MessageDeduplicationId of the FIFO
    destination, so it must be one SQS takes."""
    if not isinstance(dedup_id, str) or not is_message_id(dedup_id):
        shown = repr(dedup_id[:140]) if isinstance(dedup_id, str) else type(dedup_id).__name__
        raise InvalidMessage(
            f"the deduplication id {shown} is not 1 to 128 letters, digits or ASCII "
            "punctuation (SQS's MessageDeduplicationId): give the key a duplicate shares, "
            "such as a task or order id, or the SHA-256 hex digest of a longer one"
        )
    return dedup_id


def new_message_id() -> str:
    """The id of a message sent without one: random, 32 hex digits."""
    return uuid.uuid4().hex


def send_dedup_id(message_id: str, now: float) -> str:
    """The deduplication id of a send into a delay queue: the id and the send's clock
    reading. Stable across botocore's retries of one request (the request is built once),
    new for a new send of the same id (a Celery retry), so SQS's five minutes never swallow
    one. `now` is hashed as Python prints it (`1700000000.25`)."""
    return _sha256(f"{message_id}|{now}")


def send_dedup_id_of_due(message_id: str, now: float, due_ms: int) -> str:
    """`send_dedup_id` with the send's due time: two sends of one id at one clock reading
    (a frozen test clock; a send moved a millisecond later by `registry.put`) are two sends
    when their due times differ, and a retried request is still one."""
    return _sha256(f"{message_id}|{now}|{due_ms}")


def requeue_dedup_id(received_dedup_id: str, sqs_message_id: str) -> str:
    """The deduplication id of a requeue into the delay queue: from the received message's
    own deduplication id and its SQS MessageId. A retried requeue of the same physical
    message (its delete failed) within five minutes is dropped by FIFO deduplication, while
    every new cycle (a new SQS MessageId) gets a fresh id."""
    return _sha256(f"{received_dedup_id}|{sqs_message_id}")


def requeue_group_id(received_group_id: str | None, sqs_message_id: str) -> str:
    """A requeue stays in its original's message group (so SQS cannot hand it out while the
    original may still come back); a message that had none takes its SQS MessageId."""
    return received_group_id or sqs_message_id


def schedule_name(delay_queue: str, message_id: str) -> str:
    """A parked message's schedule: one name per message and delay queue, from the id `send`
    printed, so a retried create after a crash meets its own schedule and `cancel` finds it
    from that id alone."""
    return _SCHEDULE_PREFIX + _sha256(f"{delay_queue}|{message_id}")[:_SCHEDULE_DIGITS]


def park_dedup_id(message_id: str, due_ms: int) -> str:
    """The deduplication id of Scheduler's send back into the delay queue: the id and its due
    time, so a second invocation of one schedule within five minutes is dropped."""
    return _sha256(f"parked|{message_id}|{due_ms}")


def replay_dedup_id(error_message_id: str) -> str:
    """The group and deduplication id of a replay from the error queue: from the error-queue
    message's SQS MessageId, so a replay that dies half-way and is run again within five
    minutes does not send it twice."""
    return _sha256(f"replay|{error_message_id}")


def registry_id(attributes: Attributes) -> str | None:
    """The key of a message's registry record: the id `send` printed, carried in
    NServiceBus.MessageId; None for a message without a valid one (a foreign message)."""
    value = attributes.get(MESSAGE_ID_ATTRIBUTE)
    text = value.get("StringValue") if value else None
    return text if isinstance(text, str) and is_message_id(text) else None
