"""The idempotency guard: a handler runs once per message, however many copies arrive.
`Guard` with boto3, `AsyncGuard` with aioboto3.

Three DynamoDB calls at most, two on a first run (PutItem INPROGRESS, UpdateItem
COMPLETED), one for a duplicate (the refused PutItem returns the record). The requests, the
states and the reading of every answer are `core/idempotency.py`'s flows, which are
Powertools' idempotency utility's, so both guards and a Powertools `idempotent_function`
share one table and read each other's records. This module only runs the handler between
the claim and its end, and makes the calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqsdelay.aws.callers import AsyncCaller, SyncCaller
from sqsdelay.aws.clients import async_service, sync_service
from sqsdelay.core import consumer_message, idempotency
from sqsdelay.core.consumer_message import ConsumerMessage
from sqsdelay.core.flows import Flow, adrive, drive
from sqsdelay.core.idempotency import (
    DEFAULT_EXPIRES_AFTER_SECONDS,
    DEFAULT_IN_PROGRESS_SECONDS,
    Outcome,
)
from sqsdelay.errors import ConfigError, GuardError, GuardInProgress, GuardTableMissing
from sqsdelay.settings import Settings, load_settings

T = TypeVar("T")


class _GuardBase:
    """What both guards share: the checked config, the caller's key, the clock, and the
    steps of a run (claim, then complete or release) as flows, which each guard drives."""

    def __init__(
        self,
        table: str | None,
        *,
        name: str | None,
        key: Callable[[ConsumerMessage], str] | None,
        expires_after_seconds: int,
        in_progress_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self.config = idempotency.guard_config(
            table,
            name=name,
            expires_after_seconds=expires_after_seconds,
            in_progress_seconds=in_progress_seconds,
        )
        self.table = self.config.table
        self.name = name
        self.key = key
        self._clock = clock

    def record_key(self, incoming: ConsumerMessage, handler: Callable[..., Any]) -> str:
        """The record's id. The caller's `key` is asked only when the message has no
        sqsdelay id (the id wins): a key that fails on some bodies fails no run it serves."""
        caller_key = self.key
        # The handler's name is the default prefix only: with `name=` it is never read.
        module, qualname = ("", "") if self.name else _handler_name(handler)
        return self.config.key(
            incoming,
            (lambda: caller_key(incoming)) if caller_key is not None else None,
            function_name=os.environ.get("AWS_LAMBDA_FUNCTION_NAME", ""),
            module=module,
            qualname=qualname,
        )

    def _claim(
        self, message: object, handler: Callable[..., Any], queue_url: str | None, context: Any
    ) -> tuple[str, Flow[Outcome[Any] | None]]:
        """The message's record key and the flow that claims it. `context`: the Lambda
        context, whose remaining time becomes the run's in-progress expiry."""
        incoming = consumer_message.read(message, queue_url, need_queue=False)
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        ms = self.config.in_progress_for(int(remaining()) if remaining else None)
        key = self.record_key(incoming, handler)
        return key, idempotency.claim(self.config, key, now=self._clock(), in_progress_ms=ms)

    def _complete(self, key: str, result: object) -> Flow[None]:
        return idempotency.complete(self.config, key, result, now=self._clock())

    def _release(self, key: str) -> Flow[None]:
        return idempotency.release(self.config, key)


def _handler_name(handler: Callable[..., Any]) -> tuple[str, str]:
    """The module and qualified name of the default prefix, as Powertools names a decorated
    function. A `functools.partial` is named by the function it wraps, a callable object (or
    anything else without a `__qualname__`) by its class: give `name=` to tell two handlers of
    one function or class apart, which would otherwise share their records."""
    target: Any = handler
    while isinstance(target, functools.partial):
        target = target.func
    qualname = getattr(target, "__qualname__", None)
    module = getattr(target, "__module__", None)
    if not isinstance(qualname, str) or not isinstance(module, str):
        kind = type(target)
        return kind.__module__, kind.__qualname__
    return module, qualname


