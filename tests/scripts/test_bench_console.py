"""scripts/bench_console.py with tiny parameters: every phase runs and prints its JSON (its
figures mean nothing here; docs/console.md has the real run's)."""

from __future__ import annotations

import pytest

from tests.scripts.smoke import run_script

pytestmark = pytest.mark.slow


def test_bench_console() -> None:
    out = run_script("bench_console.py", "--messages", "120", "--pages", "3", "--repeat", "2")
    assert out["messages"] == 120 and out["rows_per_page"] == [50, 50, 20]
    assert out["scheduled_page_ttfb_ms"]["loads"] == 2
    assert out["console_rss_mib"]["after_3_pages"]["VmRSS"] > 0
    first = out["requests"]["first_page"]["requests"]
    assert first["dynamodb:Query"] == 1 and first["dynamodb:BatchGetItem"] == 1
    assert not any("Scan" in name for name in first)


def test_bench_console_signin() -> None:
    """The sign-in flood, small: every request refused before its body is read (413)."""
    out = run_script("bench_console_signin.py", "--fields", "3", "--field-kib", "64")
    assert out["statuses"] == ["413"] * 3
    assert out["console_mib"]["after"]["VmHWM"] > 0
