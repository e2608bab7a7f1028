"""The `sqsdelay` command as a user runs it: a subprocess against the moto server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run


def test_install_then_send_prints_one_json_line(env: dict[str, str], sqs: Any) -> None:
    env = {**env, "SQSDELAY_MAX_NATIVE_DELAY_SECONDS": "1"}  # a 1 s cycle: receivable soon
    installed = run(env, "install", "orders")
    assert installed.returncode == 0, installed.stderr
    assert "created" in installed.stdout and installed.stdout.strip().endswith("ok")
    sent = run(
        env,
        "send",
        "orders",
        "--delay",
        "3600",
        "--body",
        "hi",
        "--attribute",
        "k=v",
        "--attribute",
        "n:Number=5",
    )
    assert sent.returncode == 0, sent.stderr
    (line,) = sent.stdout.strip().splitlines()
    out = json.loads(line)
    assert out["route"] == "delay-queue" and out["message_id"]
    assert out["queue_url"].endswith(env["SQSDELAY_QUEUE_PREFIX"] + "orders-delay.fifo")
    scheduled = [json.loads(x) for x in sent.stderr.splitlines() if "delay.scheduled" in x]
    assert scheduled and scheduled[0]["delay_seconds"] == 3600
    msg = sqs.receive_message(
        QueueUrl=out["queue_url"], MessageAttributeNames=["All"], WaitTimeSeconds=3
    )
    attrs = msg["Messages"][0]["MessageAttributes"]
    assert attrs["k"]["StringValue"] == "v" and attrs["n"]["DataType"] == "Number"


def test_send_in_nservicebus_wire_format(env: dict[str, str], sqs: Any) -> None:
    """As the README shows it: the envelope, with the type and one id everywhere."""
    from tests.support import nservicebus_port as nsb

    env = {**env, "SQSDELAY_WIRE_FORMAT": "nservicebus"}
    assert run(env, "install", "Sales.Orders").returncode == 0
    sent = run(
        env,
        "send",
        "Sales.Orders",
        "--delay",
        "5",
        "--message-type",
        "Sales.OrderPlaced, Sales",
        "--body",
        '{"OrderId": 42}',
    )
    assert sent.returncode == 0, sent.stderr
    out = json.loads(sent.stdout)
    assert out["route"] == "direct" and out["nservicebus_message_id"]
    assert out["destination"] == env["SQSDELAY_QUEUE_PREFIX"] + "Sales-Orders"
    (m,) = sqs.receive_message(
        QueueUrl=out["queue_url"], MessageAttributeNames=["All"], WaitTimeSeconds=10
    )["Messages"]
    accepted = nsb.input_queue(m)
    assert accepted.body == b'{"OrderId": 42}'
    assert accepted.headers["NServiceBus.EnclosedMessageTypes"] == "Sales.OrderPlaced, Sales"
    assert accepted.headers["NServiceBus.MessageId"] == out["nservicebus_message_id"]


def test_body_file(env: dict[str, str], tmp_path: Path) -> None:
    run(env, "install", "orders")
    body = tmp_path / "body.json"
    body.write_text('{"x": 1}')
    sent = run(env, "send", "orders", "--delay", "0", "--body-file", str(body))
    assert sent.returncode == 0 and json.loads(sent.stdout)["route"] == "direct"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["send", "orders", "--delay", "-1", "--body", "x"], "must not be negative"),
        (["send", "orders", "--delay", "abc", "--body", "x"], "not a number"),
        (["send", "o" * 70, "--delay", "901", "--body", "x"], "at most 69"),
        (["send", "o" * 81, "--delay", "1", "--body", "x"], "SQS allows 80"),
        (
            ["--wire-format", "nservicebus", "send", "o", "--delay", "1", "--body", "x"],
            "--message-type",
        ),
        (["send", "orders", "--delay", "1"], "--body or --body-file"),
        (["send", "orders", "--delay", "1", "--body-file", "/nonexistent"], "cannot read"),
        (["send", "orders", "--delay", "1", "--body", "x", "--attribute", "novalue"], "NAME=VALUE"),
        (
            ["--max-native-delay-seconds", "901", "send", "orders", "--delay", "1", "--body", "x"],
            "SQSDELAY_MAX_NATIVE_DELAY_SECONDS",
        ),
        (
            ["--no-unrestricted", "send", "orders", "--delay", "901", "--body", "x"],
            "SQSDELAY_UNRESTRICTED",
        ),
        (["install", "orders", "--check", "--fix"], "exclude each other"),
        # milliseconds given as seconds: 3,170 years
        (["send", "orders", "--delay", "99999999999", "--body", "x"], "given in milliseconds"),
        (
            [
                "--parking",
                "scheduler",
                "--scheduler-role-arn",
                "arn:aws:iam::123456789012:role/r",
                "send",
                "orders",
                "--delay",
                "9" * 30,
                "--body",
                "x",
            ],
            "SQSDELAY_MAX_DELAY_SECONDS",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line_and_no_traceback(
    env: dict[str, str], args: list[str], message: str
) -> None:
    result = run(env, *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""


def test_runtime_failure_exits_1_naming_operation_and_queue(env: dict[str, str]) -> None:
    result = run(env, "send", "ghost", "--delay", "5000", "--body", "x")
    assert result.returncode == 1
    assert "GetQueueUrl" in result.stderr and "ghost-delay.fifo" in result.stderr
    assert "install ghost" in result.stderr and "Traceback" not in result.stderr


def test_check_exits_1_listing_problems_and_fix_repairs(env: dict[str, str], sqs: Any) -> None:
    prefix = env["SQSDELAY_QUEUE_PREFIX"]
    sqs.create_queue(QueueName=prefix + "orders")
    sqs.create_queue(
        QueueName=prefix + "orders-delay.fifo",
        Attributes={"FifoQueue": "true", "DelaySeconds": "10"},
    )
    check = run(env, "install", "orders", "--check")
    assert check.returncode == 1
    assert "DelaySeconds is 10, expected 900" in check.stdout
    assert f"fix: sqsdelay --queue-prefix {prefix} install orders --fix" in check.stdout
    assert "queue does not exist" in check.stdout  # the error queue
    fixed = run(env, "install", "orders", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert run(env, "install", "orders", "--check").returncode == 0


def test_help_at_80_columns_lists_the_commands_first_and_every_flag_whole(
    env: dict[str, str],
) -> None:
    from sqsdelay.cli import PANELS
    from sqsdelay.settings import Settings

    result = run({**env, "COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"}, "--help")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in text
    titles = ["Commands", *PANELS]
    at = [next(i for i, line in enumerate(lines) if f"─ {t} ─" in line) for t in titles]
    assert at == sorted(at), "the commands first, then the panels in their order"
    for panel, names in PANELS.items():
        start = at[titles.index(panel)]
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("╰"))
        block = "\n".join(lines[start : end + 1])  # the panel, however long it grows
        for name in names:
            assert f"│ --{name.replace('_', '-')} " in block, (panel, name)
    # every setting has its panel, once
    placed = [n for names in PANELS.values() for n in names]
    assert sorted(placed) == sorted(Settings.model_fields)
    # real types, choices and defaults
    for flag, shown in [
        ("--max-attempts", "INTEGER"),
        ("--call-timeout-seconds", "NUMBER"),
        ("--wire-format", "raw|nservicebus"),
        ("--log-level", "DEBUG|INFO|WARNING|ERROR"),
        ("--log-file", "FILE"),
        ("--spark-class-archive", "auto|off|FILE"),
    ]:
        row = next(line for line in lines if f"│ {flag} " in line)
        assert row.split()[2] == shown, row
    assert "[default: 900]" in text and "--no-unrestricted" in text


def test_flags_parse_as_their_types(env: dict[str, str]) -> None:
    bad = run(env, "--max-attempts", "many", "send", "orders", "--delay", "1", "--body", "x")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "'--max-attempts'" in bad.stderr and "integer" in bad.stderr
    wrong = run(env, "--log-format", "xml", "send", "orders", "--delay", "1", "--body", "x")
    assert wrong.returncode == 2 and "json" in wrong.stderr
    # choices take any case, as the environment variables do
    ok = run(env, "--log-level", "debug", "cost-estimate", "--delay", "1000")
    assert ok.returncode == 0, ok.stderr
