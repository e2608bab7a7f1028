import io
import json

import pytest
import structlog

from sqsdelay import logs
from sqsdelay.errors import ConfigError
from sqsdelay.settings import load_settings


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSDELAY_MAX_NATIVE_DELAY_SECONDS", "5")
    monkeypatch.setenv("SQSDELAY_UNRESTRICTED", "false")
    monkeypatch.setenv("SQSDELAY_LOG_LEVEL", "debug")
    s = load_settings()
    assert (s.max_native_delay_seconds, s.unrestricted, s.log_level) == (5, False, "DEBUG")
    assert s.error_queue == "error" and s.delay_queue_retention_seconds == 345_600


def test_overrides_beat_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSDELAY_MAX_NATIVE_DELAY_SECONDS", "5")
    assert load_settings(max_native_delay_seconds=7).max_native_delay_seconds == 7


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MAX_NATIVE_DELAY_SECONDS", "0"),
        ("MAX_NATIVE_DELAY_SECONDS", "901"),
        ("DELAY_QUEUE_RETENTION_SECONDS", "3600"),
        ("LOG_FORMAT", "xml"),
        ("MAX_MESSAGE_BYTES", "2000000"),
        ("MAX_ATTEMPTS", "many"),
    ],
)
def test_invalid_settings_give_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(f"SQSDELAY_{name}", value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "\n" not in message
    assert f"SQSDELAY_{name}" in message and value in message


def test_json_logs_have_the_contract_fields_and_never_bodies() -> None:
    out = io.StringIO()
    logs.configure("json", "INFO", stream=out)
    structlog.get_logger("t").info(
        "delay.scheduled", message_id="m", body="secret body", aws_secret_access_key="k"
    )
    line = json.loads(out.getvalue())
    assert line["event"] == "delay.scheduled" and line["level"] == "info"
    assert line["timestamp"].endswith("Z")
    assert "secret body" not in out.getvalue() and line["body"] == "[redacted]"
    assert line["aws_secret_access_key"] == "[redacted]"


def test_console_renderer_and_level_filter() -> None:
    out = io.StringIO()
    logs.configure("console", "WARNING", stream=out)
    structlog.get_logger("t").info("hidden")
    structlog.get_logger("t").warning("shown", x=1)
    assert "hidden" not in out.getvalue() and "shown" in out.getvalue()
    assert not out.getvalue().startswith("{")


def test_log_file_gets_json_lines(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "events.jsonl"
    logs.configure("console", "INFO", stream=io.StringIO(), file=path)
    structlog.get_logger("t").info("delay.scheduled", delay_seconds=5)
    assert json.loads(path.read_text())["delay_seconds"] == 5


def test_settings_are_the_one_list_of_settings() -> None:
    """Every SQSDELAY_ name users see is a setting; every setting has a flag and a README row."""
    import re
    from pathlib import Path

    import typer.main

    from sqsdelay.cli import app
    from sqsdelay.settings import Settings, env_name

    root = Path(__file__).resolve().parent.parent
    shown = [root / "README.md", root / "Dockerfile"]
    shown += sorted((root / "docs").glob("*.md")) + sorted((root / "infra").glob("*.yaml"))
    fields = {env_name(f) for f in Settings.model_fields}
    for path in shown:
        unknown = set(re.findall(r"SQSDELAY_[A-Z0-9_]*[A-Z0-9]", path.read_text())) - fields
        assert not unknown, f"{path.name} names settings that do not exist: {sorted(unknown)}"
    group = typer.main.get_command(app)
    flags = {opt for p in group.params for opt in p.opts}
    readme = (root / "README.md").read_text()
    for field in Settings.model_fields:
        assert "--" + field.replace("_", "-") in flags, f"no CLI flag for {field}"
        assert f"| `{env_name(field)}` |" in readme, f"no README row for {env_name(field)}"


def test_queues_setting_is_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSDELAY_QUEUES", "orders, billing,,")
    assert load_settings().queues == ["orders", "billing"]
    assert load_settings(queues="a,b").queues == ["a", "b"]
