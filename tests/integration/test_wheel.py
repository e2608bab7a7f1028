"""The built wheel as a user installs it: no extras, then [emulator], then [spark].

Each command that needs an extra says which one, the same way (exit 2, nothing done); the
demo without [spark] delivers everything and skips only its report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.wheelhouse import ROOT, build_wheelhouse, install, new_venv

# One resolve through the index, three installs from its wheels (pyspark among them), a demo
# and a report: 148 s, 129 CPU-s alone at nice 10 beside a busy core (three resolves: 222 s,
# 154 CPU-s). Three resolves passed the suite's 300 s once, beside the Spark 3.5 lane.
pytestmark = [pytest.mark.slow, pytest.mark.packaging, pytest.mark.timeout(900)]


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The wheel and its dependencies' wheels, [emulator] and [spark] with them: one resolve
    through the index in place of one for each install."""
    house = tmp_path_factory.mktemp("wheelhouse")
    return house, build_wheelhouse(house, ("emulator", "spark"))


def _run(
    venv: Path, env: dict[str, str], *args: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "sqsdelay"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _worker_starts_and_stops(venv: Path, env: dict[str, str], cwd: Path) -> None:
    worker = subprocess.Popen(
        [str(venv / "bin" / "sqsdelay"), "worker", "orders"],
        env={**env, "SQSDELAY_WAIT_TIME_SECONDS": "1"},
        cwd=cwd,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        for line in worker.stderr:  # ends when the worker exits, so it cannot hang the test
            if '"worker.started"' in line:
                break
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
    finally:
        worker.kill()


def _needs(result: subprocess.CompletedProcess[str], extra: str) -> bool:
    return (
        result.returncode == 2
        and f"pip install 'sqsdelay[{extra}]'" in result.stderr
        and "Traceback" not in result.stderr
        and len(result.stderr.strip().splitlines()) == 1
    )


def test_the_wheel_with_no_extras_then_each_extra(
    tmp_path: Path, env: dict[str, str], sqs: Any, wheelhouse: tuple[Path, Path]
) -> None:
    house, wheel = wheelhouse
    # the templates the CDK constructs include ship in it, every one (docs/cdk.md)
    with zipfile.ZipFile(wheel) as shipped:
        names = {Path(n).name for n in shipped.namelist() if n.startswith("sqsdelay/data/infra/")}
    assert names == {p.name for p in (ROOT / "infra").glob("*.yaml")}
    venv = new_venv(tmp_path / "venv")
    # a user's environment: none of the test venv's packages, nothing from this checkout; and
    # bytecode kept, as `make test` runs (else each command compiles boto3 again: 2.5 CPU-s)
    unset = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
    user = {k: v for k, v in env.items() if k not in unset}
    user["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # a new pyspark install would first write its class-data archive (about 40 s): not here
    user["SQSDELAY_SPARK_CLASS_ARCHIVE"] = "off"
    work = tmp_path / "work"
    work.mkdir()

    install(venv, house, str(wheel))
    assert _run(venv, user, "--help", cwd=work).returncode == 0
    assert _run(venv, user, "install", "orders", cwd=work).returncode == 0
    sent = _run(venv, user, "send", "orders", "--delay", "1000", "--body", "x", cwd=work)
    assert sent.returncode == 0 and '"route": "delay-queue"' in sent.stdout, sent.stderr
    message_id = json.loads(sent.stdout)["message_id"]
    cancel = _run(venv, user, "cancel", "orders", message_id, cwd=work)
    # only a parked message can be cancelled: with parking off the command says how to turn it on
    assert cancel.returncode == 2 and "SQSDELAY_PARKING=scheduler" in cancel.stderr
    assert _run(venv, user, "inspect", "orders", cwd=work).returncode == 0
    replay = _run(venv, user, "replay-errors", "orders", cwd=work)
    assert replay.returncode == 0 and json.loads(replay.stdout)["replayed"] == 0
    _worker_starts_and_stops(venv, user, work)
    estimate = _run(venv, user, "cost-estimate", "--delay", "1000", cwd=work)  # package data
    assert estimate.returncode == 0 and "reference formula" in estimate.stdout
    assert _needs(_run(venv, user, "emulator", cwd=work), "emulator")
    assert _needs(_run(venv, user, "demo", cwd=work), "emulator")
    report = ("cost-report", "--input", "events.jsonl", "--output", "report")
    assert _needs(_run(venv, user, *report, cwd=work), "spark")

    install(venv, house, f"sqsdelay[emulator] @ {wheel.as_uri()}")
    demo = _run(venv, user, "demo", cwd=work)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-2000:]
    assert "delivered 8/8 (and 2 cancelled)" in demo.stdout and "early 0" in demo.stdout
    assert "lateness agrees within" in demo.stdout
    assert "cost report skipped: the cost report needs pyspark, pandas, matplotlib: pip " in (
        " ".join(demo.stdout.split())
    )
    assert "Traceback" not in demo.stderr
    assert _needs(_run(venv, user, *report, cwd=work), "spark")

    install(venv, house, f"sqsdelay[spark] @ {wheel.as_uri()}")
    events = str(work / "demo-output" / "events.jsonl")  # what the demo recorded
    done = _run(venv, user, "cost-report", "--input", events, "--output", "report", cwd=work)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "10 messages" in done.stdout and (work / "report" / "report.html").is_file()
