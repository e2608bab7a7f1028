"""Running a script under scripts/ as its docstring says (`cd scripts`, the project's Python),
with tiny parameters: the smoke runs in this folder's tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def run_script(name: str, *args: str, timeout: float = 300) -> Any:
    """Run scripts/<name> and return the JSON object it printed; a failure shows its stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQSDELAY_")}
    done = subprocess.run(
        [sys.executable, name, *args],
        cwd=SCRIPTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)
