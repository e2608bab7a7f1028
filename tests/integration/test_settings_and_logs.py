import io
import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sqsdelay import logs
from sqsdelay.errors import ConfigError
from sqsdelay.settings import load_settings
from tests.support import docs


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
    logs.get_logger("sqsdelay.t").info(
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
    logs.get_logger("sqsdelay.t").info("hidden")
    logs.get_logger("sqsdelay.t").warning("shown", x=1)
    assert "hidden" not in out.getvalue() and "shown" in out.getvalue()
    assert not out.getvalue().startswith("{")


def test_log_file_gets_json_lines(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "events.jsonl"
    logs.configure("console", "INFO", stream=io.StringIO(), file=path)
    logs.get_logger("sqsdelay.t").info("delay.scheduled", delay_seconds=5)
    assert json.loads(path.read_text())["delay_seconds"] == 5


def test_settings_are_the_one_list_of_settings() -> None:
    """Every SQSDELAY_ name users see is a setting; every setting has a flag and a row in
    docs/settings.md."""
    import re
    from pathlib import Path

    import typer.main

    from sqsdelay.cli import app
    from sqsdelay.settings import Settings, env_name

    root = Path(__file__).resolve().parents[2]
    shown = [*docs.pages(), root / "Dockerfile", *sorted((root / "infra").glob("*.yaml"))]
    fields = {env_name(f) for f in Settings.model_fields}
    for path in shown:
        unknown = set(re.findall(r"SQSDELAY_[A-Z0-9_]*[A-Z0-9]", path.read_text())) - fields
        assert not unknown, f"{path.name} names settings that do not exist: {sorted(unknown)}"
    group = typer.main.get_command(app)
    flags = {opt for p in group.params for opt in p.opts}
    readme = docs.text("settings.md")
    for field in Settings.model_fields:
        assert "--" + field.replace("_", "-") in flags, f"no CLI flag for {field}"
        assert f"| `{env_name(field)}` |" in readme, f"no settings.md row: {env_name(field)}"


def test_queues_setting_is_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSDELAY_QUEUES", "orders, billing,,")
    assert load_settings().queues == ["orders", "billing"]
    assert load_settings(queues="a,b").queues == ["a", "b"]


def test_a_field_named_like_a_log_record_attribute_is_kept() -> None:
    out = io.StringIO()
    logs.configure("json", "INFO", stream=out)
    logs.get_logger("sqsdelay.t").info("queue.created", name="orders", module="m", args=1)
    line = json.loads(out.getvalue())
    assert (line["name"], line["module"], line["args"]) == ("orders", "m", 1)


def test_configure_again_replaces_and_closes_the_event_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    logs.configure("json", "INFO", stream=io.StringIO(), file=first)
    handlers = list(logging.getLogger("sqsdelay").handlers)
    logs.configure("json", "INFO", stream=io.StringIO(), file=second)
    logs.get_logger("sqsdelay.t").info("delay.scheduled")
    files = [h for h in handlers if isinstance(h, logging.FileHandler)]
    assert files and all(h.stream is None for h in files)  # closed
    assert first.read_text() == "" and "delay.scheduled" in second.read_text()


LIBRARY_USE = """
import logging, sys
from sqsdelay.aws.sender import Sender
if sys.argv[1] == "configured":
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s %(message)s")
Sender().send("orders", "secret body", delay=5)
"""


@pytest.mark.parametrize("app", ["silent", "configured"])
def test_as_a_library_it_logs_through_logging_and_only_if_asked(
    app: str, make_settings: Any, sqs: Any, env: dict[str, str]
) -> None:
    from sqsdelay.aws.installer import Installer

    Installer(make_settings(), client=sqs).run(["orders"])
    done = subprocess.run(
        [sys.executable, "-c", LIBRARY_USE, app],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stderr == ""
    if app == "silent":
        assert done.stdout == ""
    else:
        ours = [x for x in done.stdout.splitlines() if x.startswith("sqsdelay.")]
        assert len(ours) == 1 and ours[0].startswith("sqsdelay.aws.sender event=delay.scheduled ")
        assert "route=direct" in ours[0] and "secret" not in done.stdout


STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def ours_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest gives a logger that does not propagate its capture handlers (caplog) as each
    test's call begins, and an event then goes through `logging`, as it does for any
    handler not configure()'s: these tests are about the events written directly."""
    root = logging.getLogger("sqsdelay")
    theirs = [h for h in root.handlers if type(h).__module__.startswith("_pytest")]
    monkeypatch.setattr(root, "handlers", [h for h in root.handlers if h not in theirs])


def _without_stamp(line: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(line)
    assert STAMP.fullmatch(event.pop("timestamp")), line
    return event


def test_a_line_written_directly_is_the_line_logging_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once configure()'s handlers are the only ones an event reaches, it is written to them
    without a LogRecord (issue 63); a filter on the way sends it through `logging` again.
    The lines are the same, stream and event file alike."""
    out, path = io.StringIO(), tmp_path / "events.jsonl"
    logs.configure("json", "INFO", stream=out, file=path)
    ours_alone(monkeypatch)
    log = logs.get_logger("sqsdelay.t")
    fields = {"message_id": "m", "size_bytes": 12, "where": Path("/x"), "module": "m"}
    log.info("delay.handed_over", **fields, password="p")
    [ours] = [h for h in logging.getLogger("sqsdelay").handlers if getattr(h, "stream", 0) is out]
    records: list[logging.LogRecord] = []

    def seen(record: logging.LogRecord) -> bool:
        records.append(record)
        return True

    ours.addFilter(seen)
    try:
        log.info("delay.handed_over", **fields, password="p")
    finally:
        ours.removeFilter(seen)
    direct, through = out.getvalue().splitlines()
    assert len(records) == 1  # the second only went through logging
    assert _without_stamp(direct) == _without_stamp(through)
    assert _without_stamp(direct) == {
        "message_id": "m",
        "size_bytes": 12,
        "where": "PosixPath('/x')",
        "module": "m",
        "password": "[redacted]",
        "event": "delay.handed_over",
        "level": "info",
    }
    # the event file's handler has no filter: it took the first directly, the second from
    # logging's record
    assert path.read_text().splitlines() == [direct, through]


def test_an_applications_handler_below_sqsdelay_still_gets_the_records() -> None:
    out = io.StringIO()
    logs.configure("json", "INFO", stream=out)
    mine = logging.getLogger("sqsdelay.t.app")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    mine.addHandler(handler)
    try:
        logs.get_logger("sqsdelay.t.app").warning("delay.send_failed", code="X")
    finally:
        mine.removeHandler(handler)
    [record] = records
    assert getattr(record, logs.EVENT_FIELD) == {"code": "X", "event": "delay.send_failed"}
    assert record.levelno == logging.WARNING
    assert "event=delay.send_failed" in record.getMessage()
    assert _without_stamp(out.getvalue())["code"] == "X"  # and it propagated to ours


def test_events_logged_together_are_one_write_each_in_its_own_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Writes(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.writes = 0

        def write(self, s: str) -> int:
            self.writes += 1
            return super().write(s)

    out = Writes()
    logs.configure("json", "INFO", stream=out)
    ours_alone(monkeypatch)
    log = logs.get_logger("sqsdelay.t")
    with pytest.raises(RuntimeError), logs.together():
        for i in range(3):
            log.info("delay.handed_over", n=i)
            with logs.together():  # within another: held for the outer one
                log.info("delay.requeued", n=i)
        assert out.writes == 0
        raise RuntimeError("what is held is written all the same")
    assert out.writes == 1
    lines = [_without_stamp(x) for x in out.getvalue().splitlines()]
    assert [(x["event"], x["n"]) for x in lines] == [
        (e, i) for i in range(3) for e in ("delay.handed_over", "delay.requeued")
    ]
    log.info("delay.handed_over", n=3)  # no longer held
    assert out.writes == 2


def test_an_exception_is_logged_with_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    logs.configure("console", "INFO", stream=out)
    ours_alone(monkeypatch)
    log = logs.get_logger("sqsdelay.t")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("batch.failed", queue="q")
    text = out.getvalue()
    assert "batch.failed" in text and "ValueError: boom" in text and "Traceback" in text
    log.debug("hidden")
    assert "hidden" not in out.getvalue()
