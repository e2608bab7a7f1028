"""Sending delayed messages: the synchronous (boto3) and asyncio (aioboto3) senders.

Both are thin shells over the same flows (`core/send_flows.py`, `core/scheduled_flows.py`,
configured by `Settings.send_config()`): each only makes the calls, with clients of its own
or given, or with a caller given (a test's stub). They have the same methods, and both close
what they made when used as context managers (`with Sender() as s:`, `async with
AsyncSender() as s:`); a client passed in is the caller's to close.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Self, TypeVar, Unpack

from sqsdelay import deprecations, otel
from sqsdelay.aws import queue_urls
from sqsdelay.aws.callers import AsyncCaller, SyncCaller
from sqsdelay.aws.clients import async_clients, extra_services, sync_clients
from sqsdelay.aws.queue_urls import QueueResolver
from sqsdelay.core import message_tags, registry, registry_pages, send, tracing
from sqsdelay.core.flows import AsyncCall, Flow, SyncCall, adrive, drive
from sqsdelay.core.park_targets import Place
from sqsdelay.core.parked import ParkedList
from sqsdelay.core.scheduled_flows import NewDueTime, ScheduledFlows, ScheduledQuery
from sqsdelay.core.send import (
    BatchResult,
    Message,
    MessageOptions,
    PlannedSend,
    SendFailure,
    SendResult,
)
from sqsdelay.core.send_flows import SendFlows
from sqsdelay.core.send_tracing import Producer
from sqsdelay.core.types import CancelOutcome, RescheduleOutcome
from sqsdelay.settings import Settings, load_settings

T = TypeVar("T")


def plan(queue: str, message: Message, settings: Settings, **when: Any) -> PlannedSend:
    """What `send` would send, without sending: `core.send.plan` under these settings
    (`now`, and optionally `new_id` and `ambient_trace`, as there)."""
    return send.plan(queue, message, settings.send_limits(), **when)


class _Tracing:
    """`core.send_flows.Tracing` with `sqsdelay.otel` and the Lambda's X-Ray trace."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def start(self, destination: str) -> Producer | None:
        return otel.Producer.start(self._settings, destination)

    def placed(self, planned: PlannedSend) -> None:
        otel.placed(planned)

    def ambient(self) -> str | None:
        return os.environ.get(tracing.AMBIENT)


class _Shell:
    """What both senders hold: the settings, the queue lookups and the flows."""

    def __init__(self, settings: Settings | None, client: Any, clock: Callable[[], float]):
        self.settings = settings or load_settings()
        config = self.settings.send_config()
        self.resolver = QueueResolver(self.settings)
        self._client: Any = client  # the SQS client (its Region names the error queue's ARN)
        self.flows = SendFlows(
            config, self.resolver, clock=clock, place=self._place, tracing=_Tracing(self.settings)
        )
        self.scheduled_flows = ScheduledFlows(config, self.resolver, clock=clock)

    def _place(self) -> Place | None:
        return queue_urls.place(self._client) if self._client is not None else None

    # Deprecated (`deprecations.SENDER_FLOWS`): the flow makers were the senders' own before
    # issue 60 §1 moved them to `flows` and `scheduled_flows`; `run(flow)` is documented, and
    # these were how one got a flow for it.
    @property
    def send_flow(self) -> Callable[..., Flow[SendResult]]:
        deprecations.sender_flow(self, "send_flow")
        return self.flows.send_flow

    @property
    def send_batch_flow(self) -> Callable[..., Flow[BatchResult]]:
        deprecations.sender_flow(self, "send_batch_flow")
        return self.flows.send_batch_flow

    @property
    def cancel_flow(self) -> Callable[..., Flow[CancelOutcome]]:
        deprecations.sender_flow(self, "cancel_flow")
        return self.scheduled_flows.cancel_flow

    @property
    def cancel_tagged_flow(self) -> Callable[..., Flow[message_tags.BulkCancel]]:
        deprecations.sender_flow(self, "cancel_tagged_flow")
        return self.scheduled_flows.cancel_tagged_flow

    @property
    def reschedule_flow(self) -> Callable[..., Flow[tuple[RescheduleOutcome, int]]]:
        deprecations.sender_flow(self, "reschedule_flow")
        return self.scheduled_flows.reschedule_flow

    @property
    def scheduled_flow(self) -> Callable[..., Flow[list[registry.Record]]]:
        deprecations.sender_flow(self, "scheduled_flow")
        return self.scheduled_flows.scheduled_flow

    @property
    def scheduled_page_flow(self) -> Callable[..., Flow[registry_pages.Page]]:
        deprecations.sender_flow(self, "scheduled_page_flow")
        return self.scheduled_flows.scheduled_page_flow

    @property
    def parked_flow(self) -> Callable[..., Flow[ParkedList]]:
        deprecations.sender_flow(self, "parked_flow")
        return self.scheduled_flows.parked_flow

    @property
    def tagged_flow(self) -> Callable[..., Flow[tuple[int, list[registry.Record]]]]:
        deprecations.sender_flow(self, "tagged_flow")
        return self.scheduled_flows.tagged_flow


