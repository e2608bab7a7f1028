"""Dramatiq on SQS with delays and retry backoffs of any length: a drop-in replacement for
dramatiq-sqs's broker.

    from sqsdelay.dramatiq import SQSBroker  # instead of: from dramatiq_sqs import SQSBroker
    broker = SQSBroker(namespace="myapp")

dramatiq-sqs's `SQSBroker.enqueue` refuses a delay over 15 minutes (`MessageDelayTooLong`),
and so does SQS: `send_with_options(delay=...)` for tomorrow fails, and so does every retry of
the `Retries` middleware whose backoff passes 15 minutes (its `max_backoff` is 7 days). This
subclass sends such a message (any delay beyond the native delay, to the millisecond) through
sqsdelay to the queue's delay queue (`<namespace>_<queue>-delay.fifo`, created by
`sqsdelay install <namespace>_<queue>`), with
the body dramatiq-sqs would have sent; `sqsdelay worker <namespace>_<queue>` hands it over when
it is due and the Dramatiq worker runs it as an ordinary message. A delay within
SQSDELAY_MAX_NATIVE_DELAY_SECONDS, and a message without a delay, are sent by dramatiq-sqs
itself, a fraction of a second rounded up (dramatiq-sqs rounds it down): never early.

What this relies on in dramatiq-sqs 0.4 (`dramatiq_sqs/broker.py`, `SQSBroker`):
- `enqueue(message, *, delay)` sends `b64encode(message.encode())` with `DelaySeconds = delay //
  1000` after `_ensure_queue(message.queue_name)`, refuses a body over `max_message_size`, and
  emits `before_enqueue`/`after_enqueue` around the send; this class does the same on its route.
- `self.sqs` is the boto3 SQS resource built from the broker's boto3 options (its client sends
  sqsdelay's messages too); the SQS name of a queue is `<namespace>_<queue>`.

The Dramatiq message id is sqsdelay's message id: with SQSDELAY_REGISTRY=dynamodb,
`sqsdelay scheduled <namespace>_<queue>` lists a delayed message and `sqsdelay cancel
<namespace>_<queue> <message_id>` cancels it. A retry keeps its message id and is a new send:
never deduplicated away (docs/fifo-destinations.md, "Duplicates").
"""

from __future__ import annotations

import threading
import time
from base64 import b64encode
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqsdelay import deprecations, errors, otel
from sqsdelay.core import delays, framework_queues
from sqsdelay.core import trace_context as otel_context
from sqsdelay.extras import require

require("dramatiq", "sqsdelay.dramatiq")

import dramatiq  # noqa: E402
import dramatiq_sqs  # noqa: E402
from dramatiq.common import q_name  # noqa: E402

from sqsdelay.settings import Settings  # noqa: E402

if TYPE_CHECKING:
    from sqsdelay.aws.sender import Sender


class MessageTooLarge(errors.MessageTooLarge, dramatiq_sqs.MessageTooLarge):
    """Too large once sqsdelay's attributes are added: caught as either library's error."""


class MessageDelayTooLong(errors.InvalidDelay, dramatiq_sqs.MessageDelayTooLong):
    """A delay beyond SQSDELAY_MAX_DELAY_SECONDS: caught as either library's error."""


class SQSBroker(dramatiq_sqs.SQSBroker):
    """dramatiq-sqs's broker, with delays beyond SQS's 15 minutes sent through sqsdelay.

    It takes dramatiq-sqs's arguments, plus `settings`: sqsdelay's `Settings` (default:
    SQSDELAY_* from the environment). `sqsdelay=` (a `Settings` or its fields) is the
    deprecated form."""

    def __init__(
        self,
        *,
        settings: Settings | None = None,
        sqsdelay: Settings | dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        settings = deprecations.settings_of(settings, sqsdelay, old_form="SQSBroker(sqsdelay=...)")
        framework_queues.check_no_prefix(
            settings.queue_prefix, "Dramatiq", "dramatiq-sqs's SQS names (<namespace>_<queue>)"
        )
        self.sqsdelay_settings = settings
        if otel.enabled(settings):  # the handler's span, from the options' trace context
            self.add_middleware(TraceContext(settings))
        self._sender: Sender | None = None
        self._sending = threading.Lock()  # actors enqueue from many worker threads

    def enqueue(
        self, message: dramatiq.Message[Any], *, delay: int | None = None
    ) -> dramatiq.Message[Any]:
        native = self.sqsdelay_settings.max_native_delay_seconds
        message = with_trace_context(message, self.sqsdelay_settings)
        # Within the native delay: dramatiq-sqs sends it, rounded up to whole seconds first
        # (`native_delay`). Beyond it, even by a fraction: through sqsdelay.
        if delay is None or not delay > native * 1000:
            result: dramatiq.Message[Any] = super().enqueue(message, delay=native_delay(delay))
            return result
        queue_name = message.queue_name
        self._ensure_queue(queue_name)
        body = b64encode(message.encode()).decode()
        if len(body) > self.max_message_size:
            raise MessageTooLarge(
                f"Messages in SQS can be at most {self.max_message_size} bytes large."
            )
        name = f"{self.namespace}_{queue_name}" if self.namespace else queue_name
        # the sender loads with the first long delay: `import sqsdelay.dramatiq` stays light
        from sqsdelay.aws.sender import Message, plan

        try:  # refused before the hooks run and before anything is sent
            delayed = Message(body, delay=_milliseconds(delay), id=message.message_id)
            plan(name, delayed, self.sqsdelay_settings, now=time.time())
        except errors.MessageTooLarge as exc:
            raise MessageTooLarge(str(exc)) from None
        except errors.InvalidDelay as exc:
            raise MessageDelayTooLong(str(exc)) from None
        self.logger.debug("Enqueueing message %r on queue %r.", message.message_id, queue_name)
        self.emit_before("enqueue", message, delay)
        with self._sending:
            self._sender_of().send(name, body, delay=delayed.delay, id=delayed.id)
        self.emit_after("enqueue", message, delay)
        return message

    def _sender_of(self) -> Sender:
        from sqsdelay.aws.sender import Sender

        if self._sender is None:
            self._sender = Sender(self.sqsdelay_settings, client=self.sqs.meta.client)
        return self._sender


def with_trace_context(message: dramatiq.Message[Any], settings: Settings) -> dramatiq.Message[Any]:
    """The message with the active W3C trace context in its options (its body: dramatiq-sqs
    reads no message attributes), unless it has one (a retry keeps its producer's)."""
    if otel_context.TRACEPARENT in message.options:
        return message
    carrier = otel.active_context(settings)
    return message.copy(options={**message.options, **carrier}) if carrier else message


class TraceContext(dramatiq.Middleware):
    """An actor's OpenTelemetry span (`process <namespace>_<queue>`, the SQS queue's name as
    the worker's spans name it), linked to the enqueuer's trace context in the message's
    options, or its child (SQSDELAY_OTEL_PARENT=child); a failed actor's span records the
    exception and has status ERROR."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._open = threading.local()  # a worker thread processes one message at a time

    def before_process_message(self, broker: Any, message: Any) -> None:
        carried: dict[str, Any] = {
            str(k): {"DataType": "String", "StringValue": str(v)}
            for k, v in message.options.items()
            if k in otel_context.FIELDS
        }
        namespace = getattr(broker, "namespace", None)
        queue = q_name(message.queue_name)  # a delay queue's name is its queue's
        # the received SQS message, when dramatiq-sqs's consumer handed it (its `_SQSMessage`)
        sqs_id = getattr(getattr(message, "_sqs_message", None), "message_id", None)
        opened = otel.consumer_span(
            self.settings,
            carried,
            f"{namespace}_{queue}" if namespace else queue,
            sqs_id if isinstance(sqs_id, str) else None,
            message_id=message.message_id,
        )
        self._open.held = (opened, opened.__enter__())

    def after_process_message(
        self, broker: Any, message: Any, *, result: Any = None, exception: Any = None
    ) -> None:
        held = getattr(self._open, "held", None)
        if held is not None and isinstance(exception, BaseException):
            otel.failed(held[1], exception)
        self._close()

    def after_skip_message(self, broker: Any, message: Any) -> None:
        self._close()

    def _close(self) -> None:
        held = getattr(self._open, "held", None)
        self._open.held = None
        if held is not None:
            held[0].__exit__(None, None, None)


def native_delay(delay: int | None) -> int | None:
    """The delay to give dramatiq-sqs, which sends `delay // 1000` as DelaySeconds: a
    positive number of milliseconds rounded up to whole seconds, so that SQS never runs it
    early (2,563 ms would be DelaySeconds 2, 0.56 s early). Anything else (None, 0, a
    negative or non-integer value) is left as dramatiq-sqs treats it."""
    if isinstance(delay, int) and not isinstance(delay, bool) and delay > 0:
        return delays.whole_seconds(delay) * 1000
    return delay


def _milliseconds(delay: float) -> timedelta:
    try:
        return timedelta(milliseconds=delay)
    except (OverflowError, ValueError):  # beyond any date: beyond any maximum delay too
        raise errors.InvalidDelay(
            f"a delay of {delay} ms is longer than the maximum (SQSDELAY_MAX_DELAY_SECONDS)"
        ) from None


def periodic(
    *,
    cron: str | None = None,
    rate: str | None = None,
    timezone: str = "UTC",
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    name: str | None = None,
) -> Any:
    """Declare a recurring schedule on an actor, as periodiq's `periodic=` does, for
    `sqsdelay schedule sync --dramatiq-module MODULE` to put on EventBridge Scheduler (no
    scheduler process runs):

        @sqsdelay.dramatiq.periodic(cron="0 9 * * MON-FRI", timezone="Europe/Berlin")
        @dramatiq.actor
        def report(): ...

    Stack it for several schedules (each needs `name=` then). The cron or rate is checked
    at sync, with every other entry, before any call (docs/schedules.md, "Moving off beat").
    """
    declared = {
        "cron": cron,
        "rate": rate,
        "timezone": timezone,
        "args": tuple(args),
        "kwargs": dict(kwargs or {}),
        "name": name,
    }

    def decorate(actor: Any) -> Any:
        # an attribute, not an actor option: the broker refuses options no middleware knows
        found = list(getattr(actor, "sqsdelay_periodic", ()))
        actor.sqsdelay_periodic = [declared, *found]
        return actor

    return decorate
