"""The JSON log, captured and read back: every event of a run, or those of one name."""

from __future__ import annotations

import io
import json
from typing import Any

from sqsdelay import logs


def capture_logs(level: str = "INFO") -> io.StringIO:
    out = io.StringIO()
    logs.configure("json", level, stream=out)
    return out


def logged(out: io.StringIO) -> list[dict[str, Any]]:
    """Every JSON event in the captured log, in order (other lines are not events)."""
    return [json.loads(x) for x in out.getvalue().splitlines() if x.startswith("{")]


def events(out: io.StringIO, name: str) -> list[dict[str, Any]]:
    return [x for x in logged(out) if x["event"] == name]
