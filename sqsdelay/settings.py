"""Configuration from the environment (prefix SQSDELAY_), overridable by CLI flags.

`Settings` is the only list of settings: the CLI's global flags are generated from its
fields, and a test checks that README.md documents each one.
"""

import functools
import shlex
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sqsdelay.core import defaults, quotas
from sqsdelay.core.decision import Limits
from sqsdelay.core.parking import min_park_after_seconds, park_after_seconds
from sqsdelay.core.queue_trios import QueueConfig
from sqsdelay.core.send import SendLimits
from sqsdelay.core.send_config import SendConfig
from sqsdelay.core.types import InvalidDelayAction, Parking, WireFormat
from sqsdelay.errors import ConfigError

ENV_PREFIX = "SQSDELAY_"
SECRET_SETTINGS = frozenset({"console_token"})  # never printed, not even in an error


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    endpoint_url: str | None = Field(default=None, description="SQS endpoint (unset = AWS)")
    region: str | None = Field(default=None, description="AWS region")
    queue_prefix: str = Field(default="", description="prefix for every queue name")
    queues: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="worker: comma-separated destination queues when none are given; * for "
        "every delay queue under SQSDELAY_QUEUE_PREFIX",
    )
    idle_counts_lag_seconds: float = Field(
        default=60.0,
        ge=0,
        le=300,
        description="worker: how far SQS's approximate counts may lag; an empty delay queue is "
        "checked every cycle - lag - margin seconds instead of long-polled (off when that "
        "is not positive)",
    )
    discovery_interval_seconds: float = Field(
        default=300.0,
        ge=1,
        le=3600,
        description="worker with SQSDELAY_QUEUES=*: how often ListQueues looks for new and "
        "deleted delay queues",
    )
    pause_check_seconds: float = Field(
        default=30.0,
        ge=1,
        le=900,
        description="worker, Lambda: how often a destination's pause tag (sqsdelay pause) is "
        "read, per delay queue; a pause or resume takes effect within this",
    )
    pause_hold_seconds: int | None = Field(
        default=None,
        ge=1,
        le=43_000,
        description="worker, Lambda: how long a paused destination's message is held at a "
        "time (unset: one cycle; docs/operator-controls.md)",
    )
    max_native_delay_seconds: int = Field(
        default=quotas.MAX_NATIVE_DELAY_SECONDS,
        ge=1,
        le=quotas.MAX_NATIVE_DELAY_SECONDS,
        description="the FIFO cycle, 1..900; lower only for tests and demos",
    )
    unrestricted: bool = Field(default=True, description="sender: allow delays above 900 s")
    max_delay_seconds: int = Field(
        default=defaults.DEFAULT_MAX_DELAY_SECONDS,
        ge=quotas.MAX_NATIVE_DELAY_SECONDS,
        le=defaults.MAX_DELAY_SECONDS,
        description="the longest delay accepted (default ten years, at most a century); the "
        "worker dead-letters a longer one",
    )
    error_queue: str = Field(default="error", description="where poison messages go")
    wire_format: WireFormat = Field(
        default="raw",
        description="sender: raw body, or nservicebus (TransportMessage envelope; needs a type)",
    )
    invalid_delay: InvalidDelayAction = Field(
        default="error",
        description="worker: a missing or bad delay attribute goes to the error queue, or is "
        "delivered at once (as NServiceBus does)",
    )
    parking: Parking = Field(
        default="off",
        description="off, or scheduler: long delays wait in EventBridge Scheduler, not the loop",
    )
    park_after_seconds: int | None = Field(
        default=None,
        ge=1,
        description="parking: park what has more than this left (unset: the break-even "
        "computed from the price list)",
    )
    scheduler_role_arn: str | None = Field(
        default=None,
        description="parking: the role Scheduler sends with (sqs:SendMessage on the delay and "
        "error queues)",
    )
    park_concurrency: int = Field(
        default=10,
        ge=1,
        le=100,
        description="parking: CreateSchedule calls made at once",
    )
    schedule_group: str = Field(
        default="sqsdelay",
        pattern=r"^[0-9a-zA-Z-_.]{1,64}$",
        description="parking: the EventBridge Scheduler schedule group",
    )
    recurring_group: str = Field(
        default="sqsdelay-recurring",
        pattern=r"^[0-9a-zA-Z-_.]{1,64}$",
        description="recurring schedules (`sqsdelay schedule`): their schedule group, apart "
        "from parking's so that install --check counts only parked messages",
    )
    registry: Literal["off", "dynamodb"] = Field(
        default="off",
        description="dynamodb: record every delayed message, so that it can be listed, "
        "cancelled, rescheduled and deduplicated by id (sender and worker alike)",
    )
    registry_table: str = Field(
        default="sqsdelay-scheduled",
        pattern=r"^[a-zA-Z0-9_.\-]{3,255}$",
        description="registry: the DynamoDB table (SQSDELAY_QUEUE_PREFIX is not added)",
    )
    max_attempts: int = Field(
        default=defaults.DEFAULT_MAX_ATTEMPTS,
        ge=1,
        le=1000,
        description="failures caused by the message itself before it is dead-lettered",
    )
    visibility_timeout_seconds: int = Field(
        default=defaults.DEFAULT_VISIBILITY_TIMEOUT_SECONDS,
        ge=1,
        le=quotas.MAX_VISIBILITY_TIMEOUT_SECONDS,
        description="worker: how long a batch in hand is kept out of sight (extended from "
        "SQSDELAY_RECEIVE_VISIBILITY_SECONDS while it is handled)",
    )
    receive_visibility_seconds: int = Field(
        default=defaults.DEFAULT_RECEIVE_VISIBILITY_SECONDS,
        ge=1,
        le=quotas.MAX_VISIBILITY_TIMEOUT_SECONDS,
        description="worker: visibility on receive; a batch still in hand at half of it is "
        "extended to the visibility timeout",
    )
    delay_queue_retention_seconds: int = Field(
        default=defaults.MIN_DELAY_QUEUE_RETENTION_SECONDS,
        ge=defaults.MIN_DELAY_QUEUE_RETENTION_SECONDS,
        le=quotas.MAX_RETENTION_SECONDS,
        description="delay queue retention",
    )
    max_message_bytes: int = Field(
        default=quotas.MAX_MESSAGE_BYTES,
        ge=1024,
        le=quotas.MAX_MESSAGE_BYTES,
        description="body + attributes size limit, checked before sending",
    )
    kms_key_id: str | None = Field(default=None, description="KMS key for queue encryption")
    concurrency: int = Field(default=4, ge=1, le=64, description="worker: receive loops per queue")
    wait_time_seconds: int = Field(
        default=quotas.LONG_POLL_SECONDS,
        ge=0,
        le=quotas.LONG_POLL_SECONDS,
        description="worker: long-poll wait",
    )
    call_timeout_seconds: float = Field(
        default=defaults.DEFAULT_CALL_TIMEOUT_SECONDS,
        gt=0,
        le=60,
        description="time limit of each call a worker or sender makes (Scheduler's included), "
        "receives aside",
    )
    max_receive_failure_seconds: float = Field(
        default=300.0,
        gt=0,
        description="worker: exit 1 after receives have failed this long without a success",
    )
    stats_interval_seconds: float = Field(
        default=60.0,
        gt=0,
        description="worker: period of the worker.stats event and of the metrics",
    )
    liveness_file: Path | None = Field(
        default=None,
        description="worker: a file its event loop touches every 5 s; a health check that "
        "finds it older than a minute has found a wedged worker",
    )
    metrics: Literal["emf", "off"] = Field(
        default="emf",
        description="worker and Lambda: CloudWatch embedded metric format lines on stdout, or off",
    )
    metrics_namespace: str = Field(
        default="sqsdelay",
        pattern=r"^[0-9A-Za-z.\-_/#:]{1,255}$",
        description="the CloudWatch namespace of the metrics",
    )
    spark_class_archive: Literal["auto", "off"] | Path = Field(
        default="auto",
        description="cost report: Java's class-data archive for a faster Spark start. auto: "
        "one per Java and pyspark install under the user cache directory; off; or a file",
    )
    console_token: str | None = Field(
        default=None,
        repr=False,  # a secret: never in a repr, a log line or an error (`SECRET_SETTINGS`)
        # checked (16 characters or more) by the console as it starts, not here: a bad
        # token must not stop every other command, nor be printed
        description="console: the token every request needs (Authorization: Bearer, or the "
        "sign-in page); required to bind to an address other than loopback",
    )
    console_token_file: Path | None = Field(
        default=None,
        description="console: a file of tokens, one NAME:TOKEN a line (the name is logged as "
        "who acted), instead of SQSDELAY_CONSOLE_TOKEN",
    )
    console_public_origin: str | None = Field(
        default=None,
        description="console behind a reverse proxy: the address browsers open, e.g. "
        "https://console.example.com; the origin its forms must come from, and the cookie "
        "is Secure when it is https",
    )
    console_forwarded_allow_ips: str = Field(
        default="127.0.0.1",
        description="console: comma-separated addresses (or *) of the proxies whose "
        "X-Forwarded-For and X-Forwarded-Proto are believed (uvicorn's --forwarded-allow-ips)",
    )
    console_session_idle_seconds: int = Field(
        default=3600,
        ge=1,
        le=31 * 86400,
        description="console: a sign-in ends this long after its last request",
    )
    console_session_lifetime_seconds: int = Field(
        default=43_200,
        ge=1,
        le=31 * 86400,
        description="console: a sign-in ends this long after it began, however used",
    )
    otel: Literal["auto", "off"] = Field(
        default="auto",
        description="OpenTelemetry (sqsdelay[otel]): auto traces when opentelemetry-api is "
        "installed (W3C trace context on every message, the worker's spans, the consumers' "
        "spans); off imports nothing",
    )
    otel_parent: Literal["link", "child"] = Field(
        default="link",
        description="OpenTelemetry: a consumer's and the worker's spans link to the "
        "producer's span (link), or are its children, in its trace (child)",
    )
    log_format: Literal["json", "console"] = Field(default="json", description="json or console")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="DEBUG, INFO, WARNING or ERROR"
    )
    log_file: Path | None = Field(
        default=None, description="also append the JSON events to this file"
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("queues", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [q.strip() for q in value.split(",") if q.strip()]
        return value

    @model_validator(mode="after")
    def _parking(self) -> "Settings":
        if self.parking == "scheduler" and not self.scheduler_role_arn:
            raise ValueError(
                "SQSDELAY_PARKING=scheduler needs SQSDELAY_SCHEDULER_ROLE_ARN, the role "
                "infra/error-queue.yaml creates with Parking=scheduler (output SchedulerRoleArn)"
            )
        least = min_park_after_seconds(self.max_native_delay_seconds)
        if self.park_after_seconds is not None and self.park_after_seconds < least:
            raise ValueError(
                f"SQSDELAY_PARK_AFTER_SECONDS must be at least {least} (one cycle, the "
                "120 s margin and Scheduler's one-minute precision, each at most one cycle)"
            )
        return self

    def limits(self) -> Limits:
        """The decision's limits, as the worker and the Lambda handler are configured."""
        return Limits(
            max_native_delay_seconds=self.max_native_delay_seconds,
            max_attempts=self.max_attempts,
            max_message_bytes=self.max_message_bytes,
            invalid_delay=self.invalid_delay,
            park_after_seconds=self.park_after(),
            max_delay_seconds=self.max_delay_seconds,
        )

    def queue_config(self) -> QueueConfig:
        """What a delay queue is created and checked with."""
        return QueueConfig(
            max_native_delay_seconds=self.max_native_delay_seconds,
            delay_queue_retention_seconds=self.delay_queue_retention_seconds,
            kms_key_id=self.kms_key_id,
        )

    def send_limits(self) -> SendLimits:
        """What the sender checks and routes a message by."""
        return SendLimits(
            queue_prefix=self.queue_prefix,
            max_delay_seconds=self.max_delay_seconds,
            max_native_delay_seconds=self.max_native_delay_seconds,
            unrestricted=self.unrestricted,
            wire_format=self.wire_format,
            max_message_bytes=self.max_message_bytes,
            install_hint=functools.partial(install_command, self),
        )

    def send_config(self) -> SendConfig:
        """What the senders' flows are configured with (`core/send_config.py`)."""
        return SendConfig(
            limits=self.send_limits(),
            call_timeout=self.call_timeout_seconds,
            error_queue=self.error_queue,
            park_concurrency=self.park_concurrency,
            park_after=self.park_after(),
            schedule_group=self.schedule_group,
            scheduler_role_arn=self.scheduler_role_arn,
            registry_table=self.registry_table_name(),
            region=self.region,
        )

    def park_after(self) -> int | None:
        """The park threshold in force: None with parking off; else the setting, or the
        break-even at the shipped list prices for the configured cycle."""
        if self.parking == "off":
            return None
        if self.park_after_seconds is not None:
            return self.park_after_seconds
        return park_after_seconds(self.max_native_delay_seconds)

    def receive_visibility(self) -> int:
        """The visibility a receive asks for: the short one, never above the timeout."""
        return min(self.receive_visibility_seconds, self.visibility_timeout_seconds)

    def registry_table_name(self) -> str | None:
        """The registry's table, or None when the registry is off."""
        return self.registry_table if self.registry == "dynamodb" else None

    def batch_budget_seconds(self) -> float:
        """How long the calls of one received batch may take, every kind counted (Scheduler,
        sends, delete, hold): inside the visibility timeout, so that no message reappears
        while it is in hand, and at most STOP_CALLS call time limits."""
        return min(
            defaults.BATCH_BUDGET_SHARE * self.visibility_timeout_seconds,
            self.call_budget_seconds(),
        )

    def call_budget_seconds(self) -> float:
        """STOP_CALLS call time limits: the most any batch's calls may take (the Lambda's
        visibility timeout is the queue's, so only this bounds it, with its remaining time)."""
        return defaults.STOP_CALLS * self.call_timeout_seconds

    def receive_deadline_seconds(self) -> float:
        """How long a long poll may take before the worker gives it up: its wait and a fixed
        margin (botocore's read timeout bounds one attempt only, and three stalled attempts
        outlasted ECS's stop timeout). Not the call time limit: a small one would give up
        healthy empty polls."""
        return self.wait_time_seconds + defaults.RECEIVE_MARGIN_SECONDS

    def stop_budget_seconds(self) -> float:
        """The longest a graceful stop can take (what ECS's stopTimeout must cover): the polls
        in progress return (at their deadline at the latest), then the batches in hand
        finish within their budget."""
        return self.receive_deadline_seconds() + self.batch_budget_seconds()


# Settings that decide what `install` creates; a hint repeats those that are not default.
_INSTALL_SETTINGS = (
    "queue_prefix",
    "error_queue",
    "max_native_delay_seconds",
    "delay_queue_retention_seconds",
    "kms_key_id",
    "registry",
    "registry_table",
)


def install_command(settings: Settings, *queues: str, options: str = "") -> str:
    """A `sqsdelay install` command line that creates (or fixes) exactly these queues."""
    flags = []
    for name in _INSTALL_SETTINGS:
        value = getattr(settings, name)
        if value != Settings.model_fields[name].default:
            flags.append(f"--{name.replace('_', '-')} {shlex.quote(str(value))}")
    words = ["sqsdelay", *flags, "install", *(shlex.quote(q) for q in queues)]
    return " ".join(words) + (f" {options}" if options else "")


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def load_settings(**overrides: Any) -> Settings:
    """Build settings from env plus explicit overrides; one clear line on bad values."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            if not err["loc"]:  # a rule across settings names them itself
                problems.append(err["msg"].removeprefix("Value error, "))
                continue
            field = "_".join(str(p) for p in err["loc"])
            shown = "(hidden)" if field in SECRET_SETTINGS else repr(err.get("input"))
            problems.append(f"{env_name(field)}={shown}: {err['msg']}")
        raise ConfigError("invalid setting " + "; ".join(problems)) from None
