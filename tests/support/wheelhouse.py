"""The checkout's wheel and the wheels of its dependencies in one directory, for installing
into new environments without an index.

One `pip wheel` resolves the dependency ranges (with the extras asked for) through pip's
configured indexes and constraints.txt, as a user's `pip install` would; the installs after it
read that directory only (`--no-index`). Each install through an index parsed the index pages
of every dependency again (boto3's, pydantic-core's, aiohttp's: thousands of files each), about
20 CPU-s an install; from the directory one takes 3 to 7.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pip(*args: str) -> None:
    """The test venv's pip; a failure shows pip's own message (a conflict, a missing version)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"pip {' '.join(args)}\n{done.stderr[-3000:]}"


def build_wheelhouse(house: Path, extras: tuple[str, ...]) -> Path:
    """Build the checkout's wheel and every dependency of it and of `extras` into `house`;
    return the checkout's wheel. Fails when a range admits no version constraints.txt allows."""
    constraints = str(ROOT / "constraints.txt")
    _pip("wheel", "-q", "-c", constraints, "-w", str(house), f"{ROOT}[{','.join(extras)}]")
    (wheel,) = house.glob("sqsdelay-*.whl")
    return wheel


def new_venv(path: Path) -> Path:
    """A venv without pip (ensurepip installs and compiles pip: 8 CPU-s); `install` runs this
    venv's pip in it (`pip --python`)."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120
    )
    return path


def install(venv: Path, house: Path, *specs: str) -> None:
    """pip install `specs` into `venv` from `house` alone: a dependency an extra does not
    declare is not installed, and one whose version is not there fails the install."""
    _pip(
        "--python",
        str(venv / "bin" / "python"),
        "install",
        "-q",
        "--no-compile",  # a user's pip compiles; skipping it here halves the installs
        "--no-index",
        "--find-links",
        str(house),
        "-c",
        str(ROOT / "constraints.txt"),
        *specs,
    )
