"""Queue naming rules (pure)."""

import re

from sqsdelay import limits
from sqsdelay.errors import InvalidQueueName

_NAME = re.compile(r"[A-Za-z0-9_-]+")


def _check(name: str, what: str, max_length: int) -> None:
    if not name or not _NAME.fullmatch(name):
        raise InvalidQueueName(
            f"{what} {name!r} is not a valid SQS queue name: use 1-{max_length} characters "
            "of A-Z, a-z, 0-9, '_' and '-'"
        )
    if len(name) > max_length:
        raise InvalidQueueName(
            f"{what} {name!r} has {len(name)} characters; at most {max_length} are allowed "
            f"so that {name + limits.DELAY_QUEUE_SUFFIX!r} fits SQS's "
            f"{limits.MAX_QUEUE_NAME_LENGTH}-character limit"
        )


def destination_name(queue: str, prefix: str = "") -> str:
    """Full destination queue name: `<prefix><queue>`, validated so a delay queue fits."""
    name = prefix + queue
    _check(name, "queue name", limits.MAX_DESTINATION_NAME_LENGTH)
    return name


def delay_queue_name(destination: str) -> str:
    """The destination's delay queue: `<destination>-delay.fifo` (NServiceBus convention)."""
    _check(destination, "queue name", limits.MAX_DESTINATION_NAME_LENGTH)
    return destination + limits.DELAY_QUEUE_SUFFIX


def error_queue_name(error_queue: str, prefix: str = "") -> str:
    name = prefix + error_queue
    _check(name, "error queue name", limits.MAX_QUEUE_NAME_LENGTH)
    return name


def destination_of_delay_queue(delay_queue: str) -> str:
    """Inverse of delay_queue_name (used by the Lambda handler with eventSourceARN)."""
    if not delay_queue.endswith(limits.DELAY_QUEUE_SUFFIX):
        raise InvalidQueueName(
            f"{delay_queue!r} is not a delay queue: its name must end in "
            f"{limits.DELAY_QUEUE_SUFFIX!r}"
        )
    destination = delay_queue[: -len(limits.DELAY_QUEUE_SUFFIX)]
    _check(destination, "queue name", limits.MAX_DESTINATION_NAME_LENGTH)
    return destination
