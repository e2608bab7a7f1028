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

This module imports nothing heavy: kombu's SQS transport and boto3 load when the app first
connects.
"""

from __future__ import annotations

from typing import Any

TRANSPORT = "sqsdelay.aws.celery_transport:Transport"


def configure(app: Any, **settings: Any) -> None:
    """Make `app` (a Celery app with an SQS broker) publish delayed tasks through sqsdelay.

    `settings` override sqsdelay's settings (otherwise read from SQSDELAY_* variables), as
    `Settings` fields: `configure(app, max_native_delay_seconds=900, registry="dynamodb")`.
    """
    from sqsdelay.errors import ConfigError
    from sqsdelay.extras import require
    from sqsdelay.settings import Settings

    require("celery", "sqsdelay.celery")
    url = app.conf.broker_write_url or app.conf.broker_url or ""
    scheme = str(url).partition("://")[0] if "://" in str(url) else ""
    if scheme != "sqs":
        raise ConfigError(
            "sqsdelay.celery needs Celery's SQS broker: set broker_url to 'sqs://...' "
            f"(this app's broker is {scheme + '://' if scheme else 'not set'})"
        )
    resolved = Settings(**settings)
    if resolved.queue_prefix:
        raise ConfigError(
            "with Celery, queue names are Celery's SQS names, its queue_name_prefix included: "
            f"leave SQSDELAY_QUEUE_PREFIX empty (it is {resolved.queue_prefix!r})"
        )
    options = dict(app.conf.broker_transport_options or {})
    options["sqsdelay"] = {"settings": resolved, "timezone": app.timezone}
    app.conf.broker_transport_options = options
    app.conf.broker_transport = TRANSPORT
