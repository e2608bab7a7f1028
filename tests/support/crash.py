"""A worker that "crashes" between its sends and its delete: its caller makes no delete."""

from __future__ import annotations

import pytest

from sqsdelay.aws.callers import AsyncCaller
from sqsdelay.core.flows import Call, Fault, Reply


def crash_before_delete(monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    """Workers started from now on make no DeleteMessageBatch (until `monkeypatch.undo()`);
    returns the deletes they asked for."""
    deletes: list[Call] = []

    class CrashBeforeDelete(AsyncCaller):
        async def _one(self, call: Call) -> Reply:
            if call.api == "DeleteMessageBatch":
                deletes.append(call)
                return Reply(fault=Fault("Crashed", answered=False))
            return await super()._one(call)

    monkeypatch.setattr("sqsdelay.aws.worker.AsyncCaller", CrashBeforeDelete)
    return deletes
