"""The cost of running sqsdelay itself, next to its SQS requests (pure): CloudWatch Logs
ingestion of its events and EMF lines, KMS requests with SSE-KMS, the registry's storage
and backups, and the worker's compute on ECS Fargate or Lambda.

Every input has a default taken from `infra/` (the templates' defaults: a test keeps them
equal) or measured here; `--running FILE` (YAML) overrides any of them. Prices are in the
price list (`running_prices`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sqsdelay.errors import ConfigError

HOURS_PER_MONTH = 730  # AWS's own month for hourly prices
SECONDS_PER_DAY = 86_400


class RunningPrices(BaseModel):
    """us-east-1 list prices; sources in the price list's `sources`."""

    model_config = ConfigDict(extra="forbid")

    logs_ingestion_per_gb: float = Field(default=0.50, ge=0)  # CloudWatch Logs, standard
    kms_per_10k_requests: float = Field(default=0.03, ge=0)
    dynamodb_storage_per_gb_month: float = Field(default=0.25, ge=0)
    dynamodb_pitr_per_gb_month: float = Field(default=0.20, ge=0)  # continuous backups
    fargate_per_vcpu_hour: float = Field(default=0.04048, ge=0)  # Linux/x86
    fargate_per_gb_hour: float = Field(default=0.004445, ge=0)
    lambda_per_gb_second: float = Field(default=0.0000166667, ge=0)  # x86
    lambda_per_million_requests: float = Field(default=0.20, ge=0)

    def scaled(self, rate: float) -> RunningPrices:
        return RunningPrices(**{k: v * rate for k, v in self.model_dump().items()})


class Running(BaseModel):
    """How sqsdelay runs. Defaults: `infra/worker-ecs.yaml` (Cpu 256, Memory 512, MinTasks 1),
    `infra/worker-lambda.yaml` (MemorySize 256), SSE-SQS (no KMS), the events' size as
    measured on the demo (398 bytes a line)."""

    model_config = ConfigDict(extra="forbid")

    worker: Literal["ecs", "lambda"] = "ecs"
    ecs_cpu_units: int = Field(default=256, gt=0)
    ecs_memory_mb: int = Field(default=512, gt=0)
    ecs_tasks: float = Field(default=1, gt=0)
    lambda_memory_mb: int = Field(default=256, gt=0)
    lambda_seconds_per_invocation: float = Field(default=0.2, gt=0)
    event_line_bytes: int = Field(default=398, gt=0)
    # one EMF line per destination per metrics flush (a minute), about this long
    emf_line_bytes: int = Field(default=900, gt=0)
    emf_lines_per_destination_per_day: int = Field(default=1_440, ge=0)
    kms: bool = False  # queues encrypted with a customer key (KmsKeyId)
    # SQS reuses a data key for 300 s (KmsDataKeyReusePeriodSeconds' default): per queue and
    # principal (sender, worker) about one GenerateDataKey or Decrypt per period.
    kms_reuse_seconds: int = Field(default=300, gt=0)
    registry_item_bytes: int = Field(default=250, gt=0)
    registry_ttl_days: int = Field(default=14, ge=0)  # records stay 14 days after due


def load_running(path: Path | None) -> Running:
    if path is None:
        return Running()
    try:
        return Running.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"--running {path}: {problems}") from None
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"--running {path}: {exc}") from None


def running_costs(
    r: Running,
    prices: RunningPrices,
    *,
    window_seconds: float,
    destinations: int,
    event_lines: int,
    worker_batches: float,
    registry_item_seconds: float,
    registry: bool,
) -> dict[str, float]:
    """The window's cost of running, per line. `worker_batches`: the worker's receive
    batches (Lambda invocations); `registry_item_seconds`: how long the registry holds its
    records, summed over them (due time plus the TTL's 14 days)."""
    gb = 1e9
    hours = window_seconds / 3600
    days = window_seconds / SECONDS_PER_DAY
    emf_lines = destinations * r.emf_lines_per_destination_per_day * days
    logs = (event_lines * r.event_line_bytes + emf_lines * r.emf_line_bytes) / gb
    kms_requests = destinations * 2 * 2 * window_seconds / r.kms_reuse_seconds if r.kms else 0
    month = HOURS_PER_MONTH * 3600
    stored = registry_item_seconds * r.registry_item_bytes / gb / month if registry else 0.0
    if r.worker == "ecs":
        per_hour = r.ecs_cpu_units / 1024 * prices.fargate_per_vcpu_hour
        per_hour += r.ecs_memory_mb / 1024 * prices.fargate_per_gb_hour
        compute = r.ecs_tasks * per_hour * hours
    else:
        gb_seconds = worker_batches * r.lambda_seconds_per_invocation * r.lambda_memory_mb / 1024
        compute = gb_seconds * prices.lambda_per_gb_second
        compute += worker_batches * prices.lambda_per_million_requests / 1e6
    return {
        "logs_ingestion": logs * prices.logs_ingestion_per_gb,
        "kms": kms_requests / 10_000 * prices.kms_per_10k_requests,
        "registry_storage": stored * prices.dynamodb_storage_per_gb_month,
        "registry_backups": stored * prices.dynamodb_pitr_per_gb_month,
        "worker_compute": compute,
    }
