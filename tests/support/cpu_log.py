"""The CPU-seconds each test costs, for docs/benchmarks.md's table of the suite by part.

On when `TEST_CPU_LOG` names a file: each test (setup, call and teardown) appends one JSON
line with its wall time and the CPU time of the pytest process and every process under it
(the JVMs, pips, servers and workers it started, alive or already waited for). A process
that left the tree (the detached class-data archive dump) is not counted. A shared server
or JVM counts towards whichever test is running while it works; a process that leaves the
tree during a test would count negative, so a test's figure is never below 0. Off, it costs
nothing. `make test` passes the variable on: `TEST_CPU_LOG=/tmp/cpu.jsonl make test`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[int, float] | None:
    """The parent's pid and the CPU of `pid` and its waited children, in seconds."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the name may hold spaces
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return int(fields[1]), (utime + stime + cutime + cstime) / _TICK


def cpu_of_tree(root: int) -> float:
    """CPU-seconds of `root` and its descendants, the waited ones included."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (found := _stat(entry)) is not None:
            parents[int(entry)], cpu[int(entry)] = found
    total = 0.0
    for pid, seconds in cpu.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == root:
            total += seconds
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    target = os.environ.get("TEST_CPU_LOG")
    if not target:
        yield
        return
    wall, cpu = time.monotonic(), cpu_of_tree(os.getpid())
    yield
    line = {
        "test": item.nodeid,
        "wall": round(time.monotonic() - wall, 3),
        "cpu": round(max(0.0, cpu_of_tree(os.getpid()) - cpu), 3),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
    }
    with open(target, "a") as log:  # one short append per test: the workers' lines never mix
        log.write(json.dumps(line) + "\n")
