"""inspect and replay-errors against the moto server."""

from __future__ import annotations

import json
import shlex
import subprocess
import uuid
from typing import Any

import boto3
import pytest

from sqsdelay.aws.installer import Installer
from sqsdelay.aws.operations import inspect, replay_errors
from sqsdelay.aws.sender import Sender
from sqsdelay.core import wire_format
from sqsdelay.core.failure_record import Replay, plan_replay
from sqsdelay.core.received import Received
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support import stacks
from tests.support.cli import run
from tests.support.lambdas import lambda_function
from tests.support.workerkit import Collector, RunningWorker


def test_inspect_counts_and_checks(make_settings: Any, sqs: Any) -> None:
    s = make_settings(max_native_delay_seconds=60)
    Installer(s, client=sqs).run(["orders"])
    sender = Sender(s, client=sqs)
    sender.send("orders", "now", delay=0)
    sender.send("orders", "soon", delay=30)
    sender.send("orders", "later", delay=3600)
    states = {st.report.spec.role: st for st in inspect(s, ["orders"], client=sqs)}
    assert states["destination"].counts == {"visible": 1, "in_flight": 0, "delayed": 1}
    assert states["delay"].counts["delayed"] == 1
    assert all(not st.report.problems for st in states.values())
    wrong = s.model_copy(update={"max_native_delay_seconds": 900})
    delay_state = next(
        st for st in inspect(wrong, ["orders"], client=sqs) if st.report.spec.role == "delay"
    )
    assert "DelaySeconds is 60, expected 900" in delay_state.report.problems[0].problem


def test_inspect_cli(env: dict[str, str], sqs: Any) -> None:
    assert run(env, "install", "orders").returncode == 0
    done = run(env, "inspect", "orders")
    assert done.returncode == 0, done.stderr
    assert "orders-delay.fifo" in done.stdout and "in flight" in done.stdout
    missing = run(env, "inspect", "ghost")
    assert missing.returncode == 1 and "queue does not exist" in missing.stdout


def test_inspect_lambda_cli_reports_terminate_and_its_fix_clears_it(
    env: dict[str, str], moto_url: str
) -> None:
    """`sqsdelay inspect QUEUE --lambda FUNCTION` as the README writes it, against the
    emulator's GetFunctionRecursionConfig: a new function has Lambda's default Terminate,
    which is a problem (exit 1) with a fix; after the fix it passes."""
    lam, function = lambda_function(moto_url)
    assert run(env, "install", "orders").returncode == 0

    def inspect_cli() -> subprocess.CompletedProcess[str]:
        return run(env, "inspect", "orders", "--lambda", function)

    before = inspect_cli()
    assert before.returncode == 1, before.stdout + before.stderr
    assert f"lambda {function}: problem:" in before.stdout and "'Terminate'" in before.stdout
    (fix,) = [x.removeprefix("fix: ") for x in before.stdout.splitlines() if "recursion" in x]
    # the fix as printed, made with boto3 instead of the AWS CLI (not installed here)
    argv = shlex.split(fix.split(" (")[0])
    assert argv[:3] == ["aws", "lambda", "put-function-recursion-config"]
    options = dict(zip(argv[3::2], argv[4::2], strict=True))
    lam.put_function_recursion_config(
        FunctionName=options["--function-name"], RecursiveLoop=options["--recursive-loop"]
    )
    after = inspect_cli()
    assert after.returncode == 0, after.stdout + after.stderr
    assert "problem" not in after.stdout and "fix:" not in after.stdout
    missing = run(env, "inspect", "orders", "--lambda", "ghost")
    assert missing.returncode == 1 and "GetFunctionRecursionConfig" in missing.stderr


