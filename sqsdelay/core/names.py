"""Queue naming rules (pure), the same as the NServiceBus SQS transport's.

Ported from `QueueCache.GetSqsQueueName` in Particular/NServiceBus.AmazonSQS
(src/NServiceBus.Transport.SQS/QueueCache.cs, commit 06dea948): the prefix is added only when
the name does not already start with it, the 80-character limit is checked on the prefixed
name, and every character other than a letter, digit, '-' or '_' becomes '-' (a trailing
`.fifo` is kept). Both sides must agree, or they would use different delay queues.
"""

import re
import unicodedata

from sqsdelay.core import quotas, wirenames
from sqsdelay.errors import InvalidQueueName

_SQS_NAME = re.compile(r"[A-Za-z0-9_-]+")
_FIFO = ".fifo"


def _kept(c: str) -> bool:
    # .NET's char.IsLetterOrDigit: Unicode letters (L*) and decimal digits (Nd).
    category = unicodedata.category(c)
    return category.startswith("L") or category == "Nd" or c in "-_"


def prefixed(name: str, prefix: str) -> str:
    """The prefix is added only when the name does not already start with it."""
    return name if prefix and name.startswith(prefix) else prefix + name


def physical_name(name: str, prefix: str = "") -> str:
    """The SQS queue name NServiceBus uses for `name` with this prefix. Idempotent."""
    if not name or not name.strip():
        raise InvalidQueueName("queue name is empty: give 1-80 characters")
    full = prefixed(name, prefix)
    if len(full) > quotas.MAX_QUEUE_NAME_LENGTH:
        raise InvalidQueueName(
            f"queue name {full!r} has {len(full)} characters with the prefix; SQS allows "
            f"{quotas.MAX_QUEUE_NAME_LENGTH}: use a shorter name or prefix"
        )
    keep = len(_FIFO) if full.endswith(_FIFO) else 0
    head, tail = full[: len(full) - keep], full[len(full) - keep :]
    sanitized = "".join(c if _kept(c) else "-" for c in head) + tail
    if not _SQS_NAME.fullmatch(sanitized[: len(head)]):
        # NServiceBus keeps non-ASCII letters, which SQS then refuses: say so before sending.
        raise InvalidQueueName(
            f"queue name {name!r} becomes {sanitized!r}, which SQS refuses: queue names "
            "may only use A-Z, a-z, 0-9, '_' and '-' (other ASCII characters become '-')"
        )
    return sanitized


def destination_name(queue: str, prefix: str = "") -> str:
    """A destination (standard) queue: up to 80 characters, prefix included."""
    name = physical_name(queue, prefix)
    if name.endswith(_FIFO):
        raise InvalidQueueName(
            f"destination {name!r} is a FIFO queue name; destinations are standard queues "
            "(SQS takes no per-message delay on FIFO queues)"
        )
    return name


def delay_queue_name(destination: str) -> str:
    """The destination's delay queue: `<destination>-delay.fifo` (NServiceBus convention).

    Only a destination of at most 69 characters has one; longer names (up to 80) can still
    receive sends of 900 s or less, which go straight to them."""
    name = destination + wirenames.DELAY_QUEUE_SUFFIX
    if len(name) > quotas.MAX_QUEUE_NAME_LENGTH:
        raise InvalidQueueName(
            f"queue name {destination!r} has {len(destination)} characters; a destination "
            f"with a delay queue may have at most {wirenames.MAX_DESTINATION_NAME_LENGTH}, so "
            f"that {name!r} fits SQS's {quotas.MAX_QUEUE_NAME_LENGTH}-character limit "
            f"(delays of {quotas.MAX_NATIVE_DELAY_SECONDS} s or less need no delay queue)"
        )
    return name


def error_queue_name(error_queue: str, prefix: str = "") -> str:
    return physical_name(error_queue, prefix)


def destination_of_delay_queue(delay_queue: str) -> str:
    """Inverse of delay_queue_name (used by the Lambda handler with eventSourceARN)."""
    if not delay_queue.endswith(wirenames.DELAY_QUEUE_SUFFIX):
        raise InvalidQueueName(
            f"{delay_queue!r} is not a delay queue: its name must end in "
            f"{wirenames.DELAY_QUEUE_SUFFIX!r}"
        )
    destination = delay_queue[: -len(wirenames.DELAY_QUEUE_SUFFIX)]
    if destination_name(destination) != destination:
        raise InvalidQueueName(f"{delay_queue!r} is not a valid delay queue name")
    return delay_queue_name(destination)[: -len(wirenames.DELAY_QUEUE_SUFFIX)]
