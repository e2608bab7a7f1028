"""`bench_worker.py --otel` (issue 62: the worker's CPU per message with tracing on and off):
the burst's worker under OpenTelemetry's SDK (scripts/traced.py, its spans dropped), or with
SQSDELAY_OTEL=off. Tiny parameters: only that it runs and traces."""

from __future__ import annotations

import pytest

from tests.scripts.smoke import run_script

pytestmark = pytest.mark.slow

TINY = (
    *("--only", "burst", "--seconds", "1", "--burst-messages", "30"),
    *("--burst-destinations", "1", "--burst-window", "1", "--burst-cycle", "4"),
    # the preload's time: half the 4 s cycle was too little once beside the suite (3 s)
    *("--burst-lead", "30"),
)


@pytest.mark.parametrize("otel", ["sdk", "off"])
def test_the_bursts_worker_traces_with_the_sdk_or_not_at_all(otel: str) -> None:
    burst = run_script("bench_worker.py", *TINY, "--otel", otel)["burst"]
    assert burst["lost"] == burst["early"] == 0 and burst["handed_over"] == 30
    assert burst["otel"] == otel
    if otel == "sdk":  # a span per hop at least, each exported (and dropped)
        assert burst["spans_exported"] >= burst["handed_over"]
    else:
        assert "spans_exported" not in burst
