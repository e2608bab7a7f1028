"""Pausing a destination (docs/operator-controls.md): its delay queue's tag says so, every
runtime reads it at most once a period, and while it is paused the step holds every
hand-over (and a FIFO destination's forward) out of sight instead of sending it. Pure: the
state below and flows of the calls (`sqsdelay.core.flows`).

Why a tag on the delay queue: every worker of a fleet already has the queue, so it needs
no registry, no table and no new resource; ListQueueTags is one cheap call a period.
Why hold rather than requeue: a held message keeps its receipt handle, so the runtime that
holds it can release it the moment the destination resumes; a requeue cannot be called back.
It is held for one cycle (the native delay limit, 900 s): it cycles no faster than a requeue
does today, and a message held by a runtime that restarts (or by Lambda, which keeps no
handles) is back within one cycle of the resume, not the 12 hours SQS's largest visibility
would allow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqsdelay.core import queue_names, quotas
from sqsdelay.core.decision import Forward, HandOver
from sqsdelay.core.flows import Call, Fault, Flow
from sqsdelay.core.queue_trios import QueueTrio
from sqsdelay.logs import get_logger

if TYPE_CHECKING:  # the step's types: the step imports this module
    from sqsdelay.core.batch_in_hand import BatchInHand
    from sqsdelay.core.record_decisions import Outgoing

log = get_logger("sqsdelay.pause")

PAUSED_TAG = "sqsdelay:paused"
HOLD_REASON = "destination paused"
DEFAULT_CHECK_SECONDS = 30.0


def tag_queue(trio: QueueTrio) -> str:
    """The queue whose tag pauses a destination: its delay queue (also for the trio that
    drains a FIFO destination's staging queue)."""
    return queue_names.delay_queue_name(trio.destination)


def paused_in(tags: Mapping[str, str]) -> str | None:
    """When a destination was paused (the tag's value), or None when it is not."""
    return tags.get(PAUSED_TAG)


@dataclass
class _Seen:
    paused: bool = False
    read_at: float = float("-inf")  # on the driver's monotonic clock
    failing: bool = False  # the last read failed (said once until one succeeds)


@dataclass(frozen=True)
class Held:
    """A message this runtime holds for a pause: where, by which receipt handle, and when
    it is due (released in that order)."""

    queue: str
    handle: str
    due_ms: int


class Pauses:
    """Which destinations are paused, as their tags said when last read, and the messages
    this runtime holds for them (a runtime that restarts forgets them: they come back when
    their hold ends)."""

    def __init__(
        self, check_seconds: float = DEFAULT_CHECK_SECONDS, hold_seconds: int | None = None
    ) -> None:
        self.check_seconds = check_seconds
        self.hold_seconds = hold_seconds  # None: one cycle (the native delay limit)
        self._seen: dict[str, _Seen] = {}
        self._held: dict[str, dict[str, Held]] = {}

    def paused(self, queue: str) -> bool:
        seen = self._seen.get(queue)
        return seen is not None and seen.paused

    def answered(self, queue: str) -> bool:
        """Whether the last read of `queue`'s tags answered (a fault keeps the old state)."""
        seen = self._seen.get(queue)
        return seen is not None and seen.read_at > float("-inf") and not seen.failing

    def stale(self, queue: str, now: float) -> bool:
        seen = self._seen.get(queue)
        return seen is None or now - seen.read_at >= self.check_seconds

    def holding(self) -> list[str]:
        """The tag queues of destinations this runtime holds messages for."""
        return [q for q, held in self._held.items() if held]

    def held(self, queue: str) -> int:
        return len(self._held.get(queue, {}))

    def observed(self, queue: str, tags: Mapping[str, str] | None, now: float) -> bool | None:
        """A read of the tags (None: it failed, and the last known state stays). Returns the
        new state when it changed, else None."""
        seen = self._seen.setdefault(queue, _Seen())
        seen.read_at = now
        if tags is None:
            return None
        seen.failing = False
        paused = paused_in(tags) is not None
        if paused == seen.paused:
            return None
        seen.paused = paused
        return paused

    def failed(self, queue: str, fault: Fault) -> None:
        seen = self._seen.setdefault(queue, _Seen())
        if not seen.failing:
            seen.failing = True
            log.warning(
                "destination.pause_read_failed",
                queue=queue,
                code=fault.code,
                detail=fault.detail[:200],
                paused=seen.paused,
            )

    def hold(self, queue: str, message_id: str, held: Held) -> None:
        self._held.setdefault(queue, {})[message_id] = held

    def take(self, queue: str) -> list[Held]:
        """Forget the messages held for `queue`'s destination, in due order."""
        return sorted(self._held.pop(queue, {}).values(), key=lambda h: h.due_ms)


def hold_paused(batch: BatchInHand, outs: list[Outgoing]) -> list[Outgoing]:
    """While the destination is paused, hold every hand-over and forward for one cycle, or
    SQSDELAY_PAUSE_HOLD_SECONDS (remembering its receipt handle, to release it on resume);
    the rest goes on."""
    queue = tag_queue(batch.queues)
    pauses = batch.state.pauses
    if not pauses.paused(queue):
        return outs
    hold = pauses.hold_seconds or batch.config.limits.max_native_delay_seconds
    rest: list[Outgoing] = []
    for out in outs:
        d = out.decision
        if isinstance(d, HandOver | Forward):
            batch.hold(out.source, hold, HOLD_REASON)
            handle = batch.state.handle_of(out.source)
            # a forward has no due time of its own: it was handed over into staging in order
            due = d.due_ms if isinstance(d, HandOver) else _sent_ms(out)
            pauses.hold(queue, out.source.message_id, Held(batch.queues.delay, handle, due))
            batch.state.stats.events["delay.held_paused"] += 1
        else:
            rest.append(out)
    return rest


def _sent_ms(out: Outgoing) -> int:
    try:
        return int(out.source.system.get("SentTimestamp", "0"))
    except ValueError:
        return 0


def refresh(pauses: Pauses, queues: Iterable[str], now: float, timeout: float) -> Flow[list[str]]:
    """Read the tags of the queues whose reading is older than a period (one round), and
    release what is held for each destination found resumed. Returns the resumed ones."""
    stale = [q for q in dict.fromkeys(queues) if pauses.stale(q, now)]
    if not stale:
        return []
    replies = yield [Call("sqs", "ListQueueTags", {}, q, timeout) for q in stale]
    resumed: list[str] = []
    for queue, reply in zip(stale, replies, strict=True):
        if reply.fault is not None:
            pauses.observed(queue, None, now)
            pauses.failed(queue, reply.fault)
            continue
        changed = pauses.observed(queue, reply.response.get("Tags") or {}, now)
        if changed is True:
            log.info("destination.paused", queue=queue)
        elif changed is False:
            resumed.append(queue)
    for queue in resumed:
        released = yield from release(pauses, queue, timeout)
        log.info("destination.resumed", queue=queue, released=released)
    return resumed


def release(pauses: Pauses, queue: str, timeout: float) -> Flow[int]:
    """Make the messages held for `queue`'s destination visible now, ten at a time in due
    order (one call after another: the earliest are received first). A handle that no longer
    works (the message came back and was received again) fails harmlessly. Returns how many
    were released."""
    held = pauses.take(queue)
    released = 0
    for i in range(0, len(held), quotas.MAX_BATCH_ENTRIES):
        chunk = held[i : i + quotas.MAX_BATCH_ENTRIES]
        by_queue: dict[str, list[Held]] = {}
        for h in chunk:
            by_queue.setdefault(h.queue, []).append(h)
        calls = [
            Call(
                "sqs",
                "ChangeMessageVisibilityBatch",
                {
                    "Entries": [
                        {"Id": str(n), "ReceiptHandle": h.handle, "VisibilityTimeout": 0}
                        for n, h in enumerate(hs)
                    ]
                },
                q,
                timeout,
            )
            for q, hs in by_queue.items()
        ]
        replies = yield calls
        for hs, reply in zip(by_queue.values(), replies, strict=True):
            if reply.fault is None:
                released += len(hs) - len(reply.response.get("Failed", []))
    return released


def set_paused(
    queue: str, paused: bool, since: str, timeout: float | None = None
) -> Flow[Fault | None]:
    """Tag (or untag) a destination's delay queue; `since` is the tag's value (when)."""
    if paused:
        call = Call("sqs", "TagQueue", {"Tags": {PAUSED_TAG: since}}, queue, timeout)
    else:
        call = Call("sqs", "UntagQueue", {"TagKeys": [PAUSED_TAG]}, queue, timeout)
    [reply] = yield [call]
    return reply.fault


def read(queue: str, timeout: float | None = None) -> Flow[Mapping[str, str] | Fault]:
    """A delay queue's tags, or why they could not be read."""
    [reply] = yield [Call("sqs", "ListQueueTags", {}, queue, timeout)]
    if reply.fault is not None:
        return reply.fault
    return dict(reply.response.get("Tags") or {})
