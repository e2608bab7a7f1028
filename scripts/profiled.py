#!/usr/bin/env python3
"""Run a module under cProfile timed by the process's CPU clock, and write its stats at exit:

    python profiled.py OUT.prof -m sqsdelay worker q1 q2

`python -m cProfile` times with the wall clock, so on a busy machine every function reads
slower by however long the process waited for a core; CPU time does not (issue 63, 4)."""

from __future__ import annotations

import cProfile
import runpy
import sys
import time


def main() -> None:
    out, flag, module, *args = sys.argv[1:]
    if flag != "-m":
        raise SystemExit("usage: profiled.py OUT.prof -m MODULE [ARGS...]")
    sys.argv = [module, *args]
    profile = cProfile.Profile(time.process_time)
    try:
        profile.runcall(runpy.run_module, module, run_name="__main__", alter_sys=True)
    finally:
        profile.dump_stats(out)


if __name__ == "__main__":
    main()
