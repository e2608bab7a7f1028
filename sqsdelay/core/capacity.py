"""Room that follows the queues a worker drains: how many messages may sit in batches that
finish on their own (discovery that drops a queue gives its room back, and a room can shrink
below what is held).

Nothing ever waits for room. A batch that finds none is finished by its own receive loop,
which then takes no new batch until it is done: backpressure that cannot block. (A waiting
`acquire` could: when discovery dropped a destination's last queue the room shrank to 0, the
waiter never woke, and SIGTERM never completed; issue 45.)
"""

from __future__ import annotations


class Capacity:
    """At most `size` units held at once. `resize` takes effect at once for new holders;
    when it shrinks below what is held, the holders keep their units until they release."""

    def __init__(self, size: int = 0) -> None:
        self._size = max(0, size)
        self._held = 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def held(self) -> int:
        return self._held

    def resize(self, by: int) -> None:
        self._size = max(0, self._size + by)

    def try_acquire(self, units: int = 1) -> bool:
        """Take `units` if they fit; say whether they were taken."""
        if self._held + units > self._size:
            return False
        self._held += units
        return True

    def release(self, units: int = 1) -> None:
        self._held -= units
