"""The guard's benchmark (scripts/bench_guard.py), run small: its counts are the figures
docs/consumers.md quotes, so the smoke run holds them."""

from __future__ import annotations

from tests.scripts.smoke import run_script


def test_bench_guard_counts_the_requests_per_message() -> None:
    out = run_script("bench_guard.py", "--messages", "3")
    for guard in (out["guard"], out["async_guard"]):  # the sync and the async guard alike
        assert guard["first_run"]["requests_per_message"] == {
            "PutItem": 1.0,
            "UpdateItem": 1.0,
            "total": 2.0,
        }
        assert guard["duplicate"]["requests_per_message"] == {"PutItem": 1.0, "total": 1.0}
        assert guard["handler_fails"]["requests_per_message"] == {
            "DeleteItem": 1.0,
            "PutItem": 1.0,
            "total": 2.0,
        }
        in_progress = guard["copy_meets_run_in_progress_with_its_run"]["requests_per_message"]
        assert in_progress == {"PutItem": 2.0, "UpdateItem": 1.0, "total": 3.0}
    assert out["powertools"]["first_run"]["requests_per_message"]["total"] == 2.0
    assert out["powertools"]["duplicate"]["requests_per_message"]["total"] == 1.0
