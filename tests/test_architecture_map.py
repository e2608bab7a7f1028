"""docs/architecture.md's rule → file table names every module under `sqsdelay/`, so a new
module cannot be added without saying which rule it holds (a package's `__init__.py` that
is only a docstring holds none)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sqsdelay"


def table() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Which file holds which rule", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def holds_code(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return bool(body)


def modules() -> list[str]:
    found = sorted(PACKAGE.rglob("*.py"))
    return [
        path.relative_to(PACKAGE).as_posix()
        for path in found
        if path.name != "__init__.py" or holds_code(path)
    ]


def test_every_module_is_in_the_table() -> None:
    named = set(re.findall(r"`([\w/]+\.py)`", table()))
    missing = [module for module in modules() if module not in named]
    assert not missing, f"add these to docs/architecture.md's rule → file table: {missing}"


def test_the_table_names_no_module_that_is_gone() -> None:
    named = set(re.findall(r"`([\w/]+\.py)`", table()))
    gone = sorted(name for name in named if not (PACKAGE / name).is_file())
    assert not gone, f"docs/architecture.md's table names modules that do not exist: {gone}"
