"""Lambda mode: `sqsdelay.aws_lambda.handler` consumes SQS events from a delay queue.

Configure the event source mapping with batch size 10 and `ReportBatchItemFailures`. The
handler applies the same decision as the ECS worker, sends in batches, and returns
`batchItemFailures` for exactly the records it could not send; Lambda deletes the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sqsdelay import batching, names
from sqsdelay.clients import sync_client, translate
from sqsdelay.decision import ClockOffset, Limits
from sqsdelay.logs import configure, get_logger
from sqsdelay.processing import Outgoing, Target, decide_batch, event_fields, from_lambda
from sqsdelay.settings import Settings, load_settings

log = get_logger("sqsdelay.lambda")


class Handler:
    """Holds what survives between warm invocations: client, queue URLs, clock offset."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or load_settings()
        self._client = client
        self._clock = clock
        self._urls: dict[tuple[str, str], str] = {}
        self.offset = ClockOffset()
        self._limits = Limits(
            self.settings.max_native_delay_seconds,
            self.settings.max_attempts,
            self.settings.max_message_bytes,
        )

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = sync_client(self.settings)
        return self._client

    def _url(self, name: str, account: str) -> str:
        if (name, account) not in self._urls:
            kwargs = {"QueueOwnerAWSAccountId": account} if account else {}
            resp = self.client.get_queue_url(QueueName=name, **kwargs)
            self._urls[(name, account)] = resp["QueueUrl"]
        return self._urls[(name, account)]

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
        ids = [r["messageId"] for r in records]
        parts = arn.split(":")
        try:
            delay_queue, account = parts[5], parts[4]
            destination = names.destination_of_delay_queue(delay_queue)
        except (IndexError, ValueError) as exc:
            # Not one of ours: fail the records so they stay in the queue and are noticed.
            log.error("lambda.bad_event_source", event_source_arn=arn, detail=str(exc))
            return ids
        error_queue = names.error_queue_name(self.settings.error_queue, self.settings.queue_prefix)
        queues: dict[Target, str] = {
            "delay": delay_queue,
            "destination": destination,
            "error": error_queue,
        }
        outs = decide_batch(
            [from_lambda(r) for r in records],
            local_ms=local_ms,
            offset=self.offset,
            lim=self._limits,
            source_queue=delay_queue,
        )
        failed: list[str] = []
        batches = batching.chunk(
            outs,
            key=lambda o: o.target,
            size=lambda o: o.size,
            max_bytes=self.settings.max_message_bytes,
        )
        for batch in batches:
            failed += self._send(queues, account, destination, [outs[i] for i in batch])
        return failed

    def _send(
        self, queues: dict[Target, str], account: str, destination: str, outs: list[Outgoing]
    ) -> list[str]:
        name = queues[outs[0].target]
        entries = [{"Id": str(i), **o.entry} for i, o in enumerate(outs)]
        try:
            resp = self.client.send_message_batch(
                QueueUrl=self._url(name, account), Entries=entries
            )
        except (ClientError, BotoCoreError) as exc:
            err = translate(exc, "SendMessageBatch", name)
            log.error("destination.unavailable", queue=name, code=err.code, detail=err.detail)
            return [o.source.message_id for o in outs]
        ok, failed = batching.read_batch_response(resp, (str(i) for i in range(len(outs))))
        for i, o in enumerate(outs):
            if str(i) in ok:
                event, fields = event_fields(o, destination)
                (log.error if event == "delay.dead_lettered" else log.info)(event, **fields)
            else:
                log.warning(
                    "delay.send_failed",
                    message_id=o.source.message_id,
                    queue=name,
                    code=failed[str(i)].code,
                    detail=failed[str(i)].message,
                )
        return [o.source.message_id for i, o in enumerate(outs) if str(i) not in ok]


_handler: Handler | None = None


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """The Lambda entry point."""
    global _handler
    if _handler is None:
        settings = load_settings()
        configure(settings.log_format, settings.log_level)
        _handler = Handler(settings)
    return _handler(event, context)
