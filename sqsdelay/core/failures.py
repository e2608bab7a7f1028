"""Which failures count against a message, and the in-memory record of them (pure).

A message is dead-lettered for its own faults only. Redeliveries caused by a destination
outage, throttling, a missing queue, denied access or a crash raise SQS's
`ApproximateReceiveCount`, so that count cannot tell a good message from a bad one; sqsdelay
counts instead the sends that SQS refused because of the message itself.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

# Per-entry SendMessageBatch errors that describe the message, not the environment (SQS API
# reference, SendMessageBatch and its common errors). Anything else (throttling, access, a
# missing queue, KMS, the service itself) is retried with backoff for as long as it lasts.
MESSAGE_FAULT_CODES = frozenset(
    {
        "InvalidMessageContents",
        "InvalidParameterValue",
        "InvalidParameterCombination",
        "InvalidAttributeName",
        "InvalidAttributeValue",
        "MissingParameter",
        "MessageTooLong",
        "UnsupportedOperation",
    }
)


def is_message_fault(code: str) -> bool:
    return code in MESSAGE_FAULT_CODES


@dataclass(frozen=True)
class Record:
    own_failures: int = 0
    last_error: str | None = None


class FailureLog:
    """Failures per SQS MessageId (a redelivery keeps its MessageId), bounded in size.

    Kept in memory: after a restart a bad message gets up to SQSDELAY_MAX_ATTEMPTS more
    tries, which costs a little and never loses a good message.
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self._records: OrderedDict[str, Record] = OrderedDict()
        self._capacity = capacity

    def get(self, message_id: str) -> Record:
        return self._records.get(message_id, Record())

    def record(self, message_id: str, error: str, *, message_fault: bool) -> Record:
        old = self.get(message_id)
        new = Record(old.own_failures + int(message_fault), error)
        self._records[message_id] = new
        self._records.move_to_end(message_id)
        while len(self._records) > self._capacity:
            self._records.popitem(last=False)
        return new

    def forget(self, message_id: str) -> None:
        self._records.pop(message_id, None)
