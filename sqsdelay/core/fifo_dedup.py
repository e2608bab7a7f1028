"""The deduplication id of a send into a FIFO destination, the whole rule (pure): the
direct send's (`direct_key`), the key a hand-over into the staging queue leaves for the
forward (`staging_key_attributes`), and the forward's choice among them (`forward_key`).
Every copy of one send has one key, so SQS drops the copies within its five minutes; a new
send of the same id has another, so SQS never drops it (docs/fifo-destinations.md).

The values are part of the wire format: a worker of another version must derive the same
key from the same copy, so a key function here is never changed, only added beside.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from sqsdelay.core import identity, message_shape, wire_format
from sqsdelay.core.types import Attributes

DEDUP_ATTRIBUTE = wire_format.DEDUPLICATION_ID_ATTRIBUTE


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def direct_key(message_id: str, due_ms: int, given: str | None) -> str:
    """A send at once into a FIFO destination: the caller's id (`deduplication_id=`), else the
    message id and the send's due time."""
    return (
        forward_dedup_id_given(given) if given is not None else forward_dedup_id(message_id, due_ms)
    )


def staging_key_attributes(
    attributes: Attributes, due_ms: int, claimed_by: str | None
) -> Iterator[Attributes]:
    """What a hand-over into the staging queue adds for the forward's key, the first that
    fits taken: the due time and, when the hand-over claims its registry record
    (`claimed_by`: the SQS MessageId that claims), the claim's key as
    `sqsdelay.DeduplicationId` (a caller's own, already there, is kept); else the due time
    alone. `attributes` are what the hand-over carries besides."""
    with_due = {**attributes, wire_format.DUE_AT_ATTRIBUTE: message_shape.number_attribute(due_ms)}
    ident = identity.registry_id(attributes)
    if claimed_by and ident and DEDUP_ATTRIBUTE not in attributes:
        key = forward_dedup_id_of_claim(ident, due_ms, claimed_by)
        yield {**with_due, DEDUP_ATTRIBUTE: message_shape.string_attribute(key)}
    yield with_due


def forward_key(
    message_id: str, body: str, attributes: Attributes, due_ms: int | None
) -> tuple[str, str | None]:
    """The forward's MessageDeduplicationId, from what the staging message carries, and why a
    carried `sqsdelay.DeduplicationId` was ignored (None when it was not): the carried id (a
    caller's, or a claim's), else the id and the send's due time, else (no room for the due
    time) the id and what every copy carries unchanged. A replay's (`sqsdelay.Replay`) has
    its token in the key."""
    replay = message_shape.string_value(attributes, wire_format.REPLAY_ATTRIBUTE)
    given, ignored = _given(attributes)
    if given is not None:
        return forward_dedup_id_given(given, replay), ignored
    if due_ms is not None and replay:
        return forward_dedup_id_of_replay(message_id, due_ms, replay), ignored
    if due_ms is not None:
        return forward_dedup_id(message_id, due_ms), ignored
    return forward_dedup_id_by_content(message_id, body, attributes), ignored


def _given(attributes: Attributes) -> tuple[str | None, str | None]:
    """The deduplication id a staging message carries, or why it is not used: one SQS would
    refuse (a producer's own, or mangled) must not stop the forward, which then takes
    sqsdelay's own key, as for a message sent without one."""
    value = attributes.get(DEDUP_ATTRIBUTE)
    if value is None:
        return None, None
    text = value.get("StringValue")
    if isinstance(text, str) and identity.is_message_id(text):
        return text, None
    shown = repr(text[:40]) if isinstance(text, str) else f"a {value.get('DataType')!r} value"
    return None, (
        f"{DEDUP_ATTRIBUTE} {shown} is not 1 to 128 letters, digits "
        "or ASCII punctuation: forwarded under sqsdelay's own deduplication id"
    )


# -- the keys ------------------------------------------------------------------------------


def forward_dedup_id(message_id: str, due_ms: int) -> str:
    """The deduplication id of one send into a FIFO destination (at once, or forwarded from
    its staging queue): the id and the send's due time in epoch ms (`sqsdelay.DueAt`). Every
    copy of that send (a retried hand-over, a redelivered forward, a lost answer) has the
    same one; a new send of the same id has a new due time, so it is not dropped."""
    return _sha256(f"sqsdelay|{message_id}|{due_ms}")


def forward_dedup_id_of_claim(message_id: str, due_ms: int, claimed_by: str) -> str:
    """The deduplication id of a hand-over into a FIFO destination's staging queue that
    claimed its registry record (`claimed_by`: the SQS MessageId that claims). Each
    generation of an id is claimed by one SQS message, whose retried hand-overs share the
    key; a direct send of the id, or another generation due at the same millisecond (a
    send-now of a parked copy beside a send of the id at once, or a send and a reschedule
    with one `at=`), has another key and is not dropped. Found by the whole-way model:
    with `forward_dedup_id` the later of two such sends was lost inside SQS's five
    minutes while its record said delivered."""
    return _sha256(f"sqsdelay|{message_id}|{due_ms}|claim:{claimed_by}")


def forward_dedup_id_of_replay(message_id: str, due_ms: int, replay: str) -> str:
    """`forward_dedup_id` of a replayed message (`sqsdelay.Replay`): a replay keeps its due
    time, so without its token it had its first delivery's key, and a replay within SQS's
    five minutes of that forward was dropped by the FIFO destination. Copies of one replay
    share the token, so they still share the key."""
    return _sha256(f"sqsdelay|{message_id}|{due_ms}|replay:{replay}")


def forward_dedup_id_given(dedup_id: str, replay: str | None = None) -> str:
    """The deduplication id of a send into a FIFO destination that named one
    (`deduplication_id=`, carried as `sqsdelay.DeduplicationId`): that id itself, on the
    direct send and on the forward alike, so that two sends with one id (or a send of
    taskiq-aio-sqs's own, which uses the task id) that reach the destination within SQS's
    five minutes arrive once, whatever their routes and delays. A replay's is the id and
    its token, hashed: SQS would drop a replay under the caller's id within five minutes
    of its first delivery, and copies of one replay share the token."""
    if not replay:
        return dedup_id
    return _sha256(f"sqsdelay|dedup:{dedup_id}|replay:{replay}")


def forward_dedup_id_by_content(message_id: str, body: str, attributes: Attributes) -> str:
    """The forward's deduplication id when the staging message has no room for its due time
    (eight attributes of the caller's): the id, the body and the attributes, which every copy
    of one send carries unchanged. A new send of the same id with the same body and
    attributes within five minutes is dropped, as with a bare id; one that differs in either
    (a Celery or Dramatiq retry counts its retries in the body) is not."""
    return _sha256(f"sqsdelay|{message_id}|content:{_content_digest(body, attributes)}")


def _content_digest(body: str, attributes: Attributes) -> str:
    """Length-prefixed, so that no two contents read the same; names sorted, as SQS does not
    keep their order."""
    digest = hashlib.sha256()

    def part(data: bytes) -> None:
        digest.update(b"%d:" % len(data))
        digest.update(data)

    part(body.encode())
    for name in sorted(attributes):
        value = attributes[name]
        part(name.encode())
        part(value["DataType"].encode())
        if "BinaryValue" in value:  # bytes, from boto3 and from a Lambda event alike
            part(b"B" + value["BinaryValue"])
        else:
            part(b"S" + value.get("StringValue", "").encode())
    return digest.hexdigest()
