"""When an empty delay queue need not be long-polled (pure).

Every message in a delay queue is invisible for the queue's DelaySeconds (the cycle) after
it is sent or requeued: FIFO queues have no per-message delay. So if a delay queue holds
nothing (visible, in flight and delayed all zero) at time t, nothing in it can become
visible before t + cycle. SQS's approximate counts lag: a message sent at s shows in them
by s + lag at the latest. Checked every `period` seconds, a message sent at s is seen by
s + lag + period, and long polling starts then; it becomes visible at s + cycle. With
period = cycle - lag - margin, long polling starts at least `margin` before it is visible:
the idle rule never makes a message late. `docs/architecture.md` has the figures.
"""

from collections.abc import Mapping

COUNTS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


def margin_seconds(cycle: float) -> float:
    """Room between the last check that could miss a message and its visibility: 30 s at the
    900 s cycle, less for a test cycle."""
    return min(30.0, cycle / 4)


def check_period(cycle: float, lag: float) -> float | None:
    """Seconds between the counts' checks of an empty delay queue; None when the cycle is
    too short for the lag and the margin (the default lag of 60 s: cycles up to 80 s)."""
    period = cycle - lag - margin_seconds(cycle)
    return period if period > 0 else None


def _number(attributes: Mapping[str, str], name: str) -> int | None:
    value = attributes.get(name)
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


def count(attributes: Mapping[str, str], name: str) -> int:
    """One of the counts; 0 when it is missing or not a number."""
    return _number(attributes, name) or 0


def holds_something(attributes: Mapping[str, str]) -> bool:
    """Any message visible, in flight or delayed (a missing or odd count counts as some)."""
    return any((n := _number(attributes, name)) is None or n > 0 for name in COUNTS)
