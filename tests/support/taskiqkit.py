"""Helpers for the taskiq tests: what the worker process wrote, a publisher that owns the
event loop its broker's clients are bound to, and the CLI as a subprocess."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import defaultdict
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class RunLog:
    """Lines `<tag> <value>...` that the app's tasks and middlewares append to a file."""

    path: Path

    def lines(self) -> dict[str, list[list[float]]]:
        found: dict[str, list[list[float]]] = defaultdict(list)
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                tag, *values = line.split()
                found[tag].append([float(v) for v in values])
        return found

    def ran(self, tag: str) -> list[float]:
        return [v[0] for v in self.lines().get(tag, [])]


@dataclass
class Publisher:
    """Runs coroutines on one event loop: aiobotocore's clients belong to the loop that
    opened them, so the broker's startup, kicks and shutdown share it."""

    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.loop.close()


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m sqsdelay ARGS` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "sqsdelay", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
