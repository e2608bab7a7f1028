"""Configuration from the environment (prefix SQSDELAY_), overridable by CLI flags."""

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sqsdelay import limits
from sqsdelay.errors import ConfigError


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SQSDELAY_", extra="ignore", frozen=True)

    endpoint_url: str | None = None
    region: str | None = None
    queue_prefix: str = ""
    max_native_delay_seconds: int = Field(default=limits.MAX_NATIVE_DELAY_SECONDS, ge=1, le=900)
    unrestricted: bool = True
    error_queue: str = "error"
    max_attempts: int = Field(default=5, ge=1, le=1000)
    visibility_timeout_seconds: int = Field(
        default=60, ge=1, le=limits.MAX_VISIBILITY_TIMEOUT_SECONDS
    )
    delay_queue_retention_seconds: int = Field(
        default=limits.MIN_DELAY_QUEUE_RETENTION_SECONDS,
        ge=limits.MIN_DELAY_QUEUE_RETENTION_SECONDS,
        le=limits.MAX_RETENTION_SECONDS,
    )
    max_message_bytes: int = Field(default=limits.MAX_MESSAGE_BYTES, ge=1024, le=1_048_576)
    kms_key_id: str | None = None
    concurrency: int = Field(default=4, ge=1, le=64)
    wait_time_seconds: int = Field(default=limits.LONG_POLL_SECONDS, ge=0, le=20)
    stats_interval_seconds: float = Field(default=60.0, gt=0)
    log_format: Literal["json", "console"] = "json"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_file: Path | None = None

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


def load_settings(**overrides: Any) -> Settings:
    """Build settings from env plus explicit overrides; one clear line on bad values."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = "_".join(str(p) for p in err["loc"]).upper()
            problems.append(f"SQSDELAY_{name}={err.get('input')!r}: {err['msg']}")
        raise ConfigError("invalid setting " + "; ".join(problems)) from None
