"""The dispatch step shared by the ECS worker and the Lambda handler (no I/O here).

`Dispatch` plans the SendMessageBatch calls for a received batch (grouped by target queue,
within the entry and size limits), reads each response, logs the outcome, and ends with
`sent` (safe to delete) and `held` (to keep out of sight for a backoff, then retry). The
adapters only make the calls: the worker then deletes `sent`, the Lambda reports `held` as
`batchItemFailures`; both hold with `hold_entries()`.

`ParkStep` comes first when parking is on: it makes the CreateSchedule requests, counts a
created (or already created) schedule as done, and turns every refusal into the requeue
the loop would have made, so Scheduler trouble never loses or holds a message.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqsdelay import batching, limits, parking, schedules
from sqsdelay._types import Target
from sqsdelay.backoff import BackoffTimer, retry_backoff_seconds, visibility_seconds
from sqsdelay.clients import error_code, is_service_fault
from sqsdelay.decision import Park
from sqsdelay.errors import InvalidMessage, SqsOperationError
from sqsdelay.failures import FailureLog, is_message_fault
from sqsdelay.logs import get_logger
from sqsdelay.processing import Outgoing, outgoing
from sqsdelay.queues import QueueTrio

log = get_logger("sqsdelay.dispatch")


@dataclass
class Stats:
    """Calls made (per API and queue or schedule group) and messages moved (per event)."""

    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)

    def attach(self, client: Any) -> None:
        """Count every call the client makes (SQS or Scheduler), with the queue or schedule
        group it names."""

        def count(model: Any, params: dict[str, Any], **_: Any) -> None:
            queue = params.get("QueueName") or str(params.get("QueueUrl", "")).rsplit("/", 1)[-1]
            self.calls[(model.name, queue or str(params.get("GroupName", "")))] += 1

        client.meta.events.register("before-parameter-build", count)

    @property
    def requests(self) -> Counter[str]:
        """Calls per API."""
        per_api: Counter[str] = Counter()
        for (api, _), n in self.calls.items():
            per_api[api] += n
        return per_api

    def as_dict(self) -> dict[str, Any]:
        requests = self.requests
        return {
            "requests": dict(requests),
            "messages": dict(self.events),
            "requests_total": sum(requests.values()),
        }


@dataclass(frozen=True)
class Batch:
    queue: str
    target: Target
    outs: list[Outgoing]

    def entries(self) -> list[dict[str, Any]]:
        return [{"Id": str(i), **o.entry} for i, o in enumerate(self.outs)]


@dataclass(frozen=True)
class Held:
    out: Outgoing
    wait_seconds: int
    reason: str


class Dispatch:
    def __init__(
        self,
        outs: list[Outgoing],
        *,
        trio: QueueTrio,
        breaker: BackoffTimer,
        failures: FailureLog,
        stats: Stats,
        now: float,
        max_bytes: int,
    ) -> None:
        self.trio = trio
        self._breaker = breaker
        self._failures = failures
        self._stats = stats
        self.sent: list[Outgoing] = []
        self.held: list[Held] = []
        ready = []
        for out in outs:
            wait = breaker.retry_in(trio.name(out.target), now)
            if wait > 0:  # the target is backing off: do not even try
                self.held.append(Held(out, visibility_seconds(wait), "target backing off"))
            else:
                ready.append(out)
        self.batches = [
            Batch(trio.name(ready[b[0]].target), ready[b[0]].target, [ready[i] for i in b])
            for b in batching.chunk(
                ready, key=lambda o: o.target, size=lambda o: o.size, max_bytes=max_bytes
            )
        ]

    def settled(self, batch: Batch, response: dict[str, Any]) -> None:
        """Read a SendMessageBatch response: log and sort every entry."""
        self._breaker.success(batch.queue)
        ok, failed = batching.read_batch_response(
            response, (str(i) for i in range(len(batch.outs)))
        )
        for i, out in enumerate(batch.outs):
            if str(i) in ok:
                self.sent.append(out)
                self._failures.forget(out.source.message_id)
                d = out.decision
                self._stats.events[d.event] += 1
                getattr(log, d.level)(d.event, **self._fields(out), **d.log_fields())
            else:
                f = failed[str(i)]
                self._entry_failed(batch.queue, out, f.code, f.message)

    def failed(self, batch: Batch, err: SqsOperationError, now: float) -> None:
        """A whole call failed. If SQS blamed the request's content, retry the entries one
        by one to find the culprit; otherwise the queue backs off and its messages wait."""
        if is_message_fault(err.code):
            if len(batch.outs) > 1:  # the adapters' loops pick these up
                self.batches.extend(Batch(batch.queue, batch.target, [o]) for o in batch.outs)
            else:
                self._entry_failed(batch.queue, batch.outs[0], err.code, err.detail)
            return
        wait = self._breaker.failure(batch.queue, now)
        log.error(
            "destination.unavailable",
            queue=batch.queue,
            target=batch.target,
            code=err.code,
            detail=err.detail,
            retry_in_seconds=wait,
        )
        for out in batch.outs:
            self._failures.record(
                out.source.message_id, f"{err.code}: {err.detail}", message_fault=False
            )
            self.held.append(Held(out, visibility_seconds(wait), err.code))

    def _entry_failed(self, queue: str, out: Outgoing, code: str, detail: str) -> None:
        fault = is_message_fault(code)
        record = self._failures.record(
            out.source.message_id, f"{code}: {detail}", message_fault=fault
        )
        log.warning(
            "delay.send_failed",
            message_id=out.source.message_id,
            queue=queue,
            code=code,
            detail=detail,
            message_fault=fault,
        )
        attempt = record.own_failures if fault else out.source.receive_count
        self.held.append(Held(out, retry_backoff_seconds(attempt), code))

    def hold_entries(self) -> list[list[dict[str, Any]]]:
        """ChangeMessageVisibilityBatch entries that keep held messages out of sight."""
        entries = [
            {
                "Id": str(i),
                "ReceiptHandle": h.out.source.receipt_handle,
                "VisibilityTimeout": h.wait_seconds,
            }
            for i, h in enumerate(self.held)
        ]
        step = limits.MAX_BATCH_ENTRIES
        return [entries[i : i + step] for i in range(0, len(entries), step)]

    def _fields(self, out: Outgoing) -> dict[str, Any]:
        return {
            "message_id": out.source.message_id,
            "group_id": out.source.system.get("MessageGroupId"),
            "destination": self.trio.destination,
            "receive_count": out.source.receive_count,
            "size_bytes": out.size,
        }


class ParkStep:
    """The parking of a decided batch. `todo`: (outgoing, CreateSchedule request) pairs for
    the adapter to send, each answered with `settle`; `parked`: done, delete the originals;
    `rest`: for `Dispatch` (other decisions, and the fallback requeue of failed parks)."""

    def __init__(
        self,
        outs: list[Outgoing],
        *,
        target: parking.ParkTarget | None,
        trio: QueueTrio,
        breaker: BackoffTimer,
        stats: Stats,
        now: float,
    ) -> None:
        self._trio = trio
        self._breaker = breaker
        self._stats = stats
        self.todo: list[tuple[Outgoing, dict[str, Any]]] = []
        self.parked: list[Outgoing] = []
        self.rest: list[Outgoing] = []
        backing_off = breaker.retry_in(parking.BREAKER_KEY, now) > 0
        for out in outs:
            d = out.decision
            if not isinstance(d, Park):
                self.rest.append(out)
            elif target is None or backing_off:
                self._loop(out, "scheduler backing off" if target else "no park target")
            else:
                try:
                    request = parking.create_schedule_request(
                        name=parking.schedule_name(trio.delay, d.message_id),
                        fire_ms=d.fire_ms,
                        target=target,
                        body=out.source.body,
                        attributes=d.attributes,
                        group_id=d.fallback.group_id,
                        dedup=parking.dedup_id(d.message_id, d.due_ms),
                    )
                except InvalidMessage as exc:
                    self._loop(out, str(exc))
                    continue
                self.todo.append((out, request))

    def settle(
        self,
        out: Outgoing,
        request: dict[str, Any],
        error: Exception | None,
        now: float,
        existing: dict[str, Any] | None = None,
    ) -> None:
        """The answer to one CreateSchedule. On ConflictException the adapter passes the
        schedule that exists (GetSchedule), if it could read it."""
        if schedules.accepted((error, existing), request):
            self._breaker.success(parking.BREAKER_KEY)
            self.parked.append(out)
            d = out.decision
            self._stats.events[d.event] += 1
            log.info(
                d.event,
                message_id=out.source.message_id,
                destination=self._trio.destination,
                schedule=request["Name"],
                fires=request["ScheduleExpression"],
                **d.log_fields(),
            )
            return
        assert error is not None
        code = error_code(error)
        if is_service_fault(error, parking.SERVICE_FAULT_CODES):
            wait = self._breaker.failure(parking.BREAKER_KEY, now)
            log.error("scheduler.unavailable", code=code, retry_in_seconds=wait)
        self._loop(out, code)

    def _loop(self, out: Outgoing, reason: str) -> None:
        """Keep it in the loop: the requeue the decision would have made without parking."""
        assert isinstance(out.decision, Park)
        self._stats.events["delay.park_skipped"] += 1
        log.warning("delay.park_skipped", message_id=out.source.message_id, reason=reason[:200])
        self.rest.append(outgoing(out.source, out.decision.fallback))
