"""A virtual-clock simulation of the delay-queue cycle, driving the real decision function.

Used by the tests and `scripts/simulate_parking.py` to check lateness over ~35,000 cycles,
redelivery decisions under local clock skew, and parking in EventBridge Scheduler (requests,
schedules and lateness), which no real-time test could cover.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sqsdelay.core import message_shape, quotas, wire_format
from sqsdelay.core.clock import ClockOffset
from sqsdelay.core.decision import HandOver, Limits, Park, Poison, Requeue, decide
from sqsdelay.core.received import Received
from sqsdelay.core.types import Attributes

START_MS = 1_700_000_000_000


@dataclass
class SimResult:
    due_ms: int
    delivered_ms: int
    hops: int
    redeliveries: int
    decision_errors_ms: list[int] = field(default_factory=list)  # decided - true remaining
    schedules: int = 0  # parked in EventBridge Scheduler
    sqs_requests: int = 0  # unbatched: sends (Scheduler's too), receives, deletes

    @property
    def lateness_ms(self) -> int:
        return self.delivered_ms - self.due_ms


def simulate(
    delay_seconds: int,
    *,
    cycle_seconds: int = quotas.MAX_NATIVE_DELAY_SECONDS,
    skew_ms: int = 0,
    latency_ms: int = 20,
    receive_jitter_ms: int = 1500,
    redelivery_rate: float = 0.0,
    visibility_timeout_ms: int = 30_000,
    carry_due_at: bool = True,
    seed: int = 0,
    park_after_seconds: int | None = None,
    scheduler_lateness_ms: int = 60_000,
) -> SimResult:
    """Follow one message from the sender to its destination.

    Broker time is the truth; the worker's local clock reads broker time + `skew_ms`. Each
    request takes `latency_ms`. With `redelivery_rate` a worker crashes after a receive, so
    the message comes back with ApproximateReceiveCount 2 and the local clock is used.
    With `carry_due_at=False` the message has no room for sqsdelay.DueAt (the reference
    transport's relative carry). With `park_after_seconds` the worker parks in Scheduler,
    which fires up to `scheduler_lateness_ms` after the schedule's time.
    """
    rng = random.Random(seed)
    offset = ClockOffset()
    # Other traffic has already given the estimator first-receive samples.
    for _ in range(5):
        offset.observe(START_MS, START_MS + skew_ms + latency_ms + rng.randint(0, latency_ms))
    lim = Limits(
        cycle_seconds,
        max_attempts=1_000_000,
        max_message_bytes=quotas.MAX_MESSAGE_BYTES,
        park_after_seconds=park_after_seconds,
    )
    attributes: Attributes = {
        wire_format.DELAY_ATTRIBUTE: message_shape.string_attribute(str(delay_seconds)),
        wire_format.MESSAGE_ID_ATTRIBUTE: message_shape.string_attribute("m0"),
    }
    if not carry_due_at:
        attributes.update({f"h{i}": message_shape.string_attribute("x") for i in range(8)})
    sent = START_MS
    due = sent + delay_seconds * 1000
    hops = redeliveries = schedules = 0
    requests = 1  # the sender's send
    errors: list[int] = []
    while True:
        hops += 1
        requests += 2  # receive + delete
        first = sent + cycle_seconds * 1000 + rng.randint(0, receive_jitter_ms)
        now, count = first, 1
        if rng.random() < redelivery_rate:
            # received, then the worker died: the sample of that receive is lost with it
            now = first + visibility_timeout_ms + rng.randint(0, receive_jitter_ms)
            count, redeliveries = 2, redeliveries + 1
        else:
            offset.observe(first, first + latency_ms + skew_ms)
        msg = Received(
            message_id=f"m{hops}",
            receipt_handle="r",
            body="x",
            attributes=attributes,
            system={
                "SentTimestamp": str(sent),
                "ApproximateFirstReceiveTimestamp": str(first),
                "ApproximateReceiveCount": str(count),
                "MessageGroupId": "g",
            },
        )
        local_now = now + latency_ms + skew_ms  # when the response reached the worker
        decision = decide(msg, local_now_ms=local_now, offset_ms=offset.estimate(), lim=lim)
        if isinstance(decision, Poison):
            raise AssertionError(f"simulated message was poisoned: {decision.reason}")
        # A hand-over waits out the fraction of a second from the decision, then sends.
        wait = decision.wait_ms if isinstance(decision, HandOver) else 0
        errors.append(decision.remaining_seconds * 1000 + wait - (due - (now + latency_ms)))
        send_time = now + 2 * latency_ms + wait
        if isinstance(decision, Park):
            schedules += 1
            requests += 1  # Scheduler's send back to the delay queue
            attributes = decision.attributes
            sent = decision.fire_ms + rng.randint(0, scheduler_lateness_ms)
            continue
        requests += 1  # the requeue or the hand-over
        if isinstance(decision, HandOver):
            return SimResult(
                due,
                send_time + decision.remaining_seconds * 1000,
                hops,
                redeliveries,
                errors,
                schedules,
                requests,
            )
        assert isinstance(decision, Requeue)
        attributes, sent = decision.attributes, send_time
