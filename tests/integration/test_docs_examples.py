"""The docs' code snippets are files under docs/examples/ that the site includes
(pymdownx.snippets) and these tests run as a user would, against the emulator: a snippet
that stops working fails here, not in a reader's hands."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import cli, docs

EXAMPLES = docs.DOCS / "examples"
BIN = Path(sys.executable).parent


def run_example(name: str, env: dict[str, str], **kw: Any) -> subprocess.CompletedProcess[str]:
    path = EXAMPLES / name
    command = [sys.executable, str(path)] if path.suffix == ".py" else ["bash", "-e", str(path)]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, cwd=docs.ROOT, **kw
    )


def counts(sqs: Any, queue: str) -> int:
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"]
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(found[n]) for n in names)


def test_the_tour_sends_through_the_delay_queue(env: dict[str, str], sqs: Any, prefix: str) -> None:
    assert cli.run(env, "install", "orders").returncode == 0
    done = run_example("tour.py", env)
    assert done.returncode == 0, done.stderr
    route, message_id = done.stdout.split()
    assert route == "delay-queue" and message_id
    assert counts(sqs, f"{prefix}orders-delay.fifo") == 1


def test_sending_from_python_as_the_page_shows(env: dict[str, str], sqs: Any, prefix: str) -> None:
    assert cli.run(env, "install", "orders").returncode == 0
    done = run_example("send.py", env)
    assert done.returncode == 0, done.stderr
    # three days, five hours, 7200 s and 3600 s wait in the delay queue; 10 s goes straight
    assert counts(sqs, f"{prefix}orders-delay.fifo") == 4
    assert counts(sqs, f"{prefix}orders") == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    """The shell session of the README and getting-started.md, on a free port instead of
    4566: the emulator, install, a send due tomorrow, and a worker that starts draining."""
    port = free_port()
    script = tmp_path / "quickstart.sh"
    script.write_text((EXAMPLES / "quickstart.sh").read_text().replace("4566", str(port)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQSDELAY_")}
    env["SQSDELAY_REGION"] = "us-east-1"
    if not (docs.ROOT / ".venv" / "bin" / "sqsdelay").exists():
        pytest.skip("the quick start runs .venv/bin/sqsdelay")
    out, err = tmp_path / "out", tmp_path / "err"
    with out.open("w") as o, err.open("w") as e:
        shell = subprocess.Popen(
            ["bash", "-e", str(script)],
            env=env,
            cwd=docs.ROOT,
            stdout=o,
            stderr=e,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 90
            while "worker.started" not in err.read_text() and shell.poll() is None:
                assert time.monotonic() < deadline, err.read_text()[-2000:]
                time.sleep(0.1)
        finally:
            os.killpg(shell.pid, signal.SIGTERM)
            shell.wait(timeout=60)
    lines = [line for line in out.read_text().splitlines() if line.startswith("{")]
    assert any('"route": "delay-queue"' in line for line in lines), out.read_text()
    assert "worker.started" in err.read_text(), err.read_text()[-2000:]
