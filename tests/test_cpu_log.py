"""The suite's CPU log (`TEST_CPU_LOG`, tests/support/cpu_log.py): a test's line counts the
processes it started, the ones already waited for included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import wait_for
from tests.support import cpu_log

BURN = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"


def test_a_child_that_ran_and_exited_counts_towards_the_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "cpu.jsonl"
    monkeypatch.setenv("TEST_CPU_LOG", str(log))
    wrapper = cpu_log.pytest_runtest_protocol(SimpleNamespace(nodeid="tests/x.py::t"))
    next(wrapper)
    subprocess.run([sys.executable, "-c", BURN], check=True)
    with pytest.raises(StopIteration):
        wrapper.send(None)
    (line,) = map(json.loads, log.read_text().splitlines())
    assert line["test"] == "tests/x.py::t" and 0.5 <= line["cpu"] < 5 and line["wall"] >= 0.5


def test_a_live_child_counts_towards_its_parent() -> None:
    before = cpu_log.cpu_of_tree(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", BURN + "\nimport sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    try:  # it burns half a second, then waits on stdin: counted while alive
        wait_for(lambda: cpu_log.cpu_of_tree(os.getpid()) - before >= 0.5, timeout=30)
        assert child.poll() is None
    finally:
        child.communicate(b"")


def test_off_it_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_CPU_LOG", raising=False)
    monkeypatch.chdir(tmp_path)
    wrapper = cpu_log.pytest_runtest_protocol(SimpleNamespace(nodeid="tests/x.py::t"))
    next(wrapper)
    with pytest.raises(StopIteration):
        wrapper.send(None)
    assert list(tmp_path.iterdir()) == []
