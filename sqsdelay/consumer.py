"""The consumer's side: `from sqsdelay.consumer import retry_later, Guard, ...`.

Retry a received message later, with any delay (`aws/retry_later.py`), and run a handler
once per message however many copies SQS delivers (`aws/guard.py`: `Guard` with boto3,
`AsyncGuard` with aioboto3). docs/consumers.md.

Each asyncio twin is the sync name with `Async`/`async_` in front (`AsyncGuard`,
`AsyncRetryPolicy`, `async_retry_later`); `aretry_later` and `RetryPolicy.aretry` are their
deprecated names, kept for one release (docs/architecture.md, "One public API").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqsdelay import otel
from sqsdelay.aws.guard import (
    DEFAULT_EXPIRES_AFTER_SECONDS,
    DEFAULT_IN_PROGRESS_SECONDS,
    AsyncGuard,
    Guard,
    GuardError,
    GuardInProgress,
    GuardTableMissing,
    Outcome,
)
from sqsdelay.aws.retry_later import (
    AsyncRetryPolicy,
    OriginalNotDeleted,
    Retried,
    RetryLater,
    RetryPolicy,
    async_retry_later,
    handle_batch,
    retry_later,
)
from sqsdelay.aws.retry_later import (
    aretry_later as aretry_later,  # deprecated (it warns): async_retry_later; not in __all__
)
from sqsdelay.core.idempotency import POWERTOOLS_KEY_JMESPATH
from sqsdelay.core.idempotency import powertools_key_jmespath as _powertools_key_jmespath
from sqsdelay.core.retries import Backoff

if TYPE_CHECKING:
    from sqsdelay.settings import Settings


def powertools_config(fallback: str | None = None, **options: Any) -> Any:
    """A Powertools `IdempotencyConfig` keyed as `Guard` keys (sqsdelay's id and the retry
    number), with the guard's expiry unless `options` give another: the one line a Powertools
    user adds. `fallback`: a JMESPath of the record for messages sqsdelay did not send."""
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    options.setdefault("expires_after_seconds", DEFAULT_EXPIRES_AFTER_SECONDS)
    return IdempotencyConfig(event_key_jmespath=_powertools_key_jmespath(fallback), **options)


@contextmanager
def traced(
    message: object, queue_url: str | None = None, *, settings: Settings | None = None
) -> Iterator[Any]:
    """Run a handler inside `with traced(message):` for its OpenTelemetry span (`process
    <queue>`, current while it runs), linked to the producer's span whose trace context
    the message carries, or its child with SQSDELAY_OTEL_PARENT=child (docs/opentelemetry.md).
    Yields the span, or None without OpenTelemetry (sqsdelay[otel]) or with SQSDELAY_OTEL=off.
    `settings`: a `Settings` (default: SQSDELAY_* from the environment)."""
    if settings is None:
        from sqsdelay.settings import load_settings

        settings = load_settings()
    with otel.message_span(settings, message, queue_url) as span:
        yield span


__all__ = [
    "DEFAULT_EXPIRES_AFTER_SECONDS",
    "DEFAULT_IN_PROGRESS_SECONDS",
    "POWERTOOLS_KEY_JMESPATH",
    "AsyncGuard",
    "AsyncRetryPolicy",
    "Backoff",
    "Guard",
    "GuardError",
    "GuardInProgress",
    "GuardTableMissing",
    "OriginalNotDeleted",
    "Outcome",
    "Retried",
    "RetryLater",
    "RetryPolicy",
    "async_retry_later",
    "handle_batch",
    "powertools_config",
    "retry_later",
    "traced",
]
