"""Where moto 5.2's SQS differs from Amazon SQS in ways that would hide sqsdelay's bugs or
make its messages late, the embedded emulator behaves as SQS does (`mend`).

- Deduplication window: SQS drops a FIFO message whose `MessageDeduplicationId` was sent in
  the last five minutes, even after the first copy was received and deleted. moto compares it
  only with the messages still in the queue, so a lost retry (the same id sent again after a
  hand-over) passes on moto and is dropped on SQS. The emulator keeps the window: per queue,
  or per message group with `DeduplicationScope=messageGroup`, and only the window decides
  (moto's own check compares ids across groups even with `messageGroup`, so a same-id message
  of another group was dropped while the first copy was queued).
- Long polls: moto copies the set of FIFO message groups in flight when a long poll starts
  and never returns a message of such a group during that poll, even after the message in
  flight is deleted (a requeue in its original's group waited out the whole 20 s). It also
  looks for newly visible messages only once a second. The emulator's long poll is a series
  of moto's own short receives, each with fresh groups, woken by every send, delete and
  visibility change (a message released to visibility 0 came back after 1 s, not at once)
  and at the moment the next delayed or invisible message becomes visible.
- System attributes in batches: moto keeps `AWSTraceHeader` from SendMessage but drops it
  from SendMessageBatch entries, where SQS keeps it; the emulator keeps it.
- Speed: moto reads the clock through a timezone-aware datetime (15 us) for every message
  each time it counts a queue, and it counts the queue three times on every send: 200 sends
  into a FIFO queue took 10 s, 400 took 18 s more, so a burst could not be loaded in time.
  The emulator reads `time.time()` (the same clock) for a message's visibility.

The smallest reproduction of the second, on moto without the mend: a FIFO queue; receive m1
of group G; start a 20 s long poll; send m2 to G; delete m1. SQS (and LocalStack) return m2
when m1 is deleted; moto returns nothing after 20 s.
"""

from __future__ import annotations

import threading
import time
from typing import Any

WINDOW_MS = 300_000  # SQS's five minutes
_MAX_WAIT_S = 1.0  # a change moto makes without a send or delete (a purge) is seen this soon


# moto's SQS backend reads and changes a queue's messages without a lock: a FIFO receive
# iterating its message groups while another request thread added one failed with "Set
# changed size during iteration" (a 500, and a message held back for minutes, in a fresh
# clone's `make test`). Every read and change of messages here is one at a time; a long
# poll waits outside the lock (each `receive` is a short one).
_SERIAL = threading.RLock()


