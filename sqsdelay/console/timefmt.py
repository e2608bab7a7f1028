"""Times as the console shows and reads them: UTC and relative ("in 3 h 12 min"), and the
ISO 8601 times its forms take (a zone is required: a time without one is ambiguous)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqsdelay.errors import InvalidDelay


def relative(due_ms: int, now_ms: int) -> str:
    """'in 3 h 12 min', '5 min ago', 'now' (within a second)."""
    seconds = round((due_ms - now_ms) / 1000)
    if seconds == 0:
        return "now"
    left = abs(seconds)
    days, left = divmod(left, 86_400)
    hours, left = divmod(left, 3600)
    minutes, secs = divmod(left, 60)
    parts = [f"{days} d"] if days else []
    if hours:
        parts.append(f"{hours} h")
    if minutes and not days:
        parts.append(f"{minutes} min")
    if not parts:
        parts.append(f"{secs} s")
    text = " ".join(parts[:2])
    return f"in {text}" if seconds > 0 else f"{text} ago"


def utc(due_ms: int) -> str:
    return datetime.fromtimestamp(due_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def readable(ms: object) -> bool:
    """Whether a time read from elsewhere (a schedule's `sqsdelay.DueAt`, a registry
    record's `due_ms`) can be shown: an integer within the years 1 to 9999. A page shows a
    row whose time is not as unreadable and the others as usual."""
    if not isinstance(ms, int) or isinstance(ms, bool):
        return False
    try:
        utc(ms)
    except (OverflowError, ValueError, OSError):
        return False
    return True


def parse_time(text: str, what: str) -> datetime:
    """An ISO 8601 time with a zone (Z or +01:00); `InvalidDelay` saying what to write."""
    value = text.strip()
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidDelay(
            f"{what} {value[:40]!r} is not an ISO 8601 time: write e.g. 2027-01-31T09:00:00Z"
        ) from None
    if when.tzinfo is None:
        raise InvalidDelay(
            f"{what} {value[:40]!r} has no time zone: add Z (UTC) or an offset such as +01:00"
        )
    return when
