"""Unrestricted delayed delivery for Amazon SQS.

The public names, importable from the package itself (``from sqsdelay import Sender``) or
from the module that documents each (``sqsdelay.sender``, ``sqsdelay.consumer``,
``sqsdelay.settings``, ``sqsdelay.errors``, ``sqsdelay.aws.recurring``): both paths stay.

Each is imported on first use (PEP 562), so ``import sqsdelay`` alone loads neither boto3
nor pydantic: the CLI, the cost job and the integrations import only what they use.

An asyncio twin is the name with ``Async``/``async_`` in front (``AsyncSender``,
``async_retry_later``), and every entry point takes ``settings=`` (docs/architecture.md,
"One public API"). ``aretry_later`` is the deprecated name of ``async_retry_later``, kept for
one release outside ``__all__``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module that defines it (and documents it, once).
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        ("AsyncSender", "BatchResult", "Message", "MessageOptions", "SendFailure"),
        "sqsdelay.sender",
    ),
    **dict.fromkeys(("SendResult", "Sender"), "sqsdelay.sender"),
    **dict.fromkeys(
        (
            "AsyncGuard",
            "AsyncRetryPolicy",
            "Backoff",
            "Guard",
            "OriginalNotDeleted",
            "Outcome",
            "Retried",
            "RetryLater",
            "RetryPolicy",
            "async_retry_later",
            "handle_batch",
            "retry_later",
        ),
        "sqsdelay.consumer",
    ),
    "Settings": "sqsdelay.settings",
    **dict.fromkeys(("AsyncSchedules", "Schedules"), "sqsdelay.aws.recurring"),
    **dict.fromkeys(
        (
            "ConfigError",
            "GuardError",
            "InvalidDelay",
            "InvalidInput",
            "InvalidMessage",
            "InvalidSchedule",
            "MessageTooLarge",
            "QueueMissing",
            "SqsDelayError",
            "SqsOperationError",
            "TooManyAttributes",
        ),
        "sqsdelay.errors",
    ),
}

# Old names kept one release (each warns when used, naming its replacement): not in __all__.
_DEPRECATED: dict[str, str] = {"aretry_later": "sqsdelay.consumer"}

# Written out for linters and readers; tests/test_public_api.py checks it is _HOMES's keys.
__all__ = [
    "AsyncGuard",
    "AsyncRetryPolicy",
    "AsyncSchedules",
    "AsyncSender",
    "Backoff",
    "BatchResult",
    "ConfigError",
    "Guard",
    "GuardError",
    "InvalidDelay",
    "InvalidInput",
    "InvalidMessage",
    "InvalidSchedule",
    "Message",
    "MessageOptions",
    "MessageTooLarge",
    "OriginalNotDeleted",
    "Outcome",
    "QueueMissing",
    "Retried",
    "RetryLater",
    "RetryPolicy",
    "Schedules",
    "SendFailure",
    "SendResult",
    "Sender",
    "Settings",
    "SqsDelayError",
    "SqsOperationError",
    "TooManyAttributes",
    "async_retry_later",
    "handle_batch",
    "retry_later",
]

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time, __getattr__ below
    from sqsdelay.aws.recurring import AsyncSchedules, Schedules
    from sqsdelay.consumer import (
        AsyncGuard,
        AsyncRetryPolicy,
        Backoff,
        Guard,
        OriginalNotDeleted,
        Outcome,
        Retried,
        RetryLater,
        RetryPolicy,
        async_retry_later,
        handle_batch,
        retry_later,
    )
    from sqsdelay.consumer import aretry_later as aretry_later  # deprecated
    from sqsdelay.errors import (
        ConfigError,
        GuardError,
        InvalidDelay,
        InvalidInput,
        InvalidMessage,
        InvalidSchedule,
        MessageTooLarge,
        QueueMissing,
        SqsDelayError,
        SqsOperationError,
        TooManyAttributes,
    )
    from sqsdelay.sender import (
        AsyncSender,
        BatchResult,
        Message,
        MessageOptions,
        Sender,
        SendFailure,
        SendResult,
    )
    from sqsdelay.settings import Settings


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name) or _DEPRECATED.get(name)
    if home is None:
        raise AttributeError(f"module 'sqsdelay' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__} - _DEPRECATED.keys())
