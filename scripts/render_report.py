#!/usr/bin/env python3
"""Render a cost report in headless Chromium and save a PNG, to look at it as a person would.

    .venv/bin/python scripts/render_report.py demo-output/cost-report/report.html report.png

Needs Debian's `chromium` (apt-get install chromium); prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--size", default="1100,2600")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print(json.dumps({"error": "chromium not found: apt-get install chromium"}))
        return 2
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            # offline: the report must not need the network
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--window-size={args.size}",
            f"--screenshot={args.png.resolve()}",
            args.report.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    ok = done.returncode == 0 and args.png.exists()
    print(
        json.dumps({"png": str(args.png), "ok": ok, "bytes": args.png.stat().st_size if ok else 0})
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
