"""The Dockerfile read as its stages: each stage's instructions, continuation lines joined."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def stages() -> dict[str, list[tuple[str, str]]]:
    """Instructions per stage, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    out: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        if op.upper() == "FROM":
            current = rest.split(" AS ")[-1].strip()
            out[current] = [("FROM", rest.split(" AS ")[0].strip())]
        else:
            out[current].append((op.upper(), rest.strip()))
    return out


def one(stage: list[tuple[str, str]], op: str) -> str:
    (value,) = [v for o, v in stage if o == op]
    return value
