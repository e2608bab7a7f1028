"""The registry of scheduled messages: DynamoDB requests and the rules that read their
answers (pure, no I/O). See docs/registry.md. Longer than most files (about 530 lines):
its requests and the rules that read their answers are one protocol, each half the
other's specification.

One item per message sent through a delay queue, keyed by destination and message id. Every
change of state is a conditional write, so a cancel, a reschedule and a hand-over racing
each other have exactly one winner:

- the sender writes the item (`scheduled`, not yet `sent`) before it sends, and marks it
  `sent` after; a second send with the same key is a duplicate only once the first was sent,
  so a sender that crashed in between may send again (the claim below keeps it to one
  delivery);
- the worker reads the items of a received batch at each hop (a cancel drops the message, a
  reschedule moves its due time) and, before a hand-over, claims the item: `scheduled` →
  `handed-over`, naming the SQS message and the receive (`attempt`) that claimed it, with a
  lease until that receive's batch is out of time. After its send it marks the item
  `delivered`. A later receive of that very SQS message may take the claim over only when the
  claim was not delivered and its lease ran out (the send failed or the worker died); a
  concurrent copy (SQS or an emulator handing the message to two receives) never wins, and any
  other SQS message is dropped;
- `cancel` and `reschedule` succeed only while the item is `scheduled`;
- a replay from the error queue (`sqsdelay.Replay`, docs/registry.md#replay) is a new
  generation: its token, new for each replay, may claim a `handed-over` item that no claim
  of that token holds, and is kept in the item (`replay`), so copies of the replay are
  duplicates again while older copies of the message stay dropped. A cancelled item stays
  cancelled;
- when the worker dead-letters a message it adds that SQS message's id to the item
  (`dead_lettered`, a set): a later receive of that SQS message (its delete failed) is dropped, not
  handed over, since its fate is the error queue and a replay of it is the way back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from sqsdelay.core.flows import Call, Fault, Flow
from sqsdelay.core.message_tags import TAG_ATTRIBUTE, TAG_INDEX
from sqsdelay.core.types import CancelOutcome
from sqsdelay.errors import RegistryError

State = Literal["scheduled", "handed-over", "cancelled"]
STATES: Final[tuple[State, ...]] = ("scheduled", "handed-over", "cancelled")
RecordRoute = Literal["delay-queue", "parked"]
# The global secondary index by destination and due time (`scheduled` lists from it).
DUE_INDEX: Final = "by-due"
# How long an item outlives its due time before DynamoDB's TTL removes it: `scheduled` and
# `cancel` can still answer for it for two weeks.
KEEP_AFTER_DUE_SECONDS: Final = 14 * 86_400
# BatchGetItem takes at most 100 keys.
MAX_BATCH_GET: Final = 100
# Items per Query page of `listed` (DynamoDB applies the state filter after this limit).
PAGE: Final = 100
# Faults after which the registry is backing off (the step holds what needs it).
SERVICE_FAULT_CODES: Final = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "AccessDeniedException",
        "ResourceNotFoundException",  # the table is missing
        "UnrecognizedClientException",
    }
)
BREAKER_KEY: Final = "dynamodb-registry"
# The attribute DynamoDB's time to live reads (epoch seconds).
TTL_ATTRIBUTE: Final = "expires_at"
# The table's problems that `install` can switch off in place.
TTL_OFF: Final = f"time to live is not enabled on {TTL_ATTRIBUTE}"
RECOVERY_OFF: Final = "point-in-time recovery is off"
# An older table, from before tags: untagged sends work; tagged ones and `cancel --tag` need
# it, and `install` adds it in place (a warning, not a problem).
TAG_INDEX_MISSING: Final = (
    f"no index {TAG_INDEX} by {TAG_ATTRIBUTE} (HASH): tagged sends and cancel --tag need it"
)


def iso_utc(epoch_ms: int) -> str:
    """A due time as printed: ISO 8601 in UTC, to the millisecond, with Z."""
    when = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def key(destination: str, message_id: str) -> dict[str, Any]:
    return {"id": {"S": f"{destination}/{message_id}"}}


@dataclass(frozen=True)
class Record:
    destination: str
    message_id: str
    due_ms: int
    state: State
    route: RecordRoute
    moved: bool = False  # rescheduled: the due time here overrides the message's own
    claimed_by: str = ""  # the SQS MessageId that claimed the hand-over
    attempt: str = ""  # the receive of it that claimed (`receive_key_of` its receipt handle)
    lease_ms: int = 0  # broker time until which that receive may still send
    delivered: bool = False  # the claiming receive's send succeeded
    replay: str = ""  # the replay token of the claim's generation ("" before any replay)
    dead_lettered: frozenset[str] = frozenset()  # SQS MessageIds sent to the error queue
    # What the console shows of the message (never its body or attribute values).
    size_bytes: int = 0
    attribute_names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # NAME=VALUE, sorted (core/message_tags.py)
    # The due time the send gave its messages (their sqsdelay.DueAt), kept through
    # reschedules, and the due times it was moved to (which a hop writes into the copies it
    # requeues): together, the due times a copy of this generation can carry. 0: written
    # before generations were told apart.
    send_due_ms: int = 0
    moved_dues: frozenset[int] = frozenset()

    def held_by_another_receive(self, sqs_message_id: str) -> bool:
        """Claimed by this SQS message but not delivered: a redelivery may take it over once
        the lease runs out (before that, the claiming receive may still be sending)."""
        return (
            self.state == "handed-over" and self.claimed_by == sqs_message_id and not self.delivered
        )

    def replayed_anew(self, replay: str | None) -> bool:
        """A handed-over record that a replay with this token may claim: a new generation
        of the message, not a copy of one already handed over."""
        return self.state == "handed-over" and bool(replay) and replay != self.replay

    def of_generation(self, carried_due_ms: int | None) -> bool:
        """Whether a copy carrying this due time is of the send this record describes. A
        copy of an earlier send of the id (cancelled, handed over, or replaced before it
        went out) is not: a record describes only the id's latest send, and following it,
        a cancelled copy was delivered in a new send's place. Unknown (no due time carried,
        an older record) counts as this generation, as before."""
        if not self.send_due_ms or carried_due_ms is None:
            return True
        return (
            carried_due_ms in (self.send_due_ms, self.due_ms) or carried_due_ms in self.moved_dues
        )

    def dead_lettered_as(self, sqs_message_id: str) -> bool:
        """This SQS message was dead-lettered by a worker: another receive of it is a copy
        whose delete failed, not a delivery still owed."""
        return sqs_message_id in self.dead_lettered

    def as_dict(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "destination": self.destination,
            "due_at": iso_utc(self.due_ms),
            "state": self.state,
            "route": self.route,
        }


def record_of(item: Mapping[str, Any]) -> Record | None:
    """A record from a DynamoDB item; None when the item is not one of ours."""
    try:
        state = item["state"]["S"]
        route = item.get("route", {}).get("S", "delay-queue")
        if state not in STATES or route not in ("delay-queue", "parked"):
            return None
        return Record(
            destination=item["destination"]["S"],
            message_id=item["message_id"]["S"],
            due_ms=int(item["due_ms"]["N"]),
            state=state,
            route=route,
            moved=bool(item.get("moved", {}).get("BOOL", False)),
            claimed_by=item.get("claimed_by", {}).get("S", ""),
            attempt=item.get("attempt", {}).get("S", ""),
            lease_ms=int(item.get("lease_ms", {}).get("N", "0")),
            delivered=bool(item.get("delivered", {}).get("BOOL", False)),
            replay=item.get("replay", {}).get("S", ""),
            dead_lettered=frozenset(item.get("dead_lettered", {}).get("SS", ())),
            size_bytes=int(item.get("size_bytes", {}).get("N", "0")),
            attribute_names=tuple(item.get("attribute_names", {}).get("SS", ())),
            tags=tuple(sorted(item.get("tags", {}).get("SS", ()))),
            send_due_ms=int(item.get("send_due_ms", {}).get("N", "0")),
            moved_dues=frozenset(int(n) for n in item.get("moved_dues", {}).get("NS", ())),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _expires(due_ms: int) -> dict[str, str]:
    return {"N": str(due_ms // 1000 + KEEP_AFTER_DUE_SECONDS)}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _faulted(fault: Fault | None) -> Fault | None:
    """A fault other than a failed condition (which is an answer)."""
    return fault if fault is not None and fault.code != "ConditionalCheckFailedException" else None


# -- the sender --------------------------------------------------------------------------


Put = Literal["written", "duplicate", "due-taken"]
# A new send of an id whose earlier send ended (cancelled, handed over) must not carry a due
# time that earlier send's copies may carry: a copy is told apart by it (`of_generation`).
_NEW_GENERATION: Final = (
    "#s <> :scheduled AND (attribute_not_exists(send_due_ms) OR send_due_ms <> :due) "
    "AND due_ms <> :due AND NOT contains(moved_dues, :due)"
)


def put(table: str, record: Record, now_ms: int, timeout: float | None) -> Flow[Put]:
    """Write a new record, not yet sent. `duplicate`: a record with this key is scheduled and
    was sent (send nothing). `due-taken`: the id's earlier send, which ended, had this due
    time (send it a millisecond later). A record scheduled but not sent (its sender failed
    in between) is written over: that sender's retry."""
    values: dict[str, Any] = {":scheduled": {"S": "scheduled"}, ":false": {"BOOL": False}}
    if record.send_due_ms:
        condition = f"(#s = :scheduled AND sent = :false) OR ({_NEW_GENERATION})"
        values[":due"] = _n(record.due_ms)
    else:  # its copies carry no due time (no room, NServiceBus mode): nothing to tell apart
        condition = "#s <> :scheduled OR sent = :false"
    params = {
        "TableName": table,
        "Item": item_of(record, now_ms),
        "ConditionExpression": f"attribute_not_exists(id) OR {condition}",
        "ExpressionAttributeNames": {"#s": "state"},
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    [reply] = yield [Call("dynamodb", "PutItem", params, timeout=timeout)]
    if (fault := _faulted(reply.fault)) is not None:
        raise RegistryError("PutItem", table, fault.code, fault.detail)
    if reply.fault is None:
        return "written"
    old = record_of(reply.fault.item or {})
    return "due-taken" if old is not None and old.state != "scheduled" else "duplicate"


def item_of(record: Record, now_ms: int) -> dict[str, Any]:
    """A new record's item: scheduled, not yet sent."""
    item = {
        **key(record.destination, record.message_id),
        "destination": {"S": record.destination},
        "message_id": {"S": record.message_id},
        "due_ms": _n(record.due_ms),
        "state": {"S": "scheduled"},
        "route": {"S": record.route},
        "sent": {"BOOL": False},
        "updated_ms": _n(now_ms),
        TTL_ATTRIBUTE: _expires(record.due_ms),
    }
    if record.send_due_ms:  # its copies carry it (a send with room for sqsdelay.DueAt)
        item["send_due_ms"] = _n(record.send_due_ms)
    if record.size_bytes:
        item["size_bytes"] = _n(record.size_bytes)
    if record.attribute_names:  # a string set may not be empty
        item["attribute_names"] = {"SS": sorted(record.attribute_names)}
    if record.tags:
        item["tags"] = {"SS": sorted(record.tags)}
    return item


def mark_sent(
    table: str, destination: str, message_id: str, route: str | None, timeout: float | None
) -> Flow[bool]:
    """After the send: later sends with this key are duplicates; `route`, how it went out
    when that is not what the record says (only then is the index written too). False when
    it failed (the message is sent all the same; a later send with the key sends again, and
    the claim keeps that to one delivery)."""
    params: dict[str, Any] = {
        "TableName": table,
        "Key": key(destination, message_id),
        "UpdateExpression": "SET sent = :true",
        "ConditionExpression": "attribute_exists(id)",
        "ExpressionAttributeValues": {":true": {"BOOL": True}},
    }
    if route is not None:
        params["UpdateExpression"] += ", #r = :route"
        params["ExpressionAttributeNames"] = {"#r": "route"}
        params["ExpressionAttributeValues"][":route"] = {"S": route}
    [reply] = yield [Call("dynamodb", "UpdateItem", params, timeout=timeout)]
    return reply.fault is None


# -- the worker --------------------------------------------------------------------------


@dataclass(frozen=True)
class Lookup:
    """The records of a batch by message id (absent: no record), and the ids whose lookup
    failed (`fault`: why)."""

    records: dict[str, Record]
    failed: frozenset[str]
    fault: Fault | None = None


def read(table: str, destination: str, ids: list[str], timeout: float | None) -> Flow[Lookup]:
    """BatchGetItem of the records of `ids` (eventually consistent: the claim is what is
    strongly consistent). Unprocessed keys count as failed."""
    unique = sorted(set(ids))
    if not unique:
        return Lookup({}, frozenset())
    chunks = [unique[i : i + MAX_BATCH_GET] for i in range(0, len(unique), MAX_BATCH_GET)]
    calls = [
        Call(
            "dynamodb",
            "BatchGetItem",
            {"RequestItems": {table: {"Keys": [key(destination, m) for m in chunk]}}},
            timeout=timeout,
        )
        for chunk in chunks
    ]
    replies = yield calls
    records: dict[str, Record] = {}
    failed: set[str] = set()
    fault: Fault | None = None
    for chunk, reply in zip(chunks, replies, strict=True):
        if reply.fault is not None:
            failed.update(chunk)
            fault = reply.fault
            continue
        for item in reply.response.get("Responses", {}).get(table, []):
            found = record_of(item)
            if found is not None and found.destination == destination:
                records[found.message_id] = found
        left = reply.response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
        for k in left:
            failed.add(str(k["id"]["S"]).split("/", 1)[-1])
            fault = fault or Fault("UnprocessedKeys", "throttled: keys left unprocessed")
    return Lookup(records, frozenset(failed), fault)


Claim = Literal["claimed", "cancelled", "duplicate", "moved", "in-hand", "failed"]


def receive_key_of(receipt_handle: str) -> str:
    """The key of one receive of a message (a record's `attempt`): every receive gets a new
    receipt handle, and a retried claim call of the same receive names the same key."""
    return hashlib.sha256(receipt_handle.encode()).hexdigest()[:24]


def claim_call(
    table: str,
    record: Record,
    sqs_message_id: str,
    attempt: str,
    now_ms: int,
    lease_ms: int,
    timeout: float,
    replay: str | None = None,
) -> Call:
    """The conditional write that makes a hand-over the winner: scheduled with the due time
    this hand-over was decided for; or already claimed by this very receive (a retried call);
    or claimed by another receive of this SQS message that did not deliver and whose lease
    ran out (its send failed, or its worker died). Items claimed before leases existed have
    no `lease_ms` and count as run out. A replay (`replay`, its token) may also claim a
    handed-over item whose generation is another token's (or none): it is a new delivery."""
    # A receive of an SQS message a worker dead-lettered never claims (the read drops it;
    # this holds when the read was stale). A missing attribute compares false, so NOT holds.
    condition = (
        "(NOT contains(dead_lettered, :mid)) AND ((#s = :scheduled AND due_ms = :due) OR "
        "(#s = :handed AND claimed_by = :mid AND (attempt = :attempt OR "
        "(NOT delivered = :true AND (attribute_not_exists(lease_ms) OR lease_ms < :now)))))"
    )
    update = (
        "SET #s = :handed, claimed_by = :mid, attempt = :attempt, "
        "lease_ms = :lease, delivered = :false, updated_ms = :now"
    )
    extra: dict[str, Any] = {}
    if replay:
        condition += " OR (#s = :handed AND (attribute_not_exists(replay) OR replay <> :replay))"
        update += ", replay = :replay"
        extra[":replay"] = {"S": replay}
    params = {
        "TableName": table,
        "Key": key(record.destination, record.message_id),
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#s": "state"},
        "ExpressionAttributeValues": {
            **extra,
            ":handed": {"S": "handed-over"},
            ":scheduled": {"S": "scheduled"},
            ":mid": {"S": sqs_message_id},
            ":attempt": {"S": attempt},
            ":due": _n(record.due_ms),
            ":now": _n(now_ms),
            ":lease": _n(lease_ms),
            ":true": {"BOOL": True},
            ":false": {"BOOL": False},
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    return Call("dynamodb", "UpdateItem", params, timeout=timeout)


def delivered_call(
    table: str, record: Record, sqs_message_id: str, attempt: str, timeout: float
) -> Call:
    """After the hand-over's send: the claim is delivered, and no later receive of the message
    may take it over (it is dropped as a duplicate instead)."""
    params = {
        "TableName": table,
        "Key": key(record.destination, record.message_id),
        "UpdateExpression": "SET delivered = :true",
        "ConditionExpression": "claimed_by = :mid AND attempt = :attempt",
        "ExpressionAttributeValues": {
            ":mid": {"S": sqs_message_id},
            ":attempt": {"S": attempt},
            ":true": {"BOOL": True},
        },
    }
    return Call("dynamodb", "UpdateItem", params, timeout=timeout)


def dead_lettered_call(table: str, record: Record, sqs_message_id: str, timeout: float) -> Call:
    """After the worker's send to the error queue: name the SQS message it dead-lettered, so
    that a receive of it that comes back (its delete failed) is dropped instead of taking its
    undelivered claim over, while the dead letter's replay (another SQS message, with a
    token) is delivered. Only an item that exists: a deleted one is not written again."""
    params = {
        "TableName": table,
        "Key": key(record.destination, record.message_id),
        "UpdateExpression": "ADD dead_lettered :mids",
        "ConditionExpression": "attribute_exists(#s)",
        "ExpressionAttributeNames": {"#s": "state"},
        "ExpressionAttributeValues": {":mids": {"SS": [sqs_message_id]}},
    }
    return Call("dynamodb", "UpdateItem", params, timeout=timeout)


def claimed(fault: Fault | None, sqs_message_id: str) -> tuple[Claim, Record | None]:
    """Read a claim's answer, with the record as it was when the condition failed: `moved`
    when it was rescheduled meanwhile (the next receive decides again), `in-hand` when another
    receive of this SQS message holds the claim (release and retry after its lease),
    `failed` when the registry did not answer (hold and retry)."""
    if fault is None:
        return "claimed", None
    if fault.code != "ConditionalCheckFailedException":
        return "failed", None
    now = record_of(fault.item or {})
    if now is None or now.state == "cancelled":
        return "cancelled", now  # gone (a manual delete) or cancelled: never delivered
    if now.dead_lettered_as(sqs_message_id):
        return "duplicate", now  # its fate is the error queue: replay it from there
    if now.held_by_another_receive(sqs_message_id):
        return "in-hand", now
    if now.state == "handed-over":
        return "duplicate", now
    return "moved", now


# -- cancel, reschedule, list ------------------------------------------------------------

Change = Literal["done", "too-late", "cancelled", "unknown"]


def _change(
    table: str,
    destination: str,
    message_id: str,
    update: str,
    values: dict[str, Any],
    timeout: float | None,
) -> Flow[tuple[Change, Record | None]]:
    params = {
        "TableName": table,
        "Key": key(destination, message_id),
        "UpdateExpression": update,
        "ConditionExpression": "#s = :scheduled",
        "ExpressionAttributeNames": {"#s": "state"},
        "ExpressionAttributeValues": {":scheduled": {"S": "scheduled"}, **values},
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    [reply] = yield [Call("dynamodb", "UpdateItem", params, timeout=timeout)]
    if (fault := _faulted(reply.fault)) is not None:
        raise RegistryError("UpdateItem", table, fault.code, fault.detail)
    if reply.fault is None:
        return "done", record_of(reply.response.get("Attributes", {}))
    old = record_of(reply.fault.item or {})
    if old is None:
        return "unknown", None
    return ("cancelled" if old.state == "cancelled" else "too-late"), old


def cancel(
    table: str, destination: str, message_id: str, now_ms: int, timeout: float | None
) -> Flow[tuple[CancelOutcome, Record | None]]:
    """scheduled → cancelled. `cancelled` also when it already was (cancelling twice is
    fine); `too-late` once handed over; `unknown` without a record."""
    update = "SET #s = :cancelled, updated_ms = :now"
    values = {":cancelled": {"S": "cancelled"}, ":now": _n(now_ms)}
    change, record = yield from _change(table, destination, message_id, update, values, timeout)
    if change in ("done", "cancelled"):
        return "cancelled", record
    return ("too-late" if change == "too-late" else "unknown"), record


def reschedule(
    table: str, destination: str, message_id: str, due_ms: int, now_ms: int, timeout: float | None
) -> Flow[tuple[Change, Record | None]]:
    """Move the due time of a scheduled record (`moved`: the worker's next read follows it),
    and add it to the due times its copies may carry (`moved_dues`)."""
    update = (
        f"SET due_ms = :due, moved = :true, updated_ms = :now, {TTL_ATTRIBUTE} = :expires "
        "ADD moved_dues :dues"
    )
    values = {
        ":due": _n(due_ms),
        ":dues": {"NS": [str(due_ms)]},
        ":true": {"BOOL": True},
        ":now": _n(now_ms),
        ":expires": _expires(due_ms),
    }
    return (yield from _change(table, destination, message_id, update, values, timeout))


def query_params(
    table: str,
    destination: str,
    *,
    due_before_ms: int | None,
    state: State | None,
    page_size: int,
    start: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """One page of the index query: soonest first, never a scan."""
    names = {"#d": "destination"}
    values: dict[str, Any] = {":d": {"S": destination}}
    condition = "#d = :d"
    if due_before_ms is not None:
        condition += " AND due_ms < :before"
        values[":before"] = _n(due_before_ms)
    params: dict[str, Any] = {
        "TableName": table,
        "IndexName": DUE_INDEX,
        "KeyConditionExpression": condition,
        "ScanIndexForward": True,
        "Limit": page_size,
    }
    if state is not None:
        params["FilterExpression"] = "#s = :state"
        names["#s"] = "state"
        values[":state"] = {"S": state}
    params["ExpressionAttributeNames"] = names
    params["ExpressionAttributeValues"] = values
    if start:
        params["ExclusiveStartKey"] = dict(start)
    return params


def listed(
    table: str,
    destination: str,
    *,
    due_before_ms: int | None,
    state: State | None,
    limit: int,
    timeout: float | None,
) -> Flow[list[Record]]:
    """Up to `limit` records, soonest first, page by page."""
    out: list[Record] = []
    start: Mapping[str, Any] | None = None
    while len(out) < limit:
        params = query_params(
            table,
            destination,
            due_before_ms=due_before_ms,
            state=state,
            page_size=PAGE,
            start=start,
        )
        [reply] = yield [Call("dynamodb", "Query", params, timeout=timeout)]
        if reply.fault is not None:
            raise RegistryError("Query", table, reply.fault.code, reply.fault.detail)
        out += [r for i in reply.response.get("Items", []) if (r := record_of(i)) is not None]
        start = reply.response.get("LastEvaluatedKey")
        if not start:
            break
    return out[:limit]


# -- the table ---------------------------------------------------------------------------


def create_table_request(table: str) -> dict[str, Any]:
    """On-demand, keyed by `id`, with the index by destination and due time. DynamoDB
    encrypts every table at rest (with an AWS owned key: the records hold no bodies)."""
    return {
        "TableName": table,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": "id", "AttributeType": "S"},
            {"AttributeName": "destination", "AttributeType": "S"},
            {"AttributeName": "due_ms", "AttributeType": "N"},
            {"AttributeName": TAG_ATTRIBUTE, "AttributeType": "S"},
        ],
        "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": DUE_INDEX,
                "KeySchema": [
                    {"AttributeName": "destination", "KeyType": "HASH"},
                    {"AttributeName": "due_ms", "KeyType": "RANGE"},
                ],
                # What `scheduled` prints, no more: the sender's second write (`sent`) and
                # the claim's `claimed_by` then cost no index write.
                "Projection": {
                    "ProjectionType": "INCLUDE",
                    "NonKeyAttributes": ["message_id", "state", "route"],
                },
            },
            tag_index(),
        ],
    }


def tag_index() -> dict[str, Any]:
    """The sparse index of tag items (`core/message_tags.py`): only they carry `tag`."""
    return {
        "IndexName": TAG_INDEX,
        "KeySchema": [{"AttributeName": TAG_ATTRIBUTE, "KeyType": "HASH"}],
        "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["message_id"]},
    }


def add_tag_index_request(table: str) -> dict[str, Any]:
    """UpdateTable that adds the tag index to a table made before tags (`install`)."""
    return {
        "TableName": table,
        "AttributeDefinitions": [{"AttributeName": TAG_ATTRIBUTE, "AttributeType": "S"}],
        "GlobalSecondaryIndexUpdates": [{"Create": tag_index()}],
    }


def _key_schema(schema: list[Mapping[str, str]]) -> set[tuple[str, str]]:
    return {(k["AttributeName"], k["KeyType"]) for k in schema}


def table_problems(
    description: Mapping[str, Any],
    ttl: Mapping[str, Any],
    backups: Mapping[str, Any],
) -> list[str]:
    """What is wrong with an existing table (DescribeTable, DescribeTimeToLive and
    DescribeContinuousBackups answers)."""
    problems: list[str] = []
    keys = _key_schema(description.get("KeySchema", []))
    if keys != {("id", "HASH")}:
        problems.append(f"key schema is {sorted(keys)}, not id (HASH)")
    index = next(
        (i for i in description.get("GlobalSecondaryIndexes", []) if i["IndexName"] == DUE_INDEX),
        None,
    )
    wanted = {("destination", "HASH"), ("due_ms", "RANGE")}
    if index is None or _key_schema(index["KeySchema"]) != wanted:
        problems.append(f"no index {DUE_INDEX} by destination (HASH) and due_ms (RANGE)")
    tagged = next(
        (i for i in description.get("GlobalSecondaryIndexes", []) if i["IndexName"] == TAG_INDEX),
        None,
    )
    if tagged is None or _key_schema(tagged["KeySchema"]) != {(TAG_ATTRIBUTE, "HASH")}:
        problems.append(TAG_INDEX_MISSING)
    mode = description.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED")
    if mode != "PAY_PER_REQUEST":
        problems.append(f"billing mode is {mode}, not PAY_PER_REQUEST (on-demand)")
    spec = ttl.get("TimeToLiveDescription", {})
    if spec.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING") or (
        spec.get("AttributeName") != TTL_ATTRIBUTE
    ):
        problems.append(TTL_OFF)
    pitr = backups.get("ContinuousBackupsDescription", {}).get("PointInTimeRecoveryDescription", {})
    if pitr.get("PointInTimeRecoveryStatus") != "ENABLED":
        problems.append(RECOVERY_OFF)
    return problems
