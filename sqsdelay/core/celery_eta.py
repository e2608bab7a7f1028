"""When a Celery task is due, and how it is published (pure: no kombu, no boto3).

Celery's message protocol 2 carries a countdown as the `eta` header: an ISO 8601 time,
with a zone when the app made it aware (a countdown always is), without one when the caller
gave a naive `eta=`. The Celery worker reads a naive ETA in the app's time zone
(`celery.worker.request.Request.eta`, `maybe_make_aware(eta, self.tzlocal)`); so do we.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any, Literal

from sqsdelay.errors import InvalidDelay

How = Literal["now", "native", "delayed"]


@dataclass(frozen=True)
class Publish:
    """`now`: as kombu would (no delay); `native`: kombu with `delay_seconds` (the ETA within
    SQS's own delay, rounded up); `delayed`: through sqsdelay, due at `due` (epoch s)."""

    how: How
    due: float | None = None
    delay_seconds: int = 0


def eta_of(headers: dict[str, Any] | None, zone: tzinfo) -> datetime | None:
    """The task's ETA as an aware datetime, or None when it has none."""
    raw = (headers or {}).get("eta")
    if raw is None:
        return None
    if isinstance(raw, datetime):
        eta = raw
    else:
        try:
            eta = datetime.fromisoformat(str(raw))
        except ValueError:
            raise InvalidDelay(
                f"the task's eta {raw!r} is not an ISO 8601 time: give a datetime or a countdown"
            ) from None
    return eta if eta.tzinfo is not None else eta.replace(tzinfo=zone)


def plan(headers: dict[str, Any] | None, zone: tzinfo, *, now: float, max_native: int) -> Publish:
    """How to publish a task: an ETA in the past runs at once (as Celery runs it); one within
    `max_native` seconds waits in SQS with DelaySeconds; a later one goes through sqsdelay."""
    eta = eta_of(headers, zone)
    if eta is None:
        return Publish("now")
    due = eta.timestamp()
    seconds = math.ceil(due - now)
    if seconds <= 0:
        return Publish("now", due)
    if seconds <= max_native:
        return Publish("native", due, seconds)
    return Publish("delayed", due, seconds)
