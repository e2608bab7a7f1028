"""No test module imports another: shared helpers live in `tests/support/`, a module each
named for what it does, so a reader finds them there and a test file can move alone."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
NOT_YET: tuple[str, ...] = ()


def imported_test_modules(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found += [
            n for n in names if n.startswith("tests.") and n.split(".")[-1].startswith("test_")
        ]
    return found


def test_no_test_module_imports_another() -> None:
    offenders = {
        path.relative_to(TESTS).as_posix(): modules
        for path in sorted(TESTS.rglob("test_*.py"))
        if path.relative_to(TESTS).parts[0] not in NOT_YET
        and (modules := imported_test_modules(path))
    }
    assert not offenders, f"move these helpers into tests/support/: {offenders}"