class Guard(_GuardBase):
    """`guard.run(message, handler)` runs `handler(message)` unless a copy of the message
    ran it already; `@guard.once` wraps a handler of one message. `name`: the records'
    prefix, Powertools' `key_prefix` (default: as Powertools names a decorated function).
    `key(incoming)`: the key of a message without sqsdelay's id (one sqsdelay did not send,
    or sent without room for it); asked only then. `client`: a boto3 DynamoDB client
    (default: one from `settings`). An `async def` handler needs `AsyncGuard`."""

    def __init__(
        self,
        table: str | None,
        *,
        name: str | None = None,
        key: Callable[[ConsumerMessage], str] | None = None,
        expires_after_seconds: int = DEFAULT_EXPIRES_AFTER_SECONDS,
        in_progress_seconds: float = DEFAULT_IN_PROGRESS_SECONDS,
        client: Any = None,
        settings: Settings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(
            table,
            name=name,
            key=key,
            expires_after_seconds=expires_after_seconds,
            in_progress_seconds=in_progress_seconds,
            clock=clock,
        )
        self._client = client or sync_service(settings or load_settings(), "dynamodb")
        self._caller = SyncCaller({"dynamodb": self._client})

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
        key, claim = self._claim(message, handler, queue_url, context)
        found = drive(claim, self._caller)
        if found is not None:
            return found
        try:
            result = handler(message)
            _refuse_awaitable(result, handler)
        except BaseException:  # the next copy runs again
            drive(self._release(key), self._caller)
            raise
        drive(self._complete(key, result), self._caller)
        return Outcome(True, result)

    def once(self, handler: Callable[[Any], T]) -> Callable[..., Outcome[T]]:
        @functools.wraps(handler)
        def guarded(
            message: object, *, queue_url: str | None = None, context: Any = None
        ) -> Outcome[T]:
            return self.run(message, handler, queue_url=queue_url, context=context)

        return guarded


def _refuse_awaitable(result: object, handler: Callable[..., Any]) -> None:
    """An `async def` handler (or one returning an awaitable) given to the sync guard has not
    run: its coroutine is closed, unrun, and the run fails (the record is released)."""
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise ConfigError(
            f"the handler {getattr(handler, '__qualname__', handler)!r} returned an awaitable "
            "(an async def?), which the sync Guard cannot run: use AsyncGuard (`async with "
            "AsyncGuard(table, ...) as guard: await guard.run(message, handler)`); nothing "
            "ran and the message's record was released"
        )


class AsyncGuard(_GuardBase):
    """`Guard` for asyncio, with aioboto3: the same requests, records and rules. Use it as
    `async with AsyncGuard(table, ...) as guard:` (it opens its DynamoDB client from
    `settings`), or give `client=`, an entered aioboto3 DynamoDB client. `await
    guard.run(message, handler)` runs `handler(message)`, awaited when it is a coroutine
    function; `@guard.once` wraps one."""

    def __init__(
        self,
        table: str | None,
        *,
        name: str | None = None,
        key: Callable[[ConsumerMessage], str] | None = None,
        expires_after_seconds: int = DEFAULT_EXPIRES_AFTER_SECONDS,
        in_progress_seconds: float = DEFAULT_IN_PROGRESS_SECONDS,
        client: Any = None,
        settings: Settings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(
            table,
            name=name,
            key=key,
            expires_after_seconds=expires_after_seconds,
            in_progress_seconds=in_progress_seconds,
            clock=clock,
        )
        self._settings = settings if client is not None else settings or load_settings()
        self._stack: contextlib.AsyncExitStack | None = None
        self._caller = AsyncCaller({"dynamodb": client}) if client is not None else None

    async def __aenter__(self) -> AsyncGuard:
        if self._caller is None:
            import aioboto3  # here: a sync consumer should not pay for aioboto3's import

            assert self._settings is not None
            stack = contextlib.AsyncExitStack()
            client = await async_service(self._settings, aioboto3.Session(), stack, "dynamodb")
            self._stack, self._caller = stack, AsyncCaller({"dynamodb": client})
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._stack is not None:
            stack, self._stack, self._caller = self._stack, None, None
            await stack.aclose()

    @property
    def caller(self) -> AsyncCaller:
        if self._caller is None:
            raise ConfigError(
                "the async guard has no DynamoDB client yet: use it as `async with "
                "AsyncGuard(table, ...) as guard:`, or pass client= (an entered aioboto3 "
                "DynamoDB client)"
            )
        return self._caller

    async def run(
        self,
        message: object,
        handler: Callable[[Any], Awaitable[T] | T],
        *,
        queue_url: str | None = None,
        context: Any = None,
    ) -> Outcome[T]:
        """As `Guard.run`; `handler` may be a coroutine function. A run cancelled after its
        claim still ends its record (completed, or released) before the cancellation goes
        on: the handler's work, once done, is recorded, so no copy runs it again."""
        caller = self.caller
        key, claim = self._claim(message, handler, queue_url, context)
        found = await adrive(claim, caller)
        if found is not None:
            return found
        try:
            answer = handler(message)
            result: T = await answer if inspect.isawaitable(answer) else answer
        except BaseException:  # the next copy runs again (a cancelled run too)
            await _to_the_end(self._release(key), caller)
            raise
        await _to_the_end(self._complete(key, result), caller)
        return Outcome(True, result)

    def once(
        self, handler: Callable[[Any], Awaitable[T] | T]
    ) -> Callable[..., Awaitable[Outcome[T]]]:
        @functools.wraps(handler)
        async def guarded(
            message: object, *, queue_url: str | None = None, context: Any = None
        ) -> Outcome[T]:
            return await self.run(message, handler, queue_url=queue_url, context=context)

        return guarded


async def _to_the_end(step: Flow[None], caller: AsyncCaller) -> None:
    """Make a run's last request (complete or release) to its end, in a task of its own, even
    when the run is cancelled meanwhile; the cancellation is raised after it. Abandoned, a
    completion would leave the record INPROGRESS after the handler's work was done, and a
    copy would run the handler again once the in-progress expiry passed."""
    task = asyncio.ensure_future(adrive(step, caller))
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])  # cancelled again: the task still runs to its end
        raise


__all__ = [
    "DEFAULT_EXPIRES_AFTER_SECONDS",
    "DEFAULT_IN_PROGRESS_SECONDS",
    "AsyncGuard",
    "Guard",
    "GuardError",
    "GuardInProgress",
    "GuardTableMissing",
    "Outcome",
]