def test_the_emulator_keeps_a_recursion_config_per_function_as_lambda_does(
    moto_url: str,
) -> None:
    """What the CLI test relies on: Terminate until put, per function, by name or ARN; a
    value other than Allow or Terminate is refused; CloudFormation's RecursiveLoop is kept
    (moto itself drops it)."""
    lam, one = lambda_function(moto_url)
    _, other = lambda_function(moto_url)
    arn = lam.get_function(FunctionName=one)["Configuration"]["FunctionArn"]
    assert lam.get_function_recursion_config(FunctionName=one)["RecursiveLoop"] == "Terminate"
    lam.put_function_recursion_config(FunctionName=arn, RecursiveLoop="Allow")
    assert lam.get_function_recursion_config(FunctionName=one)["RecursiveLoop"] == "Allow"
    assert lam.get_function_recursion_config(FunctionName=other)["RecursiveLoop"] == "Terminate"
    with pytest.raises(lam.exceptions.InvalidParameterValueException):
        lam.put_function_recursion_config(FunctionName=one, RecursiveLoop="Sometimes")
    with pytest.raises(lam.exceptions.ResourceNotFoundException):
        lam.get_function_recursion_config(FunctionName="ghost")
    role = boto3.client("iam", endpoint_url=moto_url, region_name="us-east-1").get_role(
        RoleName=one
    )["Role"]["Arn"]
    template = {
        "Resources": {
            "Function": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Role": role,
                    "Runtime": "python3.12",
                    "Handler": "index.handler",
                    "Code": {"ZipFile": "def handler(event, context):\n    return None\n"},
                    "RecursiveLoop": "Allow",
                },
            }
        }
    }
    cf = stacks.cloudformation(moto_url)
    stack = f"s{uuid.uuid4().hex[:8]}"
    cf.create_stack(StackName=stack, TemplateBody=json.dumps(template))
    (resource,) = cf.describe_stack_resources(StackName=stack)["StackResources"]
    deployed = resource["PhysicalResourceId"]
    assert lam.get_function_recursion_config(FunctionName=deployed)["RecursiveLoop"] == "Allow"
    cf.delete_stack(StackName=stack)


def failure(queue: str, **record: Any) -> dict[str, Any]:
    return {
        wire_format.FAILURE_ATTRIBUTE: {
            "DataType": "String",
            "StringValue": json.dumps({"queue": queue, **record}),
        }
    }


def test_plan_replay_restores_the_delay_attributes() -> None:
    m = Received(
        "m",
        "r",
        "b",
        {
            "keep": {"DataType": "String", "StringValue": "k"},
            **failure("q-delay.fifo", delay_seconds="7200", due_at="123"),
        },
    )
    plan = plan_replay(m, "q-delay.fifo")
    assert isinstance(plan, Replay)
    assert plan.attributes[wire_format.DELAY_ATTRIBUTE]["StringValue"] == "7200"
    assert plan.attributes[wire_format.DUE_AT_ATTRIBUTE]["StringValue"] == "123"
    assert wire_format.FAILURE_ATTRIBUTE not in plan.attributes and "keep" in plan.attributes
    assert "belongs to 'q-delay.fifo'" in str(plan_replay(m, "other-delay.fifo"))
    bad = Received("m", "r", "b", failure("q-delay.fifo", delay_seconds="soon", reason="x"))
    assert "no valid delay" in str(plan_replay(bad, "q-delay.fifo"))
    assert "no sqsdelay.Failure" in str(plan_replay(Received("m", "r", "b"), "q-delay.fifo"))


