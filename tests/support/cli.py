"""Running the `sqsdelay` command line as a user does: `python -m sqsdelay` in a subprocess."""

from __future__ import annotations

import subprocess
import sys


def run(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sqsdelay", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )
