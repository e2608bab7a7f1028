"""Celery on SQS with countdowns and ETAs of any length.

    app = Celery("tasks", broker="sqs://")
    sqsdelay.celery.configure(app)

Afterwards a task published with a countdown or ETA within SQSDELAY_MAX_NATIVE_DELAY_SECONDS
goes to its Celery queue with DelaySeconds; a later one goes to `<queue>-delay.fifo`, and
`sqsdelay worker <queue>` hands it over when it is due. Either way the Celery worker gets
exactly the message kombu would have sent, when it is due, and runs it at once. Queue names
are Celery's SQS names, `queue_name_prefix` included (`sqsdelay install myapp-celery`), so
SQSDELAY_QUEUE_PREFIX stays empty. A task id is the message id: `sqsdelay cancel celery
<task id>` revokes a scheduled task.

With OpenTelemetry (`sqsdelay[otel]`, docs/opentelemetry.md) the transport puts the active
W3C trace context into the task message's headers on every route (a Celery worker reads no
SQS message attributes; the headers ride the delay in the body, unchanged), and each task
runs in a `process <queue>` span linked to it, or its child (SQSDELAY_OTEL_PARENT=child):
Celery's `task_prerun`/`task_postrun` signals, for this app's tasks only.

This module imports nothing heavy: kombu's SQS transport and boto3 load when the app first
connects.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqsdelay.settings import Settings

TRANSPORT = "sqsdelay.aws.celery_transport:Transport"


def configure(app: Any, *, settings: Settings | None = None, **fields: Any) -> None:
    """Make `app` (a Celery app with an SQS broker) publish delayed tasks through sqsdelay.

    `settings`: sqsdelay's `Settings` (default: SQSDELAY_* from the environment), e.g.
    `configure(app, settings=Settings(registry="dynamodb"))`. `Settings` fields given as
    keywords (`configure(app, registry="dynamodb")`) are the deprecated form.
    """
    from sqsdelay import deprecations
    from sqsdelay.core import framework_queues
    from sqsdelay.errors import ConfigError
    from sqsdelay.extras import require

    require("celery", "sqsdelay.celery")
    url = app.conf.broker_write_url or app.conf.broker_url or ""
    scheme = str(url).partition("://")[0] if "://" in str(url) else ""
    if scheme != "sqs":
        raise ConfigError(
            "sqsdelay.celery needs Celery's SQS broker: set broker_url to 'sqs://...' "
            f"(this app's broker is {scheme + '://' if scheme else 'not set'})"
        )
    resolved = deprecations.settings_of(
        settings, fields or None, old_form="sqsdelay.celery.configure(app, **fields)"
    )
    framework_queues.check_no_prefix(
        resolved.queue_prefix, "Celery", "Celery's SQS names, its queue_name_prefix included"
    )
    options = dict(app.conf.broker_transport_options or {})
    options["sqsdelay"] = {"settings": resolved, "timezone": app.timezone}
    app.conf.broker_transport_options = options
    app.conf.broker_transport = TRANSPORT
    from sqsdelay import otel

    if otel.enabled(resolved):
        TaskSpans(app, resolved).connect()


class TaskSpans:
    """Each task of `app` in its OpenTelemetry span (`process <queue>`), from the trace
    context in its message's headers. Started at `task_prerun` and ended at `task_postrun`,
    which Celery sends in the thread that runs the task, whatever the pool (a task applied
    eagerly inside another nests: a stack per thread)."""

    def __init__(self, app: Any, settings: Any) -> None:
        self.app = app
        self.settings = settings
        self._open = threading.local()

    def connect(self) -> None:
        from celery import signals

        uid = f"sqsdelay.celery.{id(self.app)}"  # configure() twice: one span per task
        signals.task_prerun.connect(self.prerun, weak=False, dispatch_uid=uid)
        signals.task_postrun.connect(self.postrun, weak=False, dispatch_uid=uid)
        signals.task_failure.connect(self.failure, weak=False, dispatch_uid=uid)

    def _stack(self) -> list[tuple[str, Any, Any]]:
        if not hasattr(self._open, "stack"):
            self._open.stack = []
        return self._open.stack  # type: ignore[no-any-return]

    def prerun(self, task_id: str | None = None, task: Any = None, **_: Any) -> None:
        if task is None or getattr(task, "app", None) is not self.app:
            return
        from sqsdelay import otel

        request = task.request
        given = getattr(request, "headers", None) or {}
        headers = {
            name: getattr(request, name, None) or given.get(name)
            for name in ("traceparent", "tracestate")
        }
        opened = otel.headers_span(self.settings, headers, self._queue(request), task_id)
        self._stack().append((str(task_id), opened, opened.__enter__()))

    def failure(self, task_id: str | None = None, exception: Any = None, **_: Any) -> None:
        from sqsdelay import otel

        for ident, _opened, span in reversed(self._stack()):
            if ident == str(task_id) and isinstance(exception, BaseException):
                otel.failed(span, exception)
                return

    def postrun(self, task_id: str | None = None, task: Any = None, **_: Any) -> None:
        stack = self._stack()
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][0] == str(task_id):
                opened = stack.pop(i)[1]
                opened.__exit__(None, None, None)
                return

    def _queue(self, request: Any) -> str:
        """The SQS name of the queue the task came from: Celery's prefix and the routing
        key (a queue's name, with Celery's default exchange)."""
        info = getattr(request, "delivery_info", None) or {}
        name = info.get("routing_key") or self.app.conf.task_default_queue
        options = self.app.conf.broker_transport_options or {}
        return f"{options.get('queue_name_prefix', '')}{name}"