class Sender(_Shell):
    """Synchronous sender (boto3). `client`, `scheduler`, `dynamodb`: clients to use instead
    of new ones; `caller`: makes the flows' calls instead of clients (parking then needs
    `client` for its Region)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: Any = None,
        scheduler: Any = None,
        dynamodb: Any = None,
        clock: Callable[[], float] = time.time,
        caller: SyncCall | None = None,
    ) -> None:
        super().__init__(settings, client, clock)
        self._made: list[Any] = []
        self._caller: SyncCall
        if caller is not None:
            self._caller = caller
            return
        given = {"sqs": client, "scheduler": scheduler, "dynamodb": dynamodb}
        clients = sync_clients(self.settings, given)
        self._made = [c for service, c in clients.items() if given.get(service) is None]
        self._client = clients["sqs"]
        self._caller = SyncCaller(clients, self.resolver, threads=self.settings.park_concurrency)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the clients this sender made and its call threads; given clients stay open."""
        if isinstance(self._caller, SyncCaller):
            self._caller.close()
        made, self._made = self._made, []
        for client in made:
            client.close()

    def send(self, queue: str, body: str, **options: Unpack[MessageOptions]) -> SendResult:
        """Send one message; `options` are `Message`'s: `delay` or `deliver_at`,
        `attributes`, `message_type`, `id`, `group_id`, `trace_header`, for a FIFO
        destination `deduplication_id` (SQS's MessageDeduplicationId, kept on every hop);
        with the registry, `tags` (a bulk cancel's selection) and `debounce`/`max_wait`
        (by `id`: docs/operator-controls.md)."""
        return self.run(self.flows.send_flow(queue, Message(body, **options)))

    def send_batch(
        self, queue: str, messages: Sequence[Message], *, raise_on_failure: bool = True
    ) -> BatchResult:
        """Send many messages in as few SendMessageBatch calls as the limits allow, the
        batches at once.

        Every message is validated before anything is sent. Raises `BatchSendError` (which
        carries the full result) if any entry failed, unless `raise_on_failure` is False.
        """
        return self.run(self.flows.send_batch_flow(queue, messages, raise_on_failure))

    def cancel(self, queue: str, message_id: str) -> CancelOutcome:
        """Cancel a scheduled message by its id: `cancelled`, `too-late` or `unknown`."""
        return self.run(self.scheduled_flows.cancel_flow(queue, message_id))

    def cancel_tagged(
        self, queue: str, tag: tuple[str, str], *, dry_run: bool = False
    ) -> message_tags.BulkCancel:
        """Cancel every message of `queue` sent with `tag` ((name, value)), each by its id;
        `dry_run`: only count them (and name a sample)."""
        return self.run(self.scheduled_flows.cancel_tagged_flow(queue, tag, dry_run=dry_run))

    def reschedule(
        self, queue: str, message_id: str, **when: Unpack[NewDueTime]
    ) -> tuple[RescheduleOutcome, int]:
        """Move a scheduled message's due time (`delay` from now, or `at` a time): the
        outcome and the due time (epoch ms)."""
        return self.run(self.scheduled_flows.reschedule_flow(queue, message_id, **when))

    def scheduled(self, queue: str, **query: Unpack[ScheduledQuery]) -> list[registry.Record]:
        """What the registry holds for a destination, soonest first: `due_before` a time,
        in `state` (default scheduled; None: all), at most `limit` (default 100)."""
        return self.run(self.scheduled_flows.scheduled_flow(queue, **query))

    def tagged(
        self, queue: str, tag: tuple[str, str], *, limit: int = 100
    ) -> tuple[int, list[registry.Record]]:
        """How many messages of `queue` carry `tag`, and up to `limit` of their records."""
        return self.run(self.scheduled_flows.tagged_flow(queue, tag, limit=limit))

    def scheduled_page(
        self, query: registry_pages.PageQuery, start: dict[str, Any] | None = None
    ) -> registry_pages.Page:
        """One page of a destination's records from `start` (the previous page's
        `next_key`): the console's Scheduled page."""
        return self.run(self.scheduled_flows.scheduled_page_flow(query, start))

    def parked(self, queue: str, *, scan: int = 200) -> ParkedList:
        """A destination's parked messages, from Scheduler (no registry needed)."""
        return self.run(self.scheduled_flows.parked_flow(queue, scan=scan))

    def run(self, flow: Flow[T]) -> T:
        """Make a flow's calls with this sender's clients (`consumer.retry_later`'s flow: a
        send of this sender's, then calls of its own)."""
        return drive(flow, self._caller)


