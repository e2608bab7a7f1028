"""Queue naming rules (pure), the same as the NServiceBus SQS transport's.

Ported from `QueueCache.GetSqsQueueName` in Particular/NServiceBus.AmazonSQS
(src/NServiceBus.Transport.SQS/QueueCache.cs, commit 06dea948): the prefix is added only when
the name does not already start with it, the 80-character limit is checked on the prefixed
name, and every character other than a letter, digit, '-' or '_' becomes '-' (a trailing
`.fifo` is kept). Both sides must agree, or they would use different delay queues.
"""

import re
import unicodedata

from sqsdelay.core import quotas, wire_format
from sqsdelay.errors import InvalidMessage, InvalidQueueName

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


def is_fifo(name: str) -> bool:
    return name.endswith(wire_format.FIFO_SUFFIX)


def _owner_of(name: str) -> str | None:
    """Which queue of another destination `name` is, if it is one."""
    if is_fifo(name):
        for suffix, kind, back in (
            (wire_format.DELAY_QUEUE_SUFFIX, "standard", ""),
            (wire_format.FIFO_DELAY_QUEUE_SUFFIX, "FIFO", wire_format.FIFO_SUFFIX),
        ):
            if name.endswith(suffix):
                owner = name.removesuffix(suffix) + back
                return f"delay queue of the {kind} destination {owner!r}"
    elif name.endswith(wire_format.STAGING_QUEUE_SUFFIX):
        owner = name.removesuffix(wire_format.STAGING_QUEUE_SUFFIX) + wire_format.FIFO_SUFFIX
        return f"staging queue of the FIFO destination {owner!r}"
    return None


def destination_name(queue: str, prefix: str = "") -> str:
    """A destination queue: up to 80 characters, prefix included. A FIFO destination may not
    be named like another destination's delay queue, nor a standard one like a FIFO
    destination's staging queue (the naming rules would collide)."""
    name = physical_name(queue, prefix)
    owner = _owner_of(name)
    if owner is not None:
        raise InvalidQueueName(
            f"destination {name!r} is the name of the {owner}: a FIFO destination's name may "
            f"not end in {wire_format.DELAY_QUEUE_SUFFIX!r} or "
            f"{wire_format.FIFO_DELAY_QUEUE_SUFFIX!r}, nor a standard one's in "
            f"{wire_format.STAGING_QUEUE_SUFFIX!r}: choose another name"
        )
    return name


def delay_queue_of(destination: str) -> str:
    """The delay queue's name by the rule alone, unchecked (the cost report names what was
    billed)."""
    if is_fifo(destination):
        return (
            destination.removesuffix(wire_format.FIFO_SUFFIX) + wire_format.FIFO_DELAY_QUEUE_SUFFIX
        )
    return destination + wire_format.DELAY_QUEUE_SUFFIX


def delay_queue_name(destination: str) -> str:
    """The destination's delay queue: `<destination>-delay.fifo` (NServiceBus convention), or
    `<base>-delay-fifo.fifo` for a FIFO destination `<base>.fifo` (sqsdelay's own).

    Only a destination short enough has one (69 characters, both kinds); longer names (up to
    80) can still receive sends of 900 s or less, which do not go through it."""
    name = delay_queue_of(destination)
    if len(name) > quotas.MAX_QUEUE_NAME_LENGTH:
        raise InvalidQueueName(
            f"queue name {destination!r} has {len(destination)} characters; a destination "
            f"with a delay queue may have at most {wire_format.MAX_DESTINATION_NAME_LENGTH}, so "
            f"that {name!r} fits SQS's {quotas.MAX_QUEUE_NAME_LENGTH}-character limit "
            f"(delays of {quotas.MAX_NATIVE_DELAY_SECONDS} s or less need no delay queue)"
        )
    return name


def staging_queue_of(destination: str) -> str:
    """A FIFO destination's staging queue by the rule alone, unchecked (as `delay_queue_of`)."""
    return destination.removesuffix(wire_format.FIFO_SUFFIX) + wire_format.STAGING_QUEUE_SUFFIX


