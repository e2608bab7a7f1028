"""Metrics written as CloudWatch embedded metric format lines on stdout (the documents:
`core/emf.py`): the worker's and the Lambda handler's flushes."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from sqsdelay.core.emf import objects
from sqsdelay.core.metrics import Tally
from sqsdelay.logs import get_logger
from sqsdelay.settings import Settings

log = get_logger("sqsdelay.aws.emf")


class EmfWriter:
    """Flushes a runtime's tally as EMF lines to `write` (stdout by default)."""

    def __init__(
        self,
        settings: Settings,
        *,
        write: Callable[[str], object] | None = None,
        clock: Callable[[], float],
    ) -> None:
        self.namespace = settings.metrics_namespace
        self.enabled = settings.metrics == "emf"
        self._write = write or _stdout
        self._clock = clock

    def flush(
        self, tally: Tally, offset_ms: int | None, backlog: tuple[int, int] | None = None
    ) -> int:
        """Write what `tally` counted since the last flush (and the worker's backlog); how
        many objects were written."""
        taken = tally.take()
        if not self.enabled or not (taken or offset_ms is not None or backlog is not None):
            return 0
        now_ms = int(self._clock() * 1000)
        try:
            lines = [
                json.dumps(o, separators=(",", ":"))
                for o in objects(taken, self.namespace, now_ms, offset_ms, backlog)
            ]
        except Exception:  # metrics must never fail a batch or an invocation
            log.exception("metrics.failed")
            return 0
        if lines:  # one write: the lines are not interleaved with another thread's output
            self._write("\n".join(lines) + "\n")
        return len(lines)


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
