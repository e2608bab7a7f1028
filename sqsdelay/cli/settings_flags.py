"""The settings flags: one `--name` per Settings field, and their help in panels by who
reads them."""

from __future__ import annotations

from collections.abc import Callable
from inspect import Parameter, Signature
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import typer
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from rich.console import Console
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from sqsdelay import logs
from sqsdelay.settings import Settings, load_settings

# The settings flags by who reads them; tests check that every setting has its panel.
PANELS: dict[str, tuple[str, ...]] = {
    "Connection": ("endpoint_url", "region", "call_timeout_seconds"),
    "Queues": (
        "queue_prefix",
        "error_queue",
        "max_native_delay_seconds",
        "visibility_timeout_seconds",
        "delay_queue_retention_seconds",
        "max_message_bytes",
        "kms_key_id",
    ),
    "Sender": ("unrestricted", "max_delay_seconds", "wire_format"),
    "Worker": (
        "queues",
        "discovery_interval_seconds",
        "idle_counts_lag_seconds",
        "pause_check_seconds",
        "pause_hold_seconds",
        "concurrency",
        "wait_time_seconds",
        "receive_visibility_seconds",
        "invalid_delay",
        "max_attempts",
        "max_receive_failure_seconds",
        "stats_interval_seconds",
        "liveness_file",
    ),
    "Parking": (
        "parking",
        "park_after_seconds",
        "scheduler_role_arn",
        "park_concurrency",
        "schedule_group",
        "recurring_group",
    ),
    "Registry": ("registry", "registry_table"),
    "Logging and metrics": (
        "log_format",
        "log_level",
        "log_file",
        "metrics",
        "metrics_namespace",
        "otel",
        "otel_parent",
    ),
    "Cost report": ("spark_class_archive",),
    "Console": (
        "console_token",
        "console_token_file",
        "console_public_origin",
        "console_forwarded_allow_ips",
        "console_session_idle_seconds",
        "console_session_lifetime_seconds",
    ),
}
PANEL_OF = {name: panel for panel, names in PANELS.items() for name in names}


def _flag(info: FieldInfo) -> tuple[Any, str]:
    """The type typer parses the flag as, and the one the help shows (Settings validates)."""
    annotation = info.annotation
    if annotation is bool:
        return bool, ""
    if get_origin(annotation) is Literal:
        return annotation, "|".join(str(v) for v in get_args(annotation))
    kinds = [k for k in get_args(annotation) if k is not type(None)] or [annotation]
    choices = [str(v) for k in kinds if get_origin(k) is Literal for v in get_args(k)]
    if choices:  # a choice or a file
        return str, "|".join([*choices, "FILE"])
    if get_origin(kinds[0]) is list:
        return str, "NAME,NAME"
    shown = {int: "INTEGER", float: "NUMBER", Path: "FILE"}
    return kinds[0], shown.get(kinds[0], "TEXT")


def _default_text(name: str, info: FieldInfo) -> str:
    if info.annotation is bool:
        return ("" if info.default else "no-") + name.replace("_", "-")
    if info.default in (None, "", PydanticUndefined):
        return ""
    return str(info.default)


def print_settings(console: Console) -> None:
    intro = (
        "Settings flags go before the command. Each has an environment variable of the same "
        "name: --max-attempts is SQSDELAY_MAX_ATTEMPTS."
    )
    console.print(Padding(Text(intro), (0, 1)))
    for panel, names in PANELS.items():
        table = Table(box=None, show_header=False, expand=True, padding=(0, 1, 0, 0))
        table.add_column(no_wrap=True, style="bold cyan")
        table.add_column(no_wrap=True, style="yellow")
        table.add_column(ratio=1)
        for name in names:
            info = Settings.model_fields[name]
            flag = "--" + name.replace("_", "-")
            if info.annotation is bool:
                flag += "\n--no-" + flag[2:]
            text = Text((info.description or "").removeprefix(f"{panel.lower()}: "))
            if default := _default_text(name, info):
                text.append(f" [default: {default}]", style="dim")
            table.add_row(flag, _flag(info)[1], text)
        console.print(Panel(table, title=panel, title_align="left", border_style="dim"))


def generated_callback() -> Callable[..., None]:
    """A callback with one `--name` flag per Settings field, so the two never drift apart."""
    params = [Parameter("ctx", Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"ctx": typer.Context, "return": None}
    for name, info in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        kind = _flag(info)[0]
        option = typer.Option(
            None,
            f"{flag}/--no-{flag[2:]}" if kind is bool else flag,
            case_sensitive=False,
        )
        params.append(Parameter(name, Parameter.KEYWORD_ONLY, default=option))
        annotations[name] = kind | None

    def callback(ctx: typer.Context, **flags: Any) -> None:
        ctx.obj = {k: v for k, v in flags.items() if v is not None}

    callback.__signature__ = Signature(params)  # type: ignore[attr-defined]
    callback.__annotations__ = annotations
    return callback


def settings_of(ctx: typer.Context, **more: Any) -> Settings:
    settings = load_settings(**{**(ctx.obj or {}), **more})
    logs.configure(settings.log_format, settings.log_level, file=settings.log_file)
    return settings
