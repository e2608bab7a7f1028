"""The Dockerfile read as its stages: each stage's instructions, continuation lines joined."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
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


def env(stage: list[tuple[str, str]]) -> dict[str, str]:
    """The stage's ENV lines (KEY=VALUE pairs, no spaces in values)."""
    out: dict[str, str] = {}
    for op, rest in stage:
        if op == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                out[key] = value
    return out


def volumes(stage: list[tuple[str, str]]) -> set[str]:
    """The paths the stage declares as VOLUME (JSON array or plain form)."""
    out: set[str] = set()
    for op, rest in stage:
        if op == "VOLUME":
            out |= set(json.loads(rest) if rest.startswith("[") else rest.split())
    return out


@dataclass(frozen=True)
class Directory:
    owner: int
    group: int
    mode: int


def directories(stage: list[tuple[str, str]]) -> dict[str, Directory]:
    """The directories the stage's RUN lines make with `install -d -o UID -g GID -m MODE`,
    the only way the Dockerfile sets a directory's owner (chown, chmod or mkdir fail here)."""
    out: dict[str, Directory] = {}
    for op, rest in stage:
        if op != "RUN":
            continue
        for command in rest.split("&&"):
            words = shlex.split(command)
            assert words[0] not in ("chown", "chmod", "mkdir"), f"read only install -d: {command}"
            if words[0] != "install":
                continue
            flags: dict[str, str] = {}
            paths: list[str] = []
            rest_words = iter(words[1:])
            for word in rest_words:
                if word in ("-o", "-g", "-m"):
                    flags[word] = next(rest_words)
                elif word == "-d":
                    flags[word] = ""
                else:
                    assert not word.startswith("-"), f"an option this reader does not know: {word}"
                    paths.append(word)
            assert set(flags) == {"-d", "-o", "-g", "-m"}, command
            for path in paths:
                out[path] = Directory(int(flags["-o"]), int(flags["-g"]), int(flags["-m"], 8))
    return out
