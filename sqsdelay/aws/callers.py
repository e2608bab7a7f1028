"""The callers: they make the calls a core flow yields, with boto3 or aioboto3.

`SyncCaller` (Lambda, the sync sender, the CLI) and `AsyncCaller` (the ECS worker, the async
sender) differ only in how they wait. Both add the QueueUrl of a call that names a queue,
bound each call by its time limit, and turn every failure into a `Fault`, so that a flow
sees answers, never exceptions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from botocore import xform_name
from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from sqsdelay.core.flows import Call, Fault, Flow, Reply, adrive, drive
from sqsdelay.errors import SqsOperationError


class QueueLookup(Protocol):
    """What a caller needs of `aws.queue_urls.QueueResolver`: a queue's URL, and the typed
    error of a failed call on a queue (a missing one says how to create it)."""

    def lookup(self, name: str, account: str = "") -> Flow[str]: ...

    def failure(self, fault: Fault, operation: str, name: str) -> SqsOperationError: ...


ERRORS = (ClientError, BotoCoreError, OSError, TimeoutError)


def fault_of(exc: Exception) -> Fault:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        detail = str(error.get("Message", "")) or str(exc)
        item = exc.response.get("Item")
        found = item if isinstance(item, Mapping) else None
        return Fault(str(error.get("Code", "Unknown")), detail, status, item=found)
    if isinstance(exc, ParamValidationError):  # refused before it was sent: the request's fault
        return Fault("ParamValidationError", str(exc))
    return Fault(type(exc).__name__, str(exc) or repr(exc), answered=False)


class _Caller:
    def __init__(
        self, clients: Mapping[str, Any], resolver: QueueLookup | None = None, account: str = ""
    ) -> None:
        self.clients = clients
        self.resolver = resolver
        self.account = account

    def _method(self, call: Call) -> Callable[..., Any]:
        method: Callable[..., Any] = getattr(self.clients[call.service], xform_name(call.api))
        return method

    def _failed(self, exc: Exception, call: Call) -> Reply:
        fault = fault_of(exc)
        if call.queue and self.resolver:  # a missing queue: forgotten, with how to create it
            err = self.resolver.failure(fault, call.api, call.queue)
            fault = Fault(err.code, err.detail, fault.status, fault.answered)
        return Reply(fault=fault)

    def _with_url(self, call: Call, url: str | None) -> dict[str, Any]:
        return {**call.params, "QueueUrl": url} if url is not None else dict(call.params)


class SyncCaller(_Caller):
    """Makes the calls of one round in threads (boto3 clients are thread-safe), each bounded
    by its time limit; a call past its limit counts as unanswered."""

    def __init__(
        self,
        clients: Mapping[str, Any],
        resolver: QueueLookup | None = None,
        account: str = "",
        *,
        threads: int = 10,
    ) -> None:
        super().__init__(clients, resolver, account)
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None

    def _url(self, call: Call) -> str | None:
        if call.queue is None or self.resolver is None:
            return None
        return drive(self.resolver.lookup(call.queue, self.account), self)

    def _one(self, call: Call, url: str | None) -> Reply:
        if call.service == "clock":
            time.sleep(call.params["seconds"])
            return Reply()
        try:
            return Reply(self._method(call)(**self._with_url(call, url)))
        except ERRORS as exc:
            return self._failed(exc, call)

    def __call__(self, calls: list[Call]) -> list[Reply]:
        replies: list[Reply | None] = [None] * len(calls)
        urls: list[str | None] = [None] * len(calls)
        for i, call in enumerate(calls):  # URLs first (cached), so no thread waits on another
            try:
                urls[i] = self._url(call)
            except SqsOperationError as exc:
                replies[i] = Reply(fault=Fault(exc.code, exc.detail))
        todo = [i for i, r in enumerate(replies) if r is None]
        if len(todo) == 1 and calls[todo[0]].timeout is None:
            replies[todo[0]] = self._one(calls[todo[0]], urls[todo[0]])
        elif todo:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="sqsdelay-call")
            started = time.monotonic()
            futures = {i: self._pool.submit(self._one, calls[i], urls[i]) for i in todo}
            for i, future in futures.items():
                replies[i] = self._result(future, calls[i], started)
        return [r for r in replies if r is not None]

    @staticmethod
    def _result(future: Future[Reply], call: Call, started: float) -> Reply:
        if call.timeout is None:
            return future.result()
        try:
            return future.result(max(0.0, started + call.timeout - time.monotonic()))
        except TimeoutError:
            future.cancel()
            detail = f"no answer within {call.timeout:.1f} s"
            return Reply(fault=Fault("TimeoutError", detail, answered=False))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class AsyncCaller(_Caller):
    """Makes the calls of one round concurrently on the event loop."""

    async def _one(self, call: Call) -> Reply:
        reply = await self._answer(call)
        # On Python 3.11, asyncio.wait_for returns the answer (or its error) when the call
        # completes just as this task is cancelled, and the cancellation is lost: the caller
        # would go on as if nothing had been asked of it (a heartbeat extended forever).
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError
        return reply

    async def _answer(self, call: Call) -> Reply:
        if call.service == "clock":
            await asyncio.sleep(call.params["seconds"])
            return Reply()
        try:
            url = None
            if call.queue is not None and self.resolver is not None:
                url = await adrive(self.resolver.lookup(call.queue, self.account), self)
            request = self._method(call)(**self._with_url(call, url))
            if call.timeout is None:
                return Reply(await request)
            return Reply(await asyncio.wait_for(request, max(0.001, call.timeout)))
        except SqsOperationError as exc:
            return Reply(fault=Fault(exc.code, exc.detail))
        except ERRORS as exc:
            return self._failed(exc, call)

    async def __call__(self, calls: list[Call]) -> list[Reply]:
        if len(calls) == 1:
            return [await self._one(calls[0])]
        return list(await asyncio.gather(*(self._one(c) for c in calls)))
