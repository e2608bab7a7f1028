"""The cost of running sqsdelay itself: hand-computed figures, and defaults that are the
templates' own."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqsdelay.cost.operating_cost import Running, load_running, running_costs
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.errors import ConfigError
from tests.support import cfn

PRICES = load_pricing().running
DAYS_30 = 30 * 86_400


def costs(r: Running, **kw: float) -> dict[str, float]:
    args = {
        "window_seconds": DAYS_30,
        "destinations": 10,
        "event_lines": 1_000_000,
        "worker_batches": 0.0,
        "registry_item_seconds": 0.0,
        "registry": False,
    }
    return running_costs(r, PRICES, **{**args, **kw})  # type: ignore[arg-type]


def test_ecs_defaults_for_thirty_days() -> None:
    c = costs(Running())
    # one task of 0.25 vCPU and 0.5 GB for 720 h
    assert c["worker_compute"] == pytest.approx(720 * (0.25 * 0.04048 + 0.5 * 0.004445))
    # 1M event lines of 398 bytes, and 10 destinations x 1,440 EMF lines a day of 900 bytes
    logs_gb = (1_000_000 * 398 + 10 * 1_440 * 30 * 900) / 1e9
    assert c["logs_ingestion"] == pytest.approx(logs_gb * 0.50)
    assert c["kms"] == 0 and c["registry_storage"] == 0 and c["registry_backups"] == 0


def test_lambda_kms_and_the_registry() -> None:
    r = Running(worker="lambda", kms=True)
    # a million records held 15 days each (a day's delay and the 14-day TTL)
    held = 1_000_000 * 15 * 86_400.0
    c = costs(r, worker_batches=2_000_000, registry_item_seconds=held, registry=True)
    gb_seconds = 2_000_000 * 0.2 * 256 / 1024
    assert c["worker_compute"] == pytest.approx(gb_seconds * 0.0000166667 + 2 * 0.20)
    # per queue (2 a destination) and principal (sender, worker), every 300 s
    assert c["kms"] == pytest.approx(10 * 2 * 2 * DAYS_30 / 300 / 10_000 * 0.03)
    gb_month = held * 250 / 1e9 / (730 * 3600)
    assert c["registry_storage"] == pytest.approx(gb_month * 0.25)
    assert c["registry_backups"] == pytest.approx(gb_month * 0.20)


def test_defaults_are_the_templates() -> None:
    ecs = cfn.defaults(cfn.load("worker-ecs.yaml"))
    r = Running()
    assert (r.ecs_cpu_units, r.ecs_memory_mb, r.ecs_tasks) == (
        ecs["Cpu"],
        ecs["Memory"],
        ecs["MinTasks"],
    )
    function = cfn.load("worker-lambda.yaml")["Resources"]["Function"]["Properties"]
    assert r.lambda_memory_mb == function["MemorySize"]


def test_a_running_file_overrides_and_a_bad_one_says_where(tmp_path: Path) -> None:
    good = tmp_path / "running.yaml"
    good.write_text("worker: lambda\nlambda_memory_mb: 512\n")
    assert load_running(good) == Running(worker="lambda", lambda_memory_mb=512)
    bad = tmp_path / "bad.yaml"
    bad.write_text("worker: k8s\n")
    with pytest.raises(
        ConfigError, match=r"--running .*bad.yaml: worker: Input should be 'ecs' or 'lambda'$"
    ):
        load_running(bad)