def mend() -> None:
    """Teach moto's SQS the deduplication window and prompt long polls (idempotent)."""
    from moto.sqs.models import Message, Queue, SQSBackend

    if getattr(SQSBackend.receive_message, "sqsdelay", False):
        return
    add, delete, receive = Queue.add_message, Queue.delete_message, SQSBackend.receive_message
    send_batch = SQSBackend.send_message_batch
    change_visibility = SQSBackend.change_message_visibility

    def add_message(self: Any, message: Any) -> None:
        with _SERIAL:
            _add_message(self, message)
        _changed(self)

    def _add_message(self: Any, message: Any) -> None:
        if self.fifo_queue and message.deduplication_id:
            if _seen_lately(self, message):
                return  # as SQS: the send succeeds and nothing is added
            # The window has decided: moto's own check (across groups, whatever the scope)
            # must not drop it. Content-based ids are set before this, so none is missed.
            dedup, message.deduplication_id = message.deduplication_id, None
            try:
                add(self, message)
            finally:
                message.deduplication_id = dedup
        else:
            add(self, message)

    def change_message_visibility(
        self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int
    ) -> None:
        with _SERIAL:
            change_visibility(self, queue_name, receipt_handle, visibility_timeout)
        _changed(self.get_queue(queue_name))  # a release to 0 wakes the long polls now

    def delete_message(self: Any, receipt_handle: str) -> None:
        with _SERIAL:
            delete(self, receipt_handle)
        _changed(self)

    def receive_message(
        self: Any,
        queue_name: str,
        count: int,
        wait_seconds_timeout: int,
        visibility_timeout: int,
        message_attribute_names: list[str] | None = None,
    ) -> list[Any]:
        from moto.core.utils import unix_time_millis

        queue = self.get_queue(queue_name)
        end = unix_time_millis() + (wait_seconds_timeout or 0) * 1000
        while True:
            seen = _version(queue)
            with _SERIAL:
                got: list[Any] = receive(
                    self, queue_name, count, 0, visibility_timeout, message_attribute_names
                )
            now = unix_time_millis()
            if got or now >= end:
                return got
            wake = min(end, _next_visible_ms(queue, now) or end, now + _MAX_WAIT_S * 1000)
            _wait_for_change(queue, seen, max(0.0, (wake - now) / 1000))

    def send_message_batch(self: Any, queue_name: str, entries: dict[str, Any]) -> Any:
        with _SERIAL:
            messages, failed = send_batch(self, queue_name, entries)
        by_id = {entry["Id"]: entry for entry in entries.values()}
        for message in messages:
            system = by_id[getattr(message, "user_id", None)].get("MessageSystemAttributes")
            if system:
                message.system_attributes = system
        return messages, failed

    Message.visible = property(_visible)  # type: ignore[method-assign,assignment]
    Message.delayed = property(_delayed)  # type: ignore[method-assign,assignment]
    marked = (add_message, delete_message, receive_message, send_message_batch)
    for fn in (*marked, change_message_visibility):
        setattr(fn, "sqsdelay", True)  # noqa: B010 - a mark on a function
    Queue.add_message = add_message  # type: ignore[method-assign]
    Queue.delete_message = delete_message  # type: ignore[method-assign]
    SQSBackend.receive_message = receive_message  # type: ignore[method-assign]
    SQSBackend.send_message_batch = send_message_batch  # type: ignore[method-assign]
    SQSBackend.change_message_visibility = change_message_visibility  # type: ignore[method-assign]


def _visible(message: Any) -> bool:
    return bool(time.time() * 1000 > message.visible_at)


def _delayed(message: Any) -> bool:
    return bool(time.time() * 1000 < message.delayed_until)


def _version(queue: Any) -> int:
    return int(getattr(queue, "_sqsdelay_version", 0))


def _wait_for_change(queue: Any, seen: int, timeout: float) -> None:
    with queue._messages_lock:
        queue._messages_lock.wait_for(lambda: _version(queue) != seen, timeout=timeout)


def _changed(queue: Any) -> None:
    with queue._messages_lock:
        queue._sqsdelay_version = _version(queue) + 1
        queue._messages_lock.notify_all()


def _next_visible_ms(queue: Any, now: float) -> float | None:
    """When the next message that is delayed or in flight becomes visible, if any."""
    times = [max(m.visible_at, m.delayed_until) for m in list(queue._messages)]
    later = [t for t in times if t > now]
    return min(later) + 1 if later else None


def _seen_lately(queue: Any, message: Any) -> bool:
    """True when the message's deduplication id was sent to the queue in the last five
    minutes (SQS's window, counted from the first send); records it otherwise. Called
    under `_SERIAL`, which also guards the window."""
    per_group = getattr(queue, "deduplication_scope", "queue") == "messageGroup"
    key = (message.group_id if per_group else None, message.deduplication_id)
    sent = int(message.sent_timestamp)
    window: dict[Any, int] = queue.__dict__.setdefault("_sqsdelay_dedup", {})
    first = window.get(key)
    if first is not None and sent - first < WINDOW_MS:
        return True
    if len(window) > 10_000:  # forget what the window no longer covers
        for k in [k for k, t in window.items() if sent - t >= WINDOW_MS]:
            del window[k]
    window[key] = sent
    return False
