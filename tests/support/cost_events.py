"""The cost tests' event log: four hand-built records as the worker logs them, with lines the
job must skip, and CloudWatch Logs subscription envelopes of log lines."""

from __future__ import annotations

import json
from pathlib import Path

RECORDS = [
    {
        "destination": "orders",
        "delay_seconds": 1925,
        "size_bytes": 100,
        "timestamp": "2026-01-15T10:00:00.123456Z",
    },
    {
        "destination": "orders",
        "delay_seconds": 31_536_000,
        "size_bytes": 70_000,
        "timestamp": "2026-01-31T23:59:59Z",
    },
    {
        "destination": "billing",
        "delay_seconds": 600,
        "size_bytes": 2048,
        "timestamp": "2026-02-01T00:00:00Z",
    },
    {
        "destination": "billing",
        "delay_seconds": 86_400,
        "size_bytes": 1,
        "timestamp": "2026-02-10T12:00:00+00:00",
    },
]


# what summary.json's `input` says of the event_log fixture
INPUT_COUNTS = {"scheduled": 4, "requeued": 0, "carried_over": 0, "other_events": 1, "malformed": 2}


def write_event_log(tmp_path: Path) -> Path:
    """RECORDS as the worker logs them, with lines the job must skip (INPUT_COUNTS)."""
    lines = [
        json.dumps(
            {"event": "delay.scheduled", "level": "info", "route": "x", "message_id": str(i), **r}
        )
        for i, r in enumerate(RECORDS)
    ]
    lines += [
        json.dumps({"event": "worker.stats", "requests": {"ReceiveMessage": 3}}),
        "this is not json",
        "",
        json.dumps({"event": "delay.scheduled", "delay_seconds": 5}),  # no destination
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines))
    return path


def envelopes(lines: list[str], per: int = 3) -> list[str]:
    """CloudWatch Logs subscription envelopes of `per` events each, and a control message."""
    out = [json.dumps({"messageType": "CONTROL_MESSAGE", "logEvents": [{"message": "x"}]})]
    for i in range(0, len(lines), per):
        events = [{"id": str(n), "timestamp": 0, "message": m} for n, m in enumerate(lines)]
        out.append(
            json.dumps(
                {
                    "messageType": "DATA_MESSAGE",
                    "owner": "123456789012",
                    "logGroup": "/sqsdelay/worker",
                    "logStream": "s",
                    "subscriptionFilters": ["sqsdelay-events"],
                    "logEvents": events[i : i + per],
                }
            )
        )
    return out
