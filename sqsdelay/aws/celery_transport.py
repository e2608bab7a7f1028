"""kombu's SQS transport, with countdowns and ETAs of any length (selected by
`sqsdelay.celery.configure`).

What this relies on in kombu 5.x (`kombu/transport/SQS/__init__.py`, `Channel`):
- `_put(queue, message)` publishes one message. `message` is the dict that kombu's virtual
  transport serialises (`body`, `headers`, `properties`, ...); the SQS body is `dumps(message)`,
  base64-encoded by `AsyncMessage().encode` unless the `sqs_base64_encoding` option is off,
  after `properties["message_attributes"]` was taken out as the SQS MessageAttributes.
- `properties["delay_seconds"]` becomes the message's `DelaySeconds` (`_resolve_delay_seconds`).
- `canonical_queue_name(queue)` is the SQS name (`queue_name_prefix` + name); `sqs(queue=)`
  is the boto3 client kombu itself publishes with.
- A FIFO queue (`.fifo`) takes `properties["MessageGroupId"]` as the group, `"default"` when
  there is none, and drops `delay_seconds` with a warning: sqsdelay delays every countdown
  into it, in that group (docs/fifo-destinations.md). A standard queue takes the property too
  (SQS fair queues): sqsdelay sets it on the hand-over of a long countdown.
- `message["headers"]` are Celery's message headers (protocol 2), which a Celery worker
  makes attributes of `task.request`: with OpenTelemetry on, the active W3C trace context
  goes there on every route (`sqsdelay.celery` runs each task in a span linked to it).
Only publishing changes: a Celery worker that uses this transport receives as before.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from kombu.asynchronous.aws.sqs.message import AsyncMessage
from kombu.transport import SQS
from kombu.utils.json import dumps

from sqsdelay import otel
from sqsdelay.aws.sender import Sender
from sqsdelay.core import celery_eta
from sqsdelay.errors import ConfigError
from sqsdelay.settings import Settings

OPTION = "sqsdelay"  # the key of broker_transport_options that configure() fills


class Channel(SQS.Channel):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._senders: dict[int, Sender] = {}  # by id() of kombu's boto3 client

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        if message.get("redelivered"):  # kombu's requeue of a received message
            super()._put(queue, message, **kwargs)
            return
        options = self.transport_options.get(OPTION)
        if options is None:
            raise ConfigError(
                "this transport is set up by sqsdelay.celery.configure(app): call it instead "
                "of setting broker_transport by hand"
            )
        settings: Settings = options["settings"]
        headers = message.get("headers")
        if isinstance(headers, dict):  # in the body: the worker reads no message attributes
            headers.update(otel.missing_context(settings, headers))
        publish = celery_eta.plan(
            message.get("headers"),
            options["timezone"],
            now=time.time(),
            max_native=settings.max_native_delay_seconds,
        )
        if publish.how == "now":
            super()._put(queue, message, **kwargs)
            return
        name = self.canonical_queue_name(queue)
        properties = message.get("properties", {})
        fifo = name.endswith(".fifo")  # no native delay: every countdown goes through sqsdelay
        if publish.how == "native" and not fifo:
            message.setdefault("properties", {})["delay_seconds"] = publish.delay_seconds
            super()._put(queue, message, **kwargs)
            return
        assert publish.due is not None
        attributes = properties.pop("message_attributes", None) or {}
        body = dumps(message)
        if self.sqs_base64_encoding:
            body = AsyncMessage().encode(body)
        self._sender(name, settings).send(
            name,
            body,
            deliver_at=datetime.fromtimestamp(publish.due, UTC),
            id=(message.get("headers") or {}).get("id"),  # the task id: cancel takes it
            attributes=attributes,
            # a FIFO queue's group, or a standard (fair) queue's tenant as kombu passes it
            group_id=properties.get("MessageGroupId", "default" if fifo else None),
        )

    def _sender(self, name: str, settings: Settings) -> Sender:
        """One sender per SQS client kombu uses (one, unless queues are predefined)."""
        client = self.sqs(queue=name if self.predefined_queues else None)
        if id(client) not in self._senders:
            self._senders[id(client)] = Sender(settings, client=client)
        return self._senders[id(client)]


class Transport(SQS.Transport):
    Channel = Channel
