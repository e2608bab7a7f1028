"""What the step reports: where each record of a batch ended (`BatchEnds`), and the calls
and messages counted since the start (`Stats`), which the worker, the Lambda, the metrics
and the demo read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from sqsdelay.core.metrics import Tally
from sqsdelay.core.received import Received
from sqsdelay.core.trace_context import Hop

End = Literal["handed-over", "requeued", "parked", "dead-lettered", "held", "cancelled", "dropped"]
END: dict[str, End] = {
    "delay.handed_over": "handed-over",
    "delay.requeued": "requeued",
    "delay.parked": "parked",
    "delay.dead_lettered": "dead-lettered",
    "delay.forwarded": "handed-over",
}


@dataclass
class Stats:
    """Calls made (per API and queue or schedule group) and messages moved (per event), since
    the start; `tally`, what the metrics have not flushed yet. `sqsdelay.aws.clients.observe`
    counts a client's calls into them."""

    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    tally: Tally = field(default_factory=Tally)

    @property
    def requests(self) -> Counter[str]:
        """Calls per API."""
        per_api: Counter[str] = Counter()
        for (api, _), n in self.calls.items():
            per_api[api] += n
        return per_api

    def as_dict(self) -> dict[str, Any]:
        requests = self.requests
        return {
            "requests": dict(requests),
            "messages": dict(self.events),
            "requests_total": sum(requests.values()),
        }


@dataclass(frozen=True)
class Held:
    source: Received
    wait_seconds: int
    reason: str


@dataclass
class BatchEnds:
    """What the step reports of one batch: where each record ended, by SQS MessageId;
    `held`, what to report or keep out of sight; `released`, copies of messages another batch
    had in hand (neither sent nor deleted: they come back when their visibility runs out);
    `unhidden`, held records whose visibility change failed."""

    ends: dict[str, End] = field(default_factory=dict)
    held: list[Held] = field(default_factory=list)
    released: list[Received] = field(default_factory=list)
    delete_failed: int = 0
    unhidden: int = 0
    # The worker's spans, when StepConfig.spans asks for them (sqsdelay.otel records them).
    spans: list[Hop] = field(default_factory=list)