def staging_queue_name(destination: str) -> str:
    """A FIFO destination's staging queue, `<base>-fifo-staging` (standard, so that it takes
    a per-message DelaySeconds): the last hop waits there, and the worker forwards it."""
    if not is_fifo(destination):
        raise InvalidQueueName(f"{destination!r} is not a FIFO queue: it has no staging queue")
    if len(destination) > wire_format.MAX_DESTINATION_NAME_LENGTH:  # as for its delay queue
        raise InvalidQueueName(
            f"queue name {destination!r} has {len(destination)} characters; a FIFO destination "
            f"that takes delays may have at most {wire_format.MAX_DESTINATION_NAME_LENGTH}, so "
            f"that its delay and staging queues fit SQS's {quotas.MAX_QUEUE_NAME_LENGTH}-"
            "character limit (a send without delay needs neither)"
        )
    return staging_queue_of(destination)


def error_queue_name(error_queue: str, prefix: str = "") -> str:
    return physical_name(error_queue, prefix)


def destination_of_delay_queue(delay_queue: str) -> str:
    """Inverse of delay_queue_name (used by the Lambda handler with eventSourceARN)."""
    if delay_queue.endswith(wire_format.FIFO_DELAY_QUEUE_SUFFIX):
        suffix, back = wire_format.FIFO_DELAY_QUEUE_SUFFIX, wire_format.FIFO_SUFFIX
    elif delay_queue.endswith(wire_format.DELAY_QUEUE_SUFFIX):
        suffix, back = wire_format.DELAY_QUEUE_SUFFIX, ""
    else:
        raise InvalidQueueName(
            f"{delay_queue!r} is not a delay queue: its name must end in "
            f"{wire_format.DELAY_QUEUE_SUFFIX!r} (or {wire_format.FIFO_DELAY_QUEUE_SUFFIX!r})"
        )
    destination = delay_queue.removesuffix(suffix) + back
    if (
        not destination.removesuffix(back)
        or destination_name(destination) != destination
        or delay_queue_name(destination) != delay_queue
    ):
        raise InvalidQueueName(f"{delay_queue!r} is not a valid delay queue name")
    return destination


def destination_of_staging_queue(staging_queue: str) -> str:
    """Inverse of staging_queue_name."""
    base = staging_queue.removesuffix(wire_format.STAGING_QUEUE_SUFFIX)
    if base == staging_queue or not base:
        raise InvalidQueueName(
            f"{staging_queue!r} is not a staging queue: its name must end in "
            f"{wire_format.STAGING_QUEUE_SUFFIX!r}"
        )
    destination = base + wire_format.FIFO_SUFFIX
    if destination_name(destination) != destination:
        raise InvalidQueueName(f"{staging_queue!r} is not a valid staging queue name")
    return destination


# SQS's MessageGroupId: 1-128 characters, letters, digits and ASCII punctuation.
_GROUP_ID = re.compile(r"[\x21-\x7e]{1,128}")


def is_group_id(group_id: str) -> bool:
    return _GROUP_ID.fullmatch(group_id) is not None


def check_group_id(group_id: object, destination: str) -> str:
    """The group of a message, as SQS takes it: a FIFO destination's order, or a standard
    (fair) queue's tenant."""
    if not isinstance(group_id, str) or not is_group_id(group_id):
        shown = repr(group_id) if isinstance(group_id, str) and len(group_id) <= 200 else "it"
        if is_fifo(destination):
            raise InvalidMessage(
                f"FIFO destination {destination!r} needs a message group id (group_id= or "
                f"--group-id), and {shown} is not one: give 1-128 letters, digits or ASCII "
                "punctuation, e.g. the order or customer whose messages must stay in order"
            )
        raise InvalidMessage(
            f"the message group id {shown} for {destination!r} is not one SQS takes: give "
            "1-128 letters, digits or ASCII punctuation, e.g. the tenant of a fair queue"
        )
    return group_id
