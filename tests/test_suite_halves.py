"""`make test-core` and `make test-heavy` (two CI jobs side by side) run between them exactly
the tests that `make unit` runs: the Makefile's marker expressions, as written there, split
the suite without a gap or an overlap."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from _pytest.mark.expression import Expression

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = (ROOT / "Makefile").read_text()


def makefile_value(name: str) -> str:
    (value,) = re.findall(rf"^{name} := (.+)$", MAKEFILE, re.MULTILINE)
    return value.strip()


def selects(expression: str, marks: set[str]) -> bool:
    """Whether `-m expression` selects a test with these markers, by pytest's own parser."""
    return Expression.compile(expression).evaluate(lambda name, /, **_: name in marks)


def test_the_two_halves_run_what_make_unit_runs() -> None:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, "-p", "tests.support.collected_marks", "--ignore=tests/scripts"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    listed = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("MARKS ")]
    tests = {node: set(marks) for node, *marks in listed}
    assert len(tests) > 500

    def half(expression: str) -> set[str]:
        return {node for node, marks in tests.items() if selects(expression, marks)}

    core, heavy = half(makefile_value("CORE_TESTS")), half(makefile_value("HEAVY_TESTS"))
    assert not core & heavy
    assert core | heavy == half(makefile_value("UNIT_TESTS"))
    assert any(node.startswith("tests/integration/test_wheel.py::") for node in heavy)
    assert any(node.startswith("tests/cost/test_cost_report.py::") for node in heavy)
    assert any(node.startswith("tests/integration/test_worker.py::") for node in core)
    assert not any(node.startswith("tests/cost/test_emr_venv.py::") for node in core | heavy)


def test_ci_run_takes_a_half_or_nothing() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run"), "unit"], capture_output=True, text=True, timeout=30
    )
    assert (done.returncode, done.stderr) == (2, "usage: .ci/run [test-core|test-heavy]\n")
