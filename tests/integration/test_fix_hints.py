"""Every "run X to fix this" message is produced here, and X is run and succeeds.

Hints are run without the SQSDELAY_QUEUE_PREFIX of the command that printed them, so a hint
must carry the settings it depends on: it is copied into another shell as it is.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from typing import Any

import pytest

from tests.support.cli import run

HINT = re.compile(r"(?:with|fix): (sqsdelay [^\n;]*?)\s*(?:;|$)", re.MULTILINE)


def hints(text: str) -> list[str]:
    found = [h.strip() for h in HINT.findall(text)]
    assert found, f"no fix hint in:\n{text}"
    return found


def run_hint(
    env: dict[str, str], hint: str, *, ok: tuple[int, ...] = (0,)
) -> subprocess.CompletedProcess[str]:
    words = shlex.split(hint)
    assert words[0] == "sqsdelay"
    bare = {k: v for k, v in env.items() if k != "SQSDELAY_QUEUE_PREFIX"}
    done = subprocess.run(
        [sys.executable, "-m", "sqsdelay", *words[1:]],
        env=bare,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in ok, (hint, done.stdout, done.stderr)
    return done


def test_send_to_a_destination_without_a_delay_queue(env: dict[str, str]) -> None:
    failed = run(env, "send", "ghost", "--delay", "5000", "--body", "x")
    assert failed.returncode == 1 and "ghost-delay.fifo" in failed.stderr
    (hint,) = hints(failed.stderr)
    assert "--queue-prefix" in hint
    run_hint(env, hint)
    assert run(env, "send", "ghost", "--delay", "5000", "--body", "x").returncode == 0


def test_direct_send_to_a_missing_destination(env: dict[str, str]) -> None:
    failed = run(env, "send", "nobody", "--delay", "5", "--body", "x")
    assert failed.returncode == 1 and "queue does not exist" in failed.stderr
    (hint,) = hints(failed.stderr)
    run_hint(env, hint)
    assert run(env, "send", "nobody", "--delay", "5", "--body", "x").returncode == 0


def test_worker_start_without_a_delay_queue(env: dict[str, str]) -> None:
    cycle = {**env, "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": "7"}
    failed = run(cycle, "worker", "later")
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    (hint,) = hints(failed.stderr)
    assert "later-delay.fifo" not in hint  # the destination, not the delay queue's name
    assert "--max-native-delay-seconds 7" in hint
    run_hint(env, hint)
    assert run(cycle, "install", "later", "--check").returncode == 0


def test_unrestricted_delays_disabled(env: dict[str, str]) -> None:
    failed = run(env, "--no-unrestricted", "send", "slow", "--delay", "5000", "--body", "x")
    assert failed.returncode == 2
    (hint,) = hints(failed.stderr.replace("(sqsdelay", "with: sqsdelay").replace(")", ""))
    run_hint(env, hint)
    assert run(env, "install", "slow", "--check").returncode == 0


def test_every_install_check_problem_is_fixed_by_its_hint(env: dict[str, str], sqs: Any) -> None:
    prefix = env["SQSDELAY_QUEUE_PREFIX"]
    # A schedule group of its own: the emulator's default group holds what other tests
    # parked, and install --check rightly warns of any parked message in its group.
    env = {**env, "SQSDELAY_SCHEDULE_GROUP": prefix + "parked"}
    sqs.create_queue(QueueName=prefix + "orders")
    delay = sqs.create_queue(
        QueueName=prefix + "orders-delay.fifo",
        Attributes={
            "FifoQueue": "true",
            "DelaySeconds": "10",
            "MessageRetentionPeriod": "60",
        },
    )["QueueUrl"]
    sqs.send_message(
        QueueUrl=delay, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="d"
    )
    sqs.create_queue(QueueName=prefix + "error", Attributes={"MessageRetentionPeriod": "60"})
    check = run(env, "install", "orders", "--check")
    assert check.returncode == 1
    for needle in ("DelaySeconds is 10", "retention is 60", "1209600 s (14 days)"):
        assert needle in check.stdout
    assert "warning: high-throughput mode is off" in check.stdout
    found = set(hints(check.stdout))
    assert any(h.endswith("--fix --force") for h in found)  # the queue holds a message
    for hint in sorted(found, key=len):
        # `--fix` may leave a problem that needs `--fix --force`, and says so (exit 1); the
        # problems it was the hint for must be gone.
        run_hint(env, hint, ok=(0, 1))
        after = run(env, "install", "orders", "--check")
        assert hint not in {h.strip() for h in HINT.findall(after.stdout)}, after.stdout
    final = run(env, "install", "orders", "--check")
    assert final.returncode == 0 and "warning" not in final.stdout, final.stdout


@pytest.mark.parametrize("missing", ["orders-delay.fifo", "error"])
def test_inspect_hints(env: dict[str, str], sqs: Any, missing: str) -> None:
    assert run(env, "install", "orders").returncode == 0
    prefix = env["SQSDELAY_QUEUE_PREFIX"]
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=prefix + missing)["QueueUrl"])
    shown = run(env, "inspect", "orders")
    assert shown.returncode == 1 and "queue does not exist" in shown.stdout
    (hint,) = hints(shown.stdout)
    run_hint(env, hint)
    assert run(env, "inspect", "orders").returncode == 0
