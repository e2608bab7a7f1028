"""A semaphore whose size follows the queues a worker drains (asyncio.Semaphore can grow by
releasing, but never shrink: discovery that drops a queue must give its room back)."""

from __future__ import annotations

import asyncio
from collections import deque


class Capacity:
    """At most `size` holders at once. `resize` takes effect at once for new holders; when it
    shrinks below what is held, the holders keep their places until they release."""

    def __init__(self, size: int = 0) -> None:
        self._size = max(0, size)
        self._held = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def size(self) -> int:
        return self._size

    @property
    def held(self) -> int:
        return self._held

    def resize(self, by: int) -> None:
        self._size = max(0, self._size + by)
        self._wake()

    async def acquire(self) -> None:
        if self._held < self._size and not self._waiters:
            self._held += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # granted as it was cancelled: give the place on
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        self._held -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._held < self._size:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._held += 1
                waiter.set_result(None)