class AsyncSender(_Shell):
    """asyncio sender (aioboto3): `async with AsyncSender(settings) as sender:`. The same
    arguments as `Sender`, the clients aioboto3's (entered ones)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: Any = None,
        scheduler: Any = None,
        dynamodb: Any = None,
        clock: Callable[[], float] = time.time,
        caller: AsyncCall | None = None,
    ) -> None:
        super().__init__(settings, client, clock)
        self._given = {"sqs": client, "scheduler": scheduler, "dynamodb": dynamodb}
        self._caller: AsyncCall | None = caller
        self._own_caller = False
        self._session: Any = None  # aioboto3's, made on entering (taskiq gives its own)
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Self:
        if self._caller is None:
            clients = await self._clients()
            self._client = clients["sqs"]
            self._caller = AsyncCaller(clients, self.resolver)
            self._own_caller = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _clients(self) -> dict[str, Any]:
        """The given clients, and a new one (entered on this sender's stack) for each other
        service these settings call (`clients.async_clients`)."""
        needed = ("sqs", *extra_services(self.settings))
        if self._session is None and any(self._given.get(s) is None for s in needed):
            import aioboto3  # here, not at the top: a synchronous sender should not pay ~0.25 s

            self._session = aioboto3.Session()
        return await async_clients(
            self.settings, self._session, self._stack, max_pool=50, given=self._given
        )

    async def close(self) -> None:
        """Close the clients this sender made (the sender can be entered again); given
        clients stay open."""
        if self._own_caller:
            self._caller, self._own_caller = None, False
        await self._stack.aclose()

    @property
    def caller(self) -> AsyncCall:
        """Deprecated: the sender's caller, for `adrive`; `await sender.run(flow)` instead."""
        deprecations.warn("AsyncSender.caller", "await AsyncSender.run(flow)")
        return self._live()

    def _live(self) -> AsyncCall:
        if self._caller is None:
            raise RuntimeError("use the sender as `async with AsyncSender(...) as sender:`")
        return self._caller

    async def send(self, queue: str, body: str, **options: Unpack[MessageOptions]) -> SendResult:
        """As `Sender.send`."""
        return await self.run(self.flows.send_flow(queue, Message(body, **options)))

    async def send_batch(
        self, queue: str, messages: Sequence[Message], *, raise_on_failure: bool = True
    ) -> BatchResult:
        """As `Sender.send_batch`."""
        return await self.run(self.flows.send_batch_flow(queue, messages, raise_on_failure))

    async def cancel(self, queue: str, message_id: str) -> CancelOutcome:
        """As `Sender.cancel`."""
        return await self.run(self.scheduled_flows.cancel_flow(queue, message_id))

    async def cancel_tagged(
        self, queue: str, tag: tuple[str, str], *, dry_run: bool = False
    ) -> message_tags.BulkCancel:
        """As `Sender.cancel_tagged`."""
        flow = self.scheduled_flows.cancel_tagged_flow(queue, tag, dry_run=dry_run)
        return await self.run(flow)

    async def reschedule(
        self, queue: str, message_id: str, **when: Unpack[NewDueTime]
    ) -> tuple[RescheduleOutcome, int]:
        """As `Sender.reschedule`."""
        return await self.run(self.scheduled_flows.reschedule_flow(queue, message_id, **when))

    async def scheduled(self, queue: str, **query: Unpack[ScheduledQuery]) -> list[registry.Record]:
        """As `Sender.scheduled`."""
        return await self.run(self.scheduled_flows.scheduled_flow(queue, **query))

    async def tagged(
        self, queue: str, tag: tuple[str, str], *, limit: int = 100
    ) -> tuple[int, list[registry.Record]]:
        """As `Sender.tagged`."""
        return await self.run(self.scheduled_flows.tagged_flow(queue, tag, limit=limit))

    async def scheduled_page(
        self, query: registry_pages.PageQuery, start: dict[str, Any] | None = None
    ) -> registry_pages.Page:
        """As `Sender.scheduled_page`."""
        return await self.run(self.scheduled_flows.scheduled_page_flow(query, start))

    async def parked(self, queue: str, *, scan: int = 200) -> ParkedList:
        """As `Sender.parked`."""
        return await self.run(self.scheduled_flows.parked_flow(queue, scan=scan))

    async def run(self, flow: Flow[T]) -> T:
        """As `Sender.run`."""
        return await adrive(flow, self._live())


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
