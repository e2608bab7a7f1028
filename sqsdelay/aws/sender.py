"""Sending delayed messages: synchronous (boto3) and asyncio (aioboto3) senders.

What is sent is planned in `core/send.py`; both senders drive the same flows
(`SenderCore`, `sender_core.py`), so they behave the same way.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, Unpack

from sqsdelay.aws.callers import AsyncCaller, SyncCaller
from sqsdelay.aws.clients import async_clients, sync_clients
from sqsdelay.aws.sender_core import NewDueTime, ScheduledQuery, SenderCore, plan
from sqsdelay.core import message_tags, registry, registry_pages
from sqsdelay.core.flows import Flow, adrive, drive
from sqsdelay.core.parked import ParkedList
from sqsdelay.core.send import BatchResult, Message, MessageOptions, SendFailure, SendResult
from sqsdelay.core.types import CancelOutcome, RescheduleOutcome
from sqsdelay.settings import Settings

T = TypeVar("T")


class Sender(SenderCore):
    """Synchronous sender (boto3)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: Any = None,
        scheduler: Any = None,
        dynamodb: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(settings, clock)
        given = {"sqs": client, "scheduler": scheduler, "dynamodb": dynamodb}
        clients = sync_clients(self.settings, given)
        self._client = clients["sqs"]
        self._caller = SyncCaller(clients, self.resolver, threads=self.settings.park_concurrency)

    def send(self, queue: str, body: str, **options: Unpack[MessageOptions]) -> SendResult:
        """Send one message; `options` are `Message`'s: `delay` or `deliver_at`,
        `attributes`, `message_type`, `id`, `group_id`, `trace_header`, for a FIFO
        destination `deduplication_id` (SQS's MessageDeduplicationId, kept on every hop);
        with the registry, `tags` (a bulk cancel's selection) and `debounce`/`max_wait`
        (by `id`: docs/operator-controls.md)."""
        return drive(self.send_flow(queue, Message(body, **options)), self._caller)

    def send_batch(
        self, queue: str, messages: Sequence[Message], *, raise_on_failure: bool = True
    ) -> BatchResult:
        """Send many messages in as few SendMessageBatch calls as the limits allow, the
        batches at once.

        Every message is validated before anything is sent. Raises `BatchSendError` (which
        carries the full result) if any entry failed, unless `raise_on_failure` is False.
        """
        return drive(self.send_batch_flow(queue, messages, raise_on_failure), self._caller)

    def cancel(self, queue: str, message_id: str) -> CancelOutcome:
        """Cancel a scheduled message by its id: `cancelled`, `too-late` or `unknown`."""
        return drive(self.cancel_flow(queue, message_id), self._caller)

    def cancel_tagged(
        self, queue: str, tag: tuple[str, str], *, dry_run: bool = False
    ) -> message_tags.BulkCancel:
        """Cancel every message of `queue` sent with `tag` ((name, value)), each by its id;
        `dry_run`: only count them (and name a sample)."""
        return drive(self.cancel_tagged_flow(queue, tag, dry_run=dry_run), self._caller)

    def reschedule(
        self, queue: str, message_id: str, **when: Unpack[NewDueTime]
    ) -> tuple[RescheduleOutcome, int]:
        """Move a scheduled message's due time (`delay` from now, or `at` a time): the
        outcome and the due time (epoch ms)."""
        return drive(self.reschedule_flow(queue, message_id, **when), self._caller)

    def scheduled(self, queue: str, **query: Unpack[ScheduledQuery]) -> list[registry.Record]:
        """What the registry holds for a destination, soonest first: `due_before` a time,
        in `state` (default scheduled; None: all), at most `limit` (default 100)."""
        return drive(self.scheduled_flow(queue, **query), self._caller)

    def tagged(
        self, queue: str, tag: tuple[str, str], *, limit: int = 100
    ) -> tuple[int, list[registry.Record]]:
        """How many messages of `queue` carry `tag`, and up to `limit` of their records."""
        return drive(self.tagged_flow(queue, tag, limit=limit), self._caller)

    def run(self, flow: Flow[T]) -> T:
        """Make a flow's calls with this sender's clients (`consumer.retry_later`'s flow: a
        send of this sender's, then calls of its own)."""
        return drive(flow, self._caller)

    def scheduled_page(
        self, query: registry_pages.PageQuery, start: dict[str, Any] | None = None
    ) -> registry_pages.Page:
        """One page of a destination's records from `start` (the previous page's
        `next_key`): the console's Scheduled page."""
        return drive(self.scheduled_page_flow(query, start), self._caller)

    def parked(self, queue: str, *, scan: int = 200) -> ParkedList:
        """A destination's parked messages, from Scheduler (no registry needed)."""
        return drive(self.parked_flow(queue, scan=scan), self._caller)


class AsyncSender(SenderCore):
    """asyncio sender (aioboto3). Use as `async with AsyncSender(settings) as sender:`."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(settings, clock)
        import aioboto3  # here, not at the top: a synchronous sender should not pay ~0.25 s

        self._session = aioboto3.Session()
        self._stack = contextlib.AsyncExitStack()
        self._caller: AsyncCaller | None = None

    async def __aenter__(self) -> AsyncSender:
        clients = await async_clients(self.settings, self._session, self._stack, max_pool=50)
        self._client = clients["sqs"]
        self._caller = AsyncCaller(clients, self.resolver)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    @property
    def caller(self) -> AsyncCaller:
        if self._caller is None:
            raise RuntimeError("use the sender as `async with AsyncSender(...) as sender:`")
        return self._caller

    async def send(self, queue: str, body: str, **options: Unpack[MessageOptions]) -> SendResult:
        """As `Sender.send`."""
        return await adrive(self.send_flow(queue, Message(body, **options)), self.caller)

    async def send_batch(
        self, queue: str, messages: Sequence[Message], *, raise_on_failure: bool = True
    ) -> BatchResult:
        """As `Sender.send_batch`."""
        return await adrive(self.send_batch_flow(queue, messages, raise_on_failure), self.caller)

    async def cancel(self, queue: str, message_id: str) -> CancelOutcome:
        """As `Sender.cancel`."""
        return await adrive(self.cancel_flow(queue, message_id), self.caller)

    async def cancel_tagged(
        self, queue: str, tag: tuple[str, str], *, dry_run: bool = False
    ) -> message_tags.BulkCancel:
        """As `Sender.cancel_tagged`."""
        return await adrive(self.cancel_tagged_flow(queue, tag, dry_run=dry_run), self.caller)

    async def reschedule(
        self, queue: str, message_id: str, **when: Unpack[NewDueTime]
    ) -> tuple[RescheduleOutcome, int]:
        """As `Sender.reschedule`."""
        return await adrive(self.reschedule_flow(queue, message_id, **when), self.caller)

    async def scheduled(self, queue: str, **query: Unpack[ScheduledQuery]) -> list[registry.Record]:
        """As `Sender.scheduled`."""
        return await adrive(self.scheduled_flow(queue, **query), self.caller)

    async def run(self, flow: Flow[T]) -> T:
        """As `Sender.run`."""
        return await adrive(flow, self.caller)


__all__ = [
    "AsyncSender",
    "BatchResult",
    "Message",
    "MessageOptions",
    "SendFailure",
    "SendResult",
    "Sender",
    "plan",
]
