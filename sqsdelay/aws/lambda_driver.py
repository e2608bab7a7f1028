"""Lambda mode: `sqsdelay.aws_lambda.handler` consumes SQS events from a delay queue.

Configure the event source mapping with batch size 10 and `ReportBatchItemFailures`. The
handler is a thin synchronous driver of the same step as the ECS worker (`core.step.handle`):
it only makes the calls the step asks for (`SyncCaller`). Records the step held are kept out
of sight for their backoff and returned as `batchItemFailures`; Lambda deletes the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqsdelay.aws.batch_runner import BatchRunner
from sqsdelay.aws.callers import SyncCaller
from sqsdelay.aws.clients import observe, sync_clients
from sqsdelay.aws.queue_urls import QueueResolver
from sqsdelay.core.emf import EmfWriter
from sqsdelay.core.flows import drive
from sqsdelay.core.outcomes import BatchEnds
from sqsdelay.core.received import Received, from_lambda
from sqsdelay.errors import InvalidQueueName
from sqsdelay.logs import configure, get_logger
from sqsdelay.settings import Settings, load_settings

log = get_logger("sqsdelay.lambda")
# What an invocation keeps for itself after the step: returning the failures.
_RETURN_MARGIN_SECONDS = 1.0


class Handler:
    """Holds what survives between warm invocations: clients, queue URLs and the step's
    state (clock offset, breakers, failure counts)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: Any = None,
        scheduler: Any = None,
        dynamodb: Any = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        write_metrics: Callable[[str], object] | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        self._given = {"sqs": client, "scheduler": scheduler, "dynamodb": dynamodb}
        self._clients: dict[str, Any] | None = None
        self._clock = clock
        self.resolver = QueueResolver(self.settings)
        # Lambda deletes every record not reported as failed: the step deletes nothing.
        self.batches = BatchRunner(self.settings, self.resolver, delete=False, clock=monotonic)
        self.state = self.batches.state
        self.stats = self.state.stats
        self.metrics = EmfWriter(
            self.settings.metrics_namespace,
            enabled=self.settings.metrics == "emf",
            write=write_metrics,
            clock=clock,
        )
        self._callers: dict[str, SyncCaller] = {}
        for given in (client, scheduler, dynamodb):
            if given is not None:
                observe(self.stats, given)

    @property
    def clients(self) -> dict[str, Any]:
        """SQS and the extra services, made at the first invocation and kept while warm."""
        if self._clients is None:
            self._clients = sync_clients(self.settings, self._given, self.stats)
        return self._clients

    def _caller(self, account: str) -> SyncCaller:
        if account not in self._callers:
            self._callers[account] = SyncCaller(
                self.clients, self.resolver, account, threads=self.settings.park_concurrency
            )
        return self._callers[account]

    def _deadline(self, context: Any, now: float) -> float:
        """The step may use the invocation's remaining time, less a margin to return, and
        never more than a worker's batch budget."""
        budget = self.settings.call_budget_seconds()
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        if callable(remaining):
            budget = min(budget, remaining() / 1000 - _RETURN_MARGIN_SECONDS)
        return now + budget

    def __call__(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        now = self._clock()
        deadline = self._deadline(context, self.batches.clock())
        failures: list[str] = []
        by_source: dict[str, list[dict[str, Any]]] = {}
        for record in event.get("Records", []):
            by_source.setdefault(str(record.get("eventSourceARN", "")), []).append(record)
        for arn, records in by_source.items():
            failures += self._handle(arn, records, int(now * 1000), deadline)
        self.metrics.flush(self.stats.tally, self.state.offset.estimate())
        return {"batchItemFailures": [{"itemIdentifier": i} for i in failures]}

    def _handle(
        self, arn: str, records: list[dict[str, Any]], local_ms: int, deadline: float
    ) -> list[str]:
        ids = [str(r.get("messageId", "")) for r in records]
        parts = arn.split(":")
        try:
            account, delay_queue = parts[4], parts[5]
            trio = self.resolver.trio_of_delay_queue(delay_queue)
        except (IndexError, InvalidQueueName) as exc:
            # Not one of ours: fail the records so they stay in the queue and are noticed.
            log.error("lambda.bad_event_source", event_source_arn=arn, detail=str(exc))
            return ids
        received: list[Received] = []
        failed: list[str] = []
        for record, ident in zip(records, ids, strict=True):
            try:
                received.append(from_lambda(record))
            except (KeyError, TypeError, ValueError) as exc:  # not an SQS record: leave it
                log.error("lambda.bad_record", message_id=ident, detail=type(exc).__name__)
                failed.append(ident)
        outcome = BatchEnds()
        caller = self._caller(account)
        try:
            flow = self.batches.flow(
                received,
                trio,
                self.clients["sqs"],
                local_ms=local_ms,
                deadline=deadline,
                account=account,
                outcome=outcome,
            )
            drive(flow, caller)
        except Exception:  # a fault of ours: what was already moved stays moved
            log.exception("batch.failed", queue=trio.delay, count=len(received))
        moved = {i for i, end in outcome.ends.items() if end != "held"}
        return failed + [r.message_id for r in received if r.message_id not in moved]


_handler: Handler | None = None


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """The Lambda entry point."""
    global _handler
    if _handler is None:
        settings = load_settings()
        configure(settings.log_format, settings.log_level)
        _handler = Handler(settings)
    return _handler(event, context)
