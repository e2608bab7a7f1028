"""Processing a message once (pure): its stable key, and the guard's record in DynamoDB, laid
out as AWS Lambda Powertools' idempotency utility lays out its own (`DynamoDBPersistenceLayer`
of aws-lambda-powertools 3.x, `persistence/base.py` and `persistence/dynamodb.py`), so that
our guard and Powertools read each other's records in one table.

The key. SQS gives every send a new MessageId, and every hop of a delayed message is a send,
so the key is sqsdelay's own id (`NServiceBus.MessageId`, on every delay-queue hop and every
`retry_later`) with the retry number (`sqsdelay.Attempt`): a duplicate of one hop has both,
a retry is a new attempt and runs again. For a message sqsdelay did not send, the caller
names the key. The key's data is `{"attempt": ..., "id": ...}`, which Powertools' JMESPath
`POWERTOOLS_KEY_JMESPATH` selects from a Lambda SQS record; the record's id is
`<prefix>#<md5 of that data as sorted JSON>`, Powertools' `_get_hashed_idempotency_key`.
A replayed message (`sqsdelay.Replay`, docs/consumers.md#replay) adds `"replay": <token>`:
a replay is a new delivery and runs again, however its first delivery ended. Without a
token the data is as it always was, so the keys of records written before stay the same.

The states (Powertools' too): a first run writes INPROGRESS (with an in-progress expiry:
after a crash the message may run again once it passes), a success writes COMPLETED with the
result, a failure deletes the record (the message's next delivery runs again), and a record
past its expiry counts as absent (EXPIRED; DynamoDB's TTL removes it later).

The guard's three steps (claim, complete, release) are flows (`core/flows.py`): the sync
guard drives them with boto3, the async one with aioboto3 (`aws/guard.py`), so both make the
same requests and read the answers with the same rules.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

from sqsdelay.core import wire_format
from sqsdelay.core.consumer_message import ConsumerMessage
from sqsdelay.core.flows import Call, Fault, Flow
from sqsdelay.errors import (
    ConfigError,
    GuardError,
    GuardInProgress,
    GuardTableMissing,
    InvalidInput,
    SqsDelayError,
)
from sqsdelay.logs import get_logger

log = get_logger("sqsdelay.guard")
T = TypeVar("T")

INPROGRESS: Final = "INPROGRESS"
COMPLETED: Final = "COMPLETED"
EXPIRED: Final = "EXPIRED"
# Covers every route's duplicate window, the longest being a parked message without the
# registry: Scheduler retries an invocation for up to 24 h, then one last cycle (docs/consumers.md).
DEFAULT_EXPIRES_AFTER_SECONDS: Final = 90_000
# How long a run may hold a message before a copy may run it again (a crash in progress).
DEFAULT_IN_PROGRESS_SECONDS: Final = 300
_CONDITION_FAILED: Final = "ConditionalCheckFailedException"
_MISSING_TABLE: Final = frozenset({"ResourceNotFoundException"})
_ACCESS_DENIED: Final = frozenset({"AccessDeniedException", "AccessDenied"})
# Powertools' attribute names (DynamoDBPersistenceLayer's defaults).
KEY_ATTR: Final = "id"
EXPIRY_ATTR: Final = "expiration"  # epoch seconds; the table's TTL attribute
IN_PROGRESS_EXPIRY_ATTR: Final = "in_progress_expiration"  # epoch milliseconds
STATUS_ATTR: Final = "status"
DATA_ATTR: Final = "data"  # the result, as JSON


def _value(name: str) -> str:
    return f'messageAttributes."{name}".stringValue'


def powertools_key_jmespath(fallback: str | None = None) -> str:
    """`POWERTOOLS_KEY_JMESPATH`, with a JMESPath of the record for messages sqsdelay did not
    send (e.g. `powertools_json(body).order_id`).

    JMESPath's `a && b || c` is b when a is set, else c: the replay token is in the data
    only when the message carries one, as `key_data` builds it (a multi-select hash would
    put a null there, and change every key written before)."""
    ident = _value(wire_format.MESSAGE_ID_ATTRIBUTE)
    if fallback is not None:
        ident = f"{ident} || {fallback}"
    attempt = _value(wire_format.ATTEMPT_ATTRIBUTE)
    replay = _value(wire_format.REPLAY_ATTRIBUTE)
    return (
        f"{replay} && {{id: {ident}, attempt: {attempt}, replay: {replay}}}"
        f" || {{id: {ident}, attempt: {attempt}}}"
    )


# What Powertools' `IdempotencyConfig(event_key_jmespath=...)` selects from a Lambda SQS
# record: the same data `key_data` builds.
POWERTOOLS_KEY_JMESPATH: Final = powertools_key_jmespath()


def key_data(
    incoming: ConsumerMessage, fallback: str | Callable[[], str] | None = None
) -> dict[str, str | None]:
    """The message's stable key: its sqsdelay id (or `fallback`, the caller's key for a
    message without one, called only then: the id wins), its retry number as carried, and
    its replay token when it was replayed."""
    ident = _string(incoming, wire_format.MESSAGE_ID_ATTRIBUTE)
    if not ident and fallback is not None:
        ident = fallback() if callable(fallback) else fallback
    if not ident:
        raise InvalidInput(
            "this message has no sqsdelay id (NServiceBus.MessageId): sqsdelay did not send "
            "it, or sent it without room for its id (10 attributes, or a body at the size "
            "limit). Give the guard a key for such messages, e.g. key=lambda message: "
            "json.loads(message.received.body)['order_id'], one that every copy of the "
            "message shares (not SQS's MessageId, which is new on every send)"
        )
    if "<aws.scheduler." in ident:
        # A recurring schedule's occurrence whose time Scheduler did not fill in: every
        # occurrence would share this key, and all but the first be skipped as duplicates.
        raise InvalidInput(
            f"this message's id {ident[:100]!r} still holds a Scheduler keyword: EventBridge "
            "Scheduler did not fill in the occurrence's time. Check the schedule's target "
            "(docs/schedules.md); until then every occurrence would look like the first"
        )
    data = {"attempt": _string(incoming, wire_format.ATTEMPT_ATTRIBUTE), "id": ident}
    replay = _string(incoming, wire_format.REPLAY_ATTRIBUTE)
    if replay:  # a replay runs again, whatever its first delivery's run left
        data["replay"] = replay
    return data


def _string(incoming: ConsumerMessage, name: str) -> str | None:
    value = incoming.received.attributes.get(name)
    return value.get("StringValue") if value else None


def record_key(prefix: str, data: Mapping[str, str | None]) -> str:
    """The record's id, as Powertools hashes it (md5 of `json.dumps(data, sort_keys=True)`)."""
    digest = hashlib.md5(json.dumps(data, sort_keys=True).encode(), usedforsecurity=False)
    return f"{prefix}#{digest.hexdigest()}"