def test_replay_after_the_destination_is_fixed_delivers_and_loses_nothing(
    make_settings: Any, sqs: Any
) -> None:
    s: Settings = make_settings(
        max_native_delay_seconds=1,
        visibility_timeout_seconds=1,
        wait_time_seconds=1,
        max_attempts=1,
    )
    urls = {
        r.spec.name.removeprefix(s.queue_prefix): str(r.url)
        for r in Installer(s, client=sqs).run(["orders"])
    }
    # The destination refuses messages over 1 KiB for a while: a fault of the message
    # (an outage would be waited out, never dead-lettered).
    small = {"MaximumMessageSize": "1024"}
    sqs.set_queue_attributes(QueueUrl=urls["orders"], Attributes=small)
    stranded = "stranded " * 200
    Sender(s, client=sqs).send("orders", stranded, delay=2)
    errors = Collector(sqs, urls["error"])

    def error_count() -> int:
        attrs = sqs.get_queue_attributes(
            QueueUrl=urls["error"], AttributeNames=["ApproximateNumberOfMessages"]
        )
        return int(attrs["Attributes"]["ApproximateNumberOfMessages"])

    with RunningWorker(s, ["orders"]):
        wait_for(lambda: error_count() == 1, timeout=30)
    # a message of another destination shares the error queue and must stay there
    sqs.send_message(
        QueueUrl=urls["error"],
        MessageBody="foreign",
        MessageAttributes=failure(s.queue_prefix + "other-delay.fifo", delay_seconds="5"),
    )
    url = urls["orders"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": "262144"})  # fixed
    result = replay_errors(s, "orders", client=sqs)
    assert len(result.replayed) == 1 and list(result.skipped.values()) == [
        f"belongs to '{s.queue_prefix}other-delay.fifo'"
    ]
    assert error_count() == 1  # the foreign one, visible again at once
    with RunningWorker(s.model_copy(update={"max_attempts": 5}), ["orders"]):
        (got,) = Collector(sqs, url).until(1, timeout=20)
    assert got.body == stranded
    assert [g.body for g in errors.until(1, timeout=5)] == ["foreign"]


def test_a_failed_replay_keeps_the_message(make_settings: Any, sqs: Any) -> None:
    s: Settings = make_settings()
    urls = {r.spec.role: str(r.url) for r in Installer(s, client=sqs).run(["orders"])}
    sqs.send_message(
        QueueUrl=urls["error"],
        MessageBody="keep me",
        MessageAttributes=failure(s.queue_prefix + "orders-delay.fifo", delay_seconds="60"),
    )

    class CutSend:
        """The real client, except that every send fails as if the network dropped."""

        def __init__(self, real: Any) -> None:
            self._real = real

        def __getattr__(self, name: str) -> Any:
            return getattr(self._real, name)

        def send_message(self, **_: Any) -> None:
            from botocore.exceptions import EndpointConnectionError

            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:1")

    result = replay_errors(s, "orders", client=CutSend(sqs))
    assert result.replayed == [] and len(result.failed) == 1
    assert "EndpointConnectionError" in next(iter(result.failed.values()))
    (kept,) = Collector(sqs, urls["error"]).until(1, timeout=5)
    assert kept.body == "keep me"


def test_replay_stops_at_its_limit_and_its_scan(make_settings: Any, sqs: Any) -> None:
    s: Settings = make_settings()
    urls = {
        r.spec.name.removeprefix(s.queue_prefix): str(r.url)
        for r in Installer(s, client=sqs).run(["orders"])
    }
    ours = failure(s.queue_prefix + "orders-delay.fifo", delay_seconds="5")
    for start in range(0, 25, 10):
        entries = [
            {"Id": str(i), "MessageBody": f"m{i}", "MessageAttributes": ours}
            for i in range(start, min(25, start + 10))
        ]
        sqs.send_message_batch(QueueUrl=urls["error"], Entries=entries)
    # The old loop asked SQS for 10 at a time whatever was left, and could replay 20 here.
    assert len(replay_errors(s, "orders", limit=12, client=sqs).replayed) == 12
    # A shared error queue is not scanned whole: 5 looked at, 5 replayed, the rest stay.
    result = replay_errors(s, "orders", limit=100, scan=5, client=sqs)
    assert len(result.replayed) == 5
    attrs = sqs.get_queue_attributes(QueueUrl=urls["error"], AttributeNames=["All"])["Attributes"]
    assert int(attrs["ApproximateNumberOfMessages"]) == 25 - 12 - 5
