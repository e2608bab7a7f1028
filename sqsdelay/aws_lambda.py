"""Lambda mode: `sqsdelay.aws_lambda.handler` consumes SQS events from a delay queue.

Configure the event source mapping with batch size 10 and `ReportBatchItemFailures`. The
handler applies the same decision and dispatch step as the ECS worker, keeps the records it
could not send out of sight for a backoff (ChangeMessageVisibilityBatch, as the worker does)
and returns them as `batchItemFailures`; Lambda deletes the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sqsdelay import schedules
from sqsdelay.backoff import BackoffTimer
from sqsdelay.clients import error_code, sync_client, sync_scheduler
from sqsdelay.clock import ClockOffset
from sqsdelay.dispatch import Dispatch, ParkStep, Stats
from sqsdelay.errors import InvalidQueueName, SqsOperationError
from sqsdelay.failures import FailureLog
from sqsdelay.logs import configure, get_logger
from sqsdelay.parking import ParkTarget
from sqsdelay.processing import decide_batch, from_lambda, limits_of
from sqsdelay.queues import QueueResolver, QueueTrio, park_target
from sqsdelay.settings import Settings, load_settings

log = get_logger("sqsdelay.lambda")


class Handler:
    """Holds what survives between warm invocations: client, queue URLs, clock offset,
    backoff and failure records."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: Any = None,
        scheduler: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or load_settings()
        self._client = client
        self._scheduler = scheduler
        self._park_targets: dict[str, ParkTarget] = {}
        self._clock = clock
        self.resolver = QueueResolver(self.settings)
        self.offset = ClockOffset()
        self.breaker = BackoffTimer()
        self.failures = FailureLog()
        self.stats = Stats()
        self._limits = limits_of(self.settings)
        for given in (client, scheduler):
            if given is not None:
                self.stats.attach(given)

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = sync_client(self.settings)
            self.stats.attach(self._client)
        return self._client

    @property
    def scheduler(self) -> Any:
        if self._scheduler is None:
            self._scheduler = sync_scheduler(self.settings)
            self.stats.attach(self._scheduler)
        return self._scheduler

    def _park_target(self, trio: QueueTrio, account: str) -> ParkTarget | None:
        if self.settings.parking == "off":
            return None
        if trio.delay not in self._park_targets:
            try:
                url = self.resolver.url(self.client, trio.delay, account)
                error_url = self.resolver.url(self.client, trio.error, account)
            except SqsOperationError as exc:
                log.warning("scheduler.no_target", queue=trio.delay, code=exc.code)
                return None
            target = park_target(self.settings, self.client, url, error_url)
            self._park_targets[trio.delay] = target
        return self._park_targets[trio.delay]

    def _park(self, park: ParkStep) -> None:
        for out, request in park.todo:
            error, existing = schedules.create(self.scheduler, request)
            park.settle(out, request, error, self._clock(), existing)

    def __call__(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        local_ms = int(self._clock() * 1000)
        failures: list[str] = []
        by_source: dict[str, list[dict[str, Any]]] = {}
        for record in event.get("Records", []):
            by_source.setdefault(record.get("eventSourceARN", ""), []).append(record)
        for arn, records in by_source.items():
            failures += self._handle(arn, records, local_ms)
        return {"batchItemFailures": [{"itemIdentifier": i} for i in failures]}

    def _handle(self, arn: str, records: list[dict[str, Any]], local_ms: int) -> list[str]:
        parts = arn.split(":")
        try:
            account, delay_queue = parts[4], parts[5]
            trio = self.resolver.trio_of_delay_queue(delay_queue)
        except (IndexError, InvalidQueueName) as exc:
            # Not one of ours: fail the records so they stay in the queue and are noticed.
            log.error("lambda.bad_event_source", event_source_arn=arn, detail=str(exc))
            return [r["messageId"] for r in records]
        outs = decide_batch(
            [from_lambda(r) for r in records],
            local_ms=local_ms,
            offset=self.offset,
            lim=self._limits,
            source_queue=trio.delay,
            failures=self.failures,
        )
        park = ParkStep(
            outs,
            target=self._park_target(trio, account),
            trio=trio,
            breaker=self.breaker,
            stats=self.stats,
            now=self._clock(),
        )
        self._park(park)  # parked records are not failures: Lambda deletes them
        d = Dispatch(
            park.rest,
            trio=trio,
            breaker=self.breaker,
            failures=self.failures,
            stats=self.stats,
            now=self._clock(),
            max_bytes=self.settings.max_message_bytes,
        )
        for batch in d.batches:
            try:
                url = self.resolver.url(self.client, batch.queue, account)
                resp = self.client.send_message_batch(QueueUrl=url, Entries=batch.entries())
            except SqsOperationError as exc:
                d.failed(batch, exc, self._clock())
                continue
            except (ClientError, BotoCoreError) as exc:
                d.failed(
                    batch, self.resolver.error(exc, "SendMessageBatch", batch.queue), self._clock()
                )
                continue
            d.settled(batch, resp)
        self._hold(trio, account, d)
        return [h.out.source.message_id for h in d.held]

    def _hold(self, trio: QueueTrio, account: str, d: Dispatch) -> None:
        """Keep failed records out of sight for their backoff; Lambda would otherwise retry
        them after the queue's visibility timeout, whatever the cause."""
        for entries in d.hold_entries():
            try:
                url = self.resolver.url(self.client, trio.delay, account)
                self.client.change_message_visibility_batch(QueueUrl=url, Entries=entries)
            except (SqsOperationError, ClientError, BotoCoreError) as exc:
                code = exc.code if isinstance(exc, SqsOperationError) else error_code(exc)
                log.warning("delay.backoff_failed", queue=trio.delay, code=code, count=len(entries))


_handler: Handler | None = None


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """The Lambda entry point."""
    global _handler
    if _handler is None:
        settings = load_settings()
        configure(settings.log_format, settings.log_level)
        _handler = Handler(settings)
    return _handler(event, context)