def default_prefix(function_name: str, module: str, qualname: str) -> str:
    """Powertools' prefix for a decorated function: `<Lambda function name or
    'test-func'>.<module>.<qualname>`."""
    return f"{function_name or 'test-func'}.{module}.{qualname}"


def begin_request(
    table: str, key: str, *, now: float, expires_after: int, in_progress_ms: int
) -> dict[str, Any]:
    """The PutItem that claims a key: it succeeds when the key is absent, its record expired,
    or its run in progress passed its in-progress expiry (Powertools' `_put_record`)."""
    now_s = int(now)
    return {
        "TableName": table,
        "Item": {
            KEY_ATTR: {"S": key},
            EXPIRY_ATTR: {"N": str(now_s + expires_after)},
            STATUS_ATTR: {"S": INPROGRESS},
            IN_PROGRESS_EXPIRY_ATTR: {"N": str(int(now * 1000) + in_progress_ms)},
        },
        "ConditionExpression": "attribute_not_exists(#id) OR #expiry < :now OR "
        "(#status = :inprogress AND attribute_exists(#in_progress_expiry) AND "
        "#in_progress_expiry < :now_in_millis)",
        "ExpressionAttributeNames": {
            "#id": KEY_ATTR,
            "#expiry": EXPIRY_ATTR,
            "#in_progress_expiry": IN_PROGRESS_EXPIRY_ATTR,
            "#status": STATUS_ATTR,
        },
        "ExpressionAttributeValues": {
            ":now": {"N": str(now_s)},
            ":now_in_millis": {"N": str(int(now * 1000))},
            ":inprogress": {"S": INPROGRESS},
        },
        # The record that won comes back with the refusal: no second read (Powertools too).
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def complete_request(
    table: str, key: str, result: object, *, now: float, expires_after: int
) -> dict[str, Any]:
    """The UpdateItem that records a success and its result (Powertools' `_update_record`)."""
    return {
        "TableName": table,
        "Key": {KEY_ATTR: {"S": key}},
        "UpdateExpression": "SET #response_data = :response_data, #expiry = :expiry, "
        "#status = :status",
        "ExpressionAttributeNames": {
            "#response_data": DATA_ATTR,
            "#expiry": EXPIRY_ATTR,
            "#status": STATUS_ATTR,
        },
        "ExpressionAttributeValues": {
            ":response_data": {"S": json.dumps(result, sort_keys=True, default=str)},
            ":expiry": {"N": str(int(now) + expires_after)},
            ":status": {"S": COMPLETED},
        },
    }


def release_request(table: str, key: str) -> dict[str, Any]:
    """The DeleteItem after a failed run: the next delivery runs again (Powertools' too)."""
    return {"TableName": table, "Key": {KEY_ATTR: {"S": key}}}


@dataclass(frozen=True)
class Stored:
    status: str
    expiry: int  # epoch seconds
    in_progress_expiry_ms: int | None
    data: str | None

    def state(self, now: float) -> Literal["completed", "in-progress", "expired"]:
        """What a claim that found this record means (the claim's condition, read back)."""
        if self.expiry < int(now):
            return "expired"
        if self.status == COMPLETED:
            return "completed"
        if self.in_progress_expiry_ms is not None and self.in_progress_expiry_ms < int(now * 1000):
            return "expired"
        return "in-progress"

    def result(self) -> Any:
        return json.loads(self.data) if self.data else None


def stored(item: Mapping[str, Any]) -> Stored:
    """A record as DynamoDB returns it (the refusal's ALL_OLD item, or GetItem's)."""
    in_progress = item.get(IN_PROGRESS_EXPIRY_ATTR, {}).get("N")
    data = item.get(DATA_ATTR, {}).get("S")
    return Stored(
        status=str(item.get(STATUS_ATTR, {}).get("S", "")),
        expiry=int(item.get(EXPIRY_ATTR, {}).get("N", "0")),
        in_progress_expiry_ms=int(in_progress) if in_progress is not None else None,
        data=data,
    )


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """`ran`: the handler ran now; otherwise a copy completed before, and `result` is what
    that run returned (as JSON stored it)."""

    ran: bool
    result: T


@dataclass(frozen=True)
class GuardConfig:
    """What a guard is (`guard_config` checks it): its table, the records' prefix (None:
    Powertools' default for the handler), the expiry (s) and the in-progress expiry (ms)."""

    table: str
    name: str | None
    expires_after: int
    in_progress_ms: int

    def key(
        self,
        incoming: ConsumerMessage,
        fallback: str | Callable[[], str] | None,
        *,
        function_name: str,
        module: str,
        qualname: str,
    ) -> str:
        """The record's id for this message and handler."""
        prefix = self.name or default_prefix(function_name, module, qualname)
        return record_key(prefix, key_data(incoming, fallback))

    def in_progress_for(self, remaining_ms: int | None) -> int:
        """The run's in-progress expiry: the Lambda invocation's remaining time when there is
        one (as Powertools' `register_lambda_context` makes it), else the guard's."""
        return remaining_ms if remaining_ms is not None else self.in_progress_ms


def guard_config(
    table: str | None, *, name: str | None, expires_after_seconds: int, in_progress_seconds: float
) -> GuardConfig:
    """A guard's settings, or ConfigError saying what to give."""
    if not table:
        raise ConfigError(
            "the idempotency guard needs a DynamoDB table: Guard('my-idempotency-table'), "
            "partition key 'id' (string), TTL on 'expiration'; a Powertools idempotency "
            "table serves as it is (docs/consumers.md has the create-table command)"
        )
    if expires_after_seconds < 1 or in_progress_seconds <= 0:
        raise ConfigError(
            f"expires_after_seconds={expires_after_seconds}, in_progress_seconds="
            f"{in_progress_seconds}: give positive durations (the expiry must cover the "
            "duplicate window, docs/consumers.md)"
        )
    return GuardConfig(table, name, int(expires_after_seconds), int(in_progress_seconds * 1000))


def claim(
    config: GuardConfig, key: str, *, now: float, in_progress_ms: int
) -> Flow[Outcome[Any] | None]:
    """Claim the key (one PutItem): None when this run may go ahead; the earlier run's
    `Outcome` when a copy completed; GuardInProgress while a copy runs (or crashed less than
    its in-progress expiry ago); GuardTableMissing or GuardError when DynamoDB refused."""
    request = begin_request(
        config.table,
        key,
        now=now,
        expires_after=config.expires_after,
        in_progress_ms=in_progress_ms,
    )
    [reply] = yield [Call("dynamodb", "PutItem", request)]
    if reply.fault is None:
        return None
    if reply.fault.code != _CONDITION_FAILED:
        raise failure(config.table, "PutItem", reply.fault)
    record = stored(reply.fault.item or {})  # ALL_OLD: the record that won
    state = record.state(now)
    if state == "completed":
        log.info("guard.duplicate", table=config.table)
        return Outcome(False, record.result())
    raise GuardInProgress(
        f"another copy of this message is in progress (record {key[-32:]} in "
        f"{config.table!r}, {state}): leave it undeleted; it comes back after its visibility "
        "timeout"
    )


def complete(config: GuardConfig, key: str, result: object, *, now: float) -> Flow[None]:
    """Record the run's success (one UpdateItem). A failure is logged, not raised: the work
    is done, and a copy may run again after the in-progress expiry."""
    request = complete_request(
        config.table, key, result, now=now, expires_after=config.expires_after
    )
    [reply] = yield [Call("dynamodb", "UpdateItem", request)]
    if reply.fault is not None:
        error = failure(config.table, "UpdateItem", reply.fault)
        log.warning("guard.complete_failed", table=config.table, error=str(error)[:300])


def release(config: GuardConfig, key: str) -> Flow[None]:
    """Delete the record after the handler raised (one DeleteItem): the next copy runs. A
    failure is logged: the next copy then waits out the in-progress expiry."""
    [reply] = yield [Call("dynamodb", "DeleteItem", release_request(config.table, key))]
    if reply.fault is not None:
        error = failure(config.table, "DeleteItem", reply.fault)
        log.warning("guard.release_failed", table=config.table, error=str(error)[:300])


def failure(table: str, api: str, fault: Fault) -> SqsDelayError:
    """The typed error of a refused or unanswered request on the guard's table."""
    if fault.code in _MISSING_TABLE:
        return GuardTableMissing(
            f"the guard's table {table!r} does not exist: create it with partition key "
            "'id' (S) and TTL on 'expiration' (docs/consumers.md), or name the Powertools "
            "idempotency table"
        )
    detail = f" ({fault.detail[:200]})" if fault.detail else ""
    if not fault.answered:
        detail += " (no answer)"
    if api == "PutItem":
        then = (
            "the handler did not run: leave the message undeleted (in Lambda, report it as a "
            "batch item failure); it comes back after its visibility timeout"
        )
    else:
        then = "the handler's run is over; a copy may run it again after the in-progress expiry"
    if fault.code in _ACCESS_DENIED:
        then += (
            f". The guard needs dynamodb:PutItem, dynamodb:UpdateItem and dynamodb:DeleteItem "
            f"on the table {table!r} (arn:aws:dynamodb:<region>:<account>:table/{table})"
        )
    return GuardError(f"{api} on the guard's table {table!r} failed: {fault.code}{detail}: {then}")
