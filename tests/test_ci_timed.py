"""`.ci/timed`, which every lane of `make test` runs under: it prints the lane's wall time
and CPU seconds (its processes' and theirs) and exits as the lane did."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TIMED = Path(__file__).resolve().parents[1] / ".ci" / "timed"


def test_it_counts_a_grandchilds_cpu_and_keeps_the_exit_code() -> None:
    burn = "import time; t = time.process_time(); exec('while time.process_time() - t < 0.3: pass')"
    inner = [
        sys.executable,
        "-c",
        f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burn!r}]); sys.exit(3)",
    ]
    done = subprocess.run(
        [sys.executable, str(TIMED), "lane", "--", *inner],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3
    found = re.fullmatch(r"timed: lane: (\d+) s wall, ([\d.]+) CPU-s, exit 3\n", done.stdout)
    assert found and float(found[2]) >= 0.3, done.stdout
