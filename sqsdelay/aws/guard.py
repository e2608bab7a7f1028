"""The idempotency guard: a handler runs once per message, however many copies arrive.

Three DynamoDB calls at most, two on a first run (PutItem INPROGRESS, UpdateItem
COMPLETED), one for a duplicate (the refused PutItem returns the record). The requests and
the states are `core/idempotency.py`'s, which are Powertools' idempotency utility's, so the
guard and a Powertools `idempotent_function` share one table and read each other's records.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from botocore.exceptions import ClientError

from sqsdelay.aws.clients import sync_service
from sqsdelay.core import consumed as received_rules
from sqsdelay.core import idempotency
from sqsdelay.core.consumed import Incoming
from sqsdelay.errors import ConfigError, SqsDelayError
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings, load_settings

log = get_logger("sqsdelay.aws.guard")
T = TypeVar("T")
# Covers every route's duplicate window, the longest being a parked message without the
# registry: Scheduler retries an invocation for up to 24 h, then one last cycle (docs/consumers.md).
DEFAULT_EXPIRES_AFTER_SECONDS = 90_000
# How long a run may hold a message before a copy may run it again (a crash in progress).
DEFAULT_IN_PROGRESS_SECONDS = 300
_MISSING_TABLE = ("ResourceNotFoundException",)


class GuardInProgress(SqsDelayError):
    """Another copy of this message is being handled now (or its run crashed less than the
    in-progress expiry ago): leave this copy undeleted (in Lambda, report it as a batch item
    failure) and it comes back after its visibility timeout."""


class GuardTableMissing(ConfigError):
    pass


class GuardError(SqsDelayError):
    """DynamoDB refused or did not answer: the handler did not run."""


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """`ran`: the handler ran now; otherwise a copy completed before, and `result` is what
    that run returned (as JSON stored it)."""

    ran: bool
    result: T


class Guard:
    """`guard.run(message, handler)` runs `handler(message)` unless a copy of the message
    ran it already; `@guard.once` wraps a handler of one message. `name`: the records'
    prefix, Powertools' `key_prefix` (default: as Powertools names a decorated function).
    `key(incoming)`: the key of a message sqsdelay did not send."""

    def __init__(
        self,
        table: str | None,
        *,
        name: str | None = None,
        key: Callable[[Incoming], str] | None = None,
        expires_after_seconds: int = DEFAULT_EXPIRES_AFTER_SECONDS,
        in_progress_seconds: float = DEFAULT_IN_PROGRESS_SECONDS,
        client: Any = None,
        settings: Settings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
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
        self.table = table
        self.name = name
        self.key = key
        self.expires_after = int(expires_after_seconds)
        self.in_progress_ms = int(in_progress_seconds * 1000)
        self._client = client or sync_service(settings or load_settings(), "dynamodb")
        self._clock = clock

    def record_key(self, incoming: Incoming, handler: Callable[..., Any]) -> str:
        fallback = self.key(incoming) if self.key is not None else None
        data = idempotency.key_data(incoming, fallback)
        prefix = self.name or idempotency.default_prefix(
            os.environ.get("AWS_LAMBDA_FUNCTION_NAME", ""), handler.__module__, handler.__qualname__
        )
        return idempotency.record_key(prefix, data)

    def run(
        self,
        message: object,
        handler: Callable[[Any], T],
        *,
        queue_url: str | None = None,
        context: Any = None,
    ) -> Outcome[T]:
        """`context`: the Lambda context, whose remaining time becomes the in-progress
        expiry, as Powertools' `register_lambda_context` does."""
        incoming = received_rules.read(message, queue_url, need_queue=False)
        key = self.record_key(incoming, handler)
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        found = self._begin(key, int(remaining()) if remaining else self.in_progress_ms)
        if found is not None:
            return found
        try:
            result = handler(message)
        except BaseException:
            try:  # the next copy runs again; a failed delete waits out the in-progress expiry
                self._call("DeleteItem", idempotency.release_request(self.table, key))
            except GuardError as exc:
                log.warning("guard.release_failed", table=self.table, error=str(exc)[:300])
            raise
        request = idempotency.complete_request(
            self.table, key, result, now=self._clock(), expires_after=self.expires_after
        )
        try:
            self._call("UpdateItem", request)
        except GuardError as exc:  # the work is done; a copy may run again after in-progress expiry
            log.warning("guard.complete_failed", table=self.table, error=str(exc)[:300])
        return Outcome(True, result)

    def once(self, handler: Callable[[Any], T]) -> Callable[..., Outcome[T]]:
        @functools.wraps(handler)
        def guarded(
            message: object, *, queue_url: str | None = None, context: Any = None
        ) -> Outcome[T]:
            return self.run(message, handler, queue_url=queue_url, context=context)

        return guarded

    def _begin(self, key: str, in_progress_ms: int) -> Outcome[Any] | None:
        """Claim the key; None when this run may go ahead."""
        now = self._clock()
        request = idempotency.begin_request(
            self.table,
            key,
            now=now,
            expires_after=self.expires_after,
            in_progress_ms=in_progress_ms,
        )
        try:
            self._client.put_item(**request)
            return None
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise self._failure("PutItem", exc) from None
            item: Any = exc.response.get("Item") or {}  # ALL_OLD: the record that won
        record = idempotency.stored(item)
        state = record.state(now)
        if state == "completed":
            log.info("guard.duplicate", table=self.table)
            return Outcome(False, record.result())
        raise GuardInProgress(
            f"another copy of this message is in progress (record {key[-32:]} in {self.table!r}, "
            f"{state}): leave it undeleted; it comes back after its visibility timeout"
        )

    def _call(self, api: str, request: dict[str, Any]) -> None:
        method = {"DeleteItem": self._client.delete_item, "UpdateItem": self._client.update_item}
        try:
            method[api](**request)
        except ClientError as exc:
            raise self._failure(api, exc) from None

    def _failure(self, api: str, exc: ClientError) -> SqsDelayError:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in _MISSING_TABLE:
            return GuardTableMissing(
                f"the guard's table {self.table!r} does not exist: create it with partition key "
                "'id' (S) and TTL on 'expiration' (docs/consumers.md), or name the Powertools "
                "idempotency table"
            )
        return GuardError(f"{api} on the guard's table {self.table!r} failed: {code}")
