"""Run the `sqsdelay` command line and SIGKILL it just before a chosen call: the crash
points of the registry tests. `python -m tests.support.killpoint API[@QUEUE] ARGS...` kills
the process before its first call of API (on a queue whose name ends with QUEUE)."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from sqsdelay.aws import callers
from sqsdelay.core.flows import Call


def _kills(point: str) -> Any:
    api, _, queue = point.partition("@")

    def check(call: Call) -> None:
        if call.api == api and (not queue or (call.queue or "").endswith(queue)):
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    return check


def main() -> None:
    check = _kills(sys.argv[1])
    sync_call = callers.SyncCaller.__call__
    async_one = callers.AsyncCaller._one

    def sync_patched(self: callers.SyncCaller, calls: list[Call]) -> Any:
        for call in calls:
            check(call)
        return sync_call(self, calls)

    async def async_patched(self: callers.AsyncCaller, call: Call) -> Any:
        check(call)
        return await async_one(self, call)

    callers.SyncCaller.__call__ = sync_patched  # type: ignore[method-assign]
    callers.AsyncCaller._one = async_patched  # type: ignore[method-assign]
    from sqsdelay.cli import main as cli

    sys.argv = ["sqsdelay", *sys.argv[2:]]
    cli()


if __name__ == "__main__":
    main()
