"""The service as the user deploys it: the Dockerfile's entry points with the templates'
environment, the queue stacks deployed into the emulator's CloudFormation, and the IAM grants
of infra/ compared with the calls the code makes. Only the endpoint is changed."""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

from sqsdelay.aws.installer import Installer, queue_tags
from sqsdelay.aws.sender import Message, Sender
from sqsdelay.core import defaults, quotas, wire_format
from sqsdelay.core.metrics import BACKLOG_DUE, BACKLOG_VISIBLE
from sqsdelay.core.queue_trios import QueueSpec
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support import cfn, docs, handovers, iam, stacks
from tests.support.crash import crash_before_delete
from tests.support.dockerfile import one, stages
from tests.support.handovers import assert_handed_over_in_time
from tests.support.lambda_events import invoke_as_lambda, lambda_record
from tests.support.stacks import ECS_PARAMS, LAMBDA_PARAMS, TOPIC, deploy
from tests.support.workerkit import Collector

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent  # the image puts the venv's bin first on PATH


def image_env(stage: str) -> dict[str, str]:
    """ENV lines of a Dockerfile stage."""
    env: dict[str, str] = {}
    for op, rest in stages()[stage]:
        if op == "ENV":
            for pair in rest.split():
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def ecs_container(params: dict[str, Any]) -> dict[str, Any]:
    resources = cfn.Renderer(cfn.load("worker-ecs.yaml"), params).resources()
    (container,) = resources["TaskDefinition"]["Properties"]["ContainerDefinitions"]
    return dict(container)


def start_worker_as_deployed(
    moto_url: str, prefix: str, log_file: Path, **params: Any
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    container = ecs_container({**ECS_PARAMS, "QueuePrefix": prefix, **params})
    env = {e["Name"]: str(e["Value"]) for e in container["Environment"]}
    image = image_env("worker")
    argv = json.loads(one(stages()["worker"], "ENTRYPOINT")) + container.get("Command", [])
    assert argv == ["sqsdelay", "worker"]  # no queue arguments: SQSDELAY_QUEUES must do
    full = {
        **{k: v for k, v in os.environ.items() if k.startswith("AWS_")},  # the task role
        **{k: v for k, v in image.items() if k != "PATH"},
        **env,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "SQSDELAY_ENDPOINT_URL": moto_url,  # the only change
        "SQSDELAY_LOG_FILE": str(log_file),  # to watch it; stderr is awslogs in ECS
        # the task's own /tmp in ECS; here a file of the test's, not the machine's /tmp
        "SQSDELAY_LIVENESS_FILE": str(log_file.parent / "sqsdelay-alive"),
    }
    proc = subprocess.Popen(
        argv, env=full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    return proc, container


def logged(path: Path, event: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.startswith("{")]
    return [x for x in lines if x["event"] == event]


def test_ecs_worker_starts_as_the_image_and_task_definition_say(
    make_settings: Callable[..., Settings], sqs: Any, moto_url: str, prefix: str, tmp_path: Path
) -> None:
    s = make_settings(max_native_delay_seconds=5)
    reports = Installer(s, client=sqs).run(["orders", "billing"])
    urls = {r.spec.name.removeprefix(prefix): str(r.url) for r in reports}
    sender = Sender(s, client=sqs)
    sender.send_batch("orders", [Message(f"o{i}", delay=6 + i) for i in range(3)])
    sender.send_batch("billing", [Message(f"b{i}", delay=6 + i) for i in range(3)])
    proc, container = start_worker_as_deployed(moto_url, prefix, tmp_path / "events.jsonl")
    try:
        got = Collector(sqs, urls["orders"]).until(3, timeout=40)
        got += Collector(sqs, urls["billing"]).until(3, timeout=20)
        # the running worker keeps its liveness file fresh: the task's health check passes
        assert health_check(tmp_path / "sqsdelay-alive").returncode == 0
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=container["StopTimeout"])
        took = time.monotonic() - began
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert code == 0 and "Traceback" not in stderr, stderr[-2000:]
    assert sorted(g.body for g in got) == sorted(
        [f"o{i}" for i in range(3)] + [f"b{i}" for i in range(3)]
    )
    assert took < container["StopTimeout"]


def health_check(liveness_file: Path) -> subprocess.CompletedProcess[str]:
    """The task definition's health check as ECS runs it in the container, the image's
    python being this one and the liveness file the given one."""
    check = ecs_container({**ECS_PARAMS, "QueuePrefix": ""})["HealthCheck"]["Command"]
    assert check[:2] == ["CMD", "python"]  # exec form: no shell in the command
    image_file = image_env("worker")["SQSDELAY_LIVENESS_FILE"]
    assert check[-1].count(f"'{image_file}'") == 1  # the path the worker touches
    argv = [sys.executable, *check[2:-1], check[-1].replace(image_file, str(liveness_file))]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def test_ecs_health_check_passes_while_the_worker_touches_its_file_and_fails_after(
    tmp_path: Path,
) -> None:
    alive = tmp_path / "sqsdelay-alive"
    assert health_check(alive).returncode != 0  # never touched: not started, or stuck early
    alive.touch()
    assert health_check(alive).returncode == 0
    old = time.time() - 61
    os.utime(alive, (old, old))
    assert health_check(alive).returncode == 1  # a wedged loop stopped touching it


def test_ecs_health_check_gives_a_starting_worker_time_and_a_wedged_one_none() -> None:
    container = ecs_container({**ECS_PARAMS, "QueuePrefix": ""})
    check = container["HealthCheck"]
    # the worker touches the file every 5 s: 60 s is 12 missed touches, never one slow tick
    assert "> 60)" in check["Command"][-1]
    assert check["StartPeriod"] >= 10 and check["Timeout"] < check["Interval"]
    # unhealthy within about 60 s + Retries x Interval of the last touch
    assert check["Retries"] * check["Interval"] <= 120
    # the root file system is read-only: the file's folder must be a volume of the task
    assert container["ReadonlyRootFilesystem"] is True
    (mount,) = container["MountPoints"]
    assert mount["ContainerPath"] == os.path.dirname(image_env("worker")["SQSDELAY_LIVENESS_FILE"])


@pytest.mark.parametrize(
    ("uri", "allowed"),
    [
        (f"123456789012.dkr.ecr.us-east-1.amazonaws.com/sqsdelay-worker@sha256:{'a1' * 32}", True),
        (f"sqsdelay-worker:1.2@sha256:{'0' * 64}", True),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/sqsdelay-worker:latest", False),
        ("sqsdelay-worker", False),
        (f"sqsdelay-worker@sha256:{'A' * 64}", False),
        (f"sqsdelay-worker@sha256:{'0' * 63}", False),
    ],
)
def test_ecs_image_is_named_by_digest(uri: str, allowed: bool) -> None:
    """CloudFormation matches AllowedPattern against the whole value."""
    pattern = cfn.load("worker-ecs.yaml")["Parameters"]["ImageUri"]["AllowedPattern"]
    assert bool(re.fullmatch(pattern, uri)) is allowed


def test_ecs_stop_timeout_covers_the_worst_graceful_stop() -> None:
    container = ecs_container({**ECS_PARAMS, "QueuePrefix": ""})
    env = {
        e["Name"].removeprefix("SQSDELAY_").lower(): e["Value"] for e in container["Environment"]
    }
    settings = Settings(**env)
    assert settings.stop_budget_seconds() < container["StopTimeout"] <= 120  # Fargate's maximum


def test_a_stop_never_strands_a_message_about_to_become_visible(
    make_settings: Callable[..., Settings], sqs: Any, moto_url: str, prefix: str, tmp_path: Path
) -> None:
    """SIGTERM while the only long poll waits: the message that becomes visible during that
    poll is handed over on time, not left invisible for the visibility timeout (60 s)."""
    cycle = 5
    s = make_settings(max_native_delay_seconds=cycle)
    reports = Installer(s, client=sqs).run(["orders"])
    dest_url = str(reports[0].url)
    events = tmp_path / "events.jsonl"
    sent_at = time.time()
    delay = 2 * cycle + 2  # visible at 5 s (requeued), again at 10 s (handed over), due at 12 s
    message_id = Sender(s, client=sqs).send("orders", "in-flight", delay=delay).message_id
    around = (sent_at, time.time())
    proc, _ = start_worker_as_deployed(
        moto_url, prefix, events, Queues="orders", CycleSeconds=cycle
    )
    try:
        wait_for(lambda: logged(events, "worker.started"), timeout=20)
        wait_for(lambda: time.time() >= sent_at + 2 * cycle - 1.5, timeout=10)
        proc.send_signal(signal.SIGTERM)  # the poll in progress will get the message
        (got,) = Collector(sqs, dest_url).until(1, timeout=30)
        assert proc.wait(timeout=75) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    lateness = got.at - (sent_at + delay)
    # A cycle (5 s) late is the checks' below, from the worker's own figures: a busy machine
    # reaches 3 s. Timed, two cycles late shows (a stranded message never comes: 30 s above).
    assert 0 <= lateness < 2 * cycle, lateness
    hand_overs = handovers.read(events)  # INFO: its requeues are counted at the stop
    assert_handed_over_in_time(
        hand_overs, message_id, delay=delay, cycle=cycle, sent_between=around
    )
    [stopped] = logged(events, "worker.stopped")
    assert stopped["messages"].get("delay.requeued", 0) <= handovers.most_requeues(delay, cycle)


def lambda_function(prefix: str) -> dict[str, Any]:
    resources = cfn.Renderer(
        cfn.load("worker-lambda.yaml"), {**LAMBDA_PARAMS, "QueuePrefix": prefix}
    ).resources()
    return dict(resources["Function"]["Properties"])


def test_lambda_handler_as_the_image_and_template_configure_it(
    make_settings: Callable[..., Settings],
    sqs: Any,
    moto_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = make_settings(max_native_delay_seconds=1)
    urls = {r.spec.role: str(r.url) for r in Installer(s, client=sqs).run(["orders"])}
    for key in [k for k in os.environ if k.startswith("SQSDELAY_")]:
        monkeypatch.delenv(key)
    for key, value in lambda_function(prefix)["Environment"]["Variables"].items():
        monkeypatch.setenv(key, str(value))
    monkeypatch.setenv("AWS_REGION", cfn.REGION)  # the Lambda runtime sets it
    monkeypatch.setenv("SQSDELAY_ENDPOINT_URL", moto_url)  # the only change
    (cmd,) = json.loads(one(stages()["lambda"], "CMD"))
    module_name, _, function = cmd.rpartition(".")
    module = importlib.import_module(module_name)
    # a cold start: the handler state lives in the driver behind the public path
    monkeypatch.setattr("sqsdelay.aws.lambda_driver._handler", None)
    Sender(s, client=sqs).send("orders", "from-lambda", delay=2)
    arn = sqs.get_queue_attributes(QueueUrl=urls["delay"], AttributeNames=["QueueArn"])
    resp = {}
    wait_for(
        lambda: (
            resp.update(
                sqs.receive_message(
                    QueueUrl=urls["delay"],
                    WaitTimeSeconds=1,
                    MessageAttributeNames=["All"],
                    MessageSystemAttributeNames=["All"],
                )
            )
            or resp.get("Messages")
        ),
        timeout=15,
    )
    records = [lambda_record(m, arn["Attributes"]["QueueArn"]) for m in resp["Messages"]]
    assert getattr(module, function)({"Records": records}, None) == {"batchItemFailures": []}
    (got,) = Collector(sqs, urls["destination"]).until(1, timeout=10)
    assert got.body == "from-lambda"


def test_lambda_concurrency_and_visibility_leave_no_room_for_throttling() -> None:
    lam = cfn.load("worker-lambda.yaml")
    resources = cfn.Renderer(lam, {**LAMBDA_PARAMS, "QueuePrefix": ""}).resources()
    mapping = resources["EventSourceMapping"]["Properties"]
    function = resources["Function"]["Properties"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert (
        mapping["ScalingConfig"]["MaximumConcurrency"] <= function["ReservedConcurrentExecutions"]
    )
    queues = cfn.load("queues.yaml")["Parameters"]["DelayQueueVisibilityTimeoutSeconds"]
    longest = lam["Parameters"]["TimeoutSeconds"]["MaxValue"]
    factor = quotas.LAMBDA_VISIBILITY_FACTOR
    assert queues["Default"] >= factor * longest
    assert factor * longest <= defaults.DELAY_QUEUE_VISIBILITY_TIMEOUT_SECONDS  # the installer


@pytest.fixture
def cloudformation(moto_url: str) -> Any:
    return stacks.cloudformation(moto_url)


@pytest.mark.filterwarnings("ignore:Tried to parse AWS..CloudWatch..Alarm")
@pytest.mark.filterwarnings("ignore:Tried to parse AWS..SQS..QueuePolicy")
def test_queue_stacks_pass_the_installer_check_and_outlive_their_stacks(
    cloudformation: Any, env: dict[str, str], prefix: str, sqs: Any
) -> None:
    """queues.yaml and error-queue.yaml deploy into moto's CloudFormation; `sqsdelay install
    --check` then finds nothing to fix. moto 5.2.5's CloudFormation skips the alarms
    (AWS::CloudWatch::Alarm: "not supported by moto's CloudFormation implementation"), so
    only the queues are deployed for real; cfn-lint checks the alarms. It skips the queue
    policies (AWS::SQS::QueuePolicy) too: tests/integration/test_iam.py evaluates them."""
    stack = prefix.rstrip("-")
    deploy(
        cloudformation,
        f"{stack}-error",
        "error-queue.yaml",
        {"QueuePrefix": prefix, "AlarmTopicArn": TOPIC},
    )
    for name in ("orders", "billing"):
        deploy(
            cloudformation,
            f"{stack}-{name}",
            "queues.yaml",
            {"QueuePrefix": prefix, "DestinationName": name, "AlarmTopicArn": TOPIC},
        )
    check = subprocess.run(
        [sys.executable, "-m", "sqsdelay", "install", "orders", "billing", "--check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "problem" not in check.stdout and "warning" not in check.stdout
    delay = sqs.get_queue_url(QueueName=f"{prefix}orders-delay.fifo")["QueueUrl"]
    attrs = sqs.get_queue_attributes(QueueUrl=delay, AttributeNames=["All"])["Attributes"]
    assert attrs["VisibilityTimeout"] == "180" and "RedrivePolicy" not in attrs
    # the same cost allocation tags as `sqsdelay install` gives
    assert sqs.list_queue_tags(QueueUrl=delay)["Tags"] == queue_tags(
        QueueSpec("delay", f"{prefix}orders-delay.fifo", "orders"), Settings(queue_prefix=prefix)
    )
    for name in (f"{stack}-orders", f"{stack}-billing", f"{stack}-error"):
        cloudformation.delete_stack(StackName=name)
    left = sqs.list_queues(QueueNamePrefix=prefix).get("QueueUrls", [])
    assert len(left) == 5, left  # DeletionPolicy: Retain on every queue


TAGGED = {
    "AWS::SQS::Queue": None,  # the component depends on the queue
    "AWS::DynamoDB::Table": "registry",
    "AWS::Scheduler::ScheduleGroup": "schedule-group",
    "AWS::ECS::Cluster": "worker",
    "AWS::ECS::Service": "worker",
    "AWS::ECS::TaskDefinition": "worker",
    "AWS::Logs::LogGroup": "worker",
    "AWS::Lambda::Function": "worker",
}


def test_every_template_tags_what_it_creates_for_cost_allocation() -> None:
    seen = set()
    for path in sorted(cfn.INFRA.glob("*.yaml")):
        resources = cfn.load(path.name)["Resources"]
        # Fn::ForEach entries are [identifier, collection, {resources}]
        flat = [(k, r) for k, r in resources.items() if isinstance(r, dict)]
        flat += [i for r in resources.values() if isinstance(r, list) for i in r[2].items()]
        for key, res in flat:
            if res.get("Type") not in TAGGED:
                continue
            tags = {t["Key"]: t["Value"] for t in res["Properties"].get("Tags", [])}
            component = TAGGED[res["Type"]] or tags.get("sqsdelay:component", "")
            assert tags.get("sqsdelay:component") == component, (path.name, key)
            assert component.endswith("-queue") or res["Type"] != "AWS::SQS::Queue"
            seen.add(component)
    assert seen == {"delay-queue", "destination-queue", "error-queue"} | {
        v for v in TAGGED.values() if v
    }
    ecs = cfn.load("worker-ecs.yaml")["Resources"]["Service"]["Properties"]
    assert ecs["PropagateTags"] == "SERVICE"  # Fargate's cost is split by the tasks' tags


def test_every_queue_is_retained_and_every_name_in_an_arn_is_validated() -> None:
    for name in ("queues.yaml", "error-queue.yaml", "worker-ecs.yaml", "worker-lambda.yaml"):
        template = cfn.load(name)
        for key, res in template["Resources"].items():
            if isinstance(res, dict) and res.get("Type") == "AWS::SQS::Queue":
                assert res.get("DeletionPolicy") == "Retain", (name, key)
                assert res.get("UpdateReplacePolicy") == "Retain", (name, key)
        text = (cfn.INFRA / name).read_text()
        for param, spec in template["Parameters"].items():
            if f"${{{param}}}" in text and spec["Type"] in ("String", "CommaDelimitedList"):
                if param in ("ImageUri", "AlarmTopicArn", "KmsKeyId"):
                    continue  # not part of an ARN the templates build
                assert "AllowedPattern" in spec, (name, param)


@pytest.mark.parametrize("queues", ["a,b,c", "*"])
def test_ecs_scales_on_the_backlog_the_workers_publish(queues: str) -> None:
    """One metric whatever the number of queues: the names the worker writes, in the
    namespace the task gives it; visible shared by the tasks, due counted by each."""
    params = {**ECS_PARAMS, "QueuePrefix": "p-", "Queues": queues, "MetricsNamespace": "fleet"}
    resources = cfn.Renderer(cfn.load("worker-ecs.yaml"), params).resources()
    assert "DesiredCount" not in resources["Service"]["Properties"]
    [container] = resources["TaskDefinition"]["Properties"]["ContainerDefinitions"]
    env = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert env["SQSDELAY_METRICS_NAMESPACE"] == "fleet"
    spec = resources["ScalingPolicy"]["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    metrics = {m["Id"]: m for m in spec["CustomizedMetricSpecification"]["Metrics"]}
    stats = {
        i: (m["MetricStat"]["Metric"]["Namespace"], m["MetricStat"]["Metric"]["MetricName"],
            m["MetricStat"]["Stat"])
        for i, m in metrics.items()
        if "MetricStat" in m
    }  # fmt: skip
    assert stats["visible"] == ("fleet", BACKLOG_VISIBLE, "Maximum")
    assert stats["due"] == ("fleet", BACKLOG_DUE, "Average")
    assert metrics["tasks"]["MetricStat"]["Metric"]["MetricName"] == "RunningTaskCount"
    [returned] = [m for m in metrics.values() if m.get("ReturnData")]
    assert returned["Expression"] == "FILL(visible, 0) / FILL(tasks, 1) + FILL(due, 0)"


# SQS API -> the IAM action that authorizes it (batch calls use the single action's name).
IAM_ACTION = {
    "GetQueueUrl": "sqs:GetQueueUrl",
    "ReceiveMessage": "sqs:ReceiveMessage",
    "SendMessageBatch": "sqs:SendMessage",
    "DeleteMessageBatch": "sqs:DeleteMessage",
    "ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
    "GetQueueAttributes": "sqs:GetQueueAttributes",
    "ListQueueTags": "sqs:ListQueueTags",  # whether the destination is paused
}
# What Lambda's SQS event source mapping calls with the function's role (AWS Lambda
# documentation, "Execution role permissions" for SQS event sources).
LAMBDA_POLLER = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}


def calls_of_every_path(
    s: Settings,
    queues: list[str],
    api: str,
    at_least: int,
    held_on: tuple[str, ...] = (),
    events: tuple[str, ...] = (),
    deleted_on: tuple[str, ...] = (),
) -> set[tuple[str, str]]:
    """The calls a worker on `queues` made by the time it has requeued, handed over,
    dead-lettered, extended a visibility (on each of `held_on`, if given), deleted from each
    of `deleted_on`, logged `events` and called `api` `at_least` times (every_path)."""
    from tests.support.workerkit import RunningWorker

    with RunningWorker(s, queues) as running:
        stats = running.worker.stats
        wait_for(
            lambda: (
                all(
                    stats.events[e] >= 1
                    for e in ("delay.requeued", "delay.handed_over", "delay.dead_lettered", *events)
                )
                and stats.requests["ChangeMessageVisibilityBatch"] >= 1
                and all(stats.calls["ChangeMessageVisibilityBatch", q] for q in held_on)
                and all(stats.calls["DeleteMessageBatch", q] for q in deleted_on)
                and stats.requests[api] >= at_least
            ),
            timeout=30,
        )
        return set(stats.calls)


def granted(statements: list[dict[str, Any]]) -> set[tuple[str, str]]:
    out = set()
    for st in statements:
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        out |= {(a, r) for a in actions for r in resources if a.startswith(("sqs:", "kms:"))}
    return out


def role_statements(resources: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """The role's statements, its policy variables (the ECS role's tags) resolved."""
    return iam.role_statements(resources, role)


def used(calls: Any) -> set[tuple[str, str]]:
    return {(IAM_ACTION[api], cfn.sqs_arn(queue)) for api, queue in calls}


def send_poison(sqs: Any, delay_queue_url: str) -> None:
    """A message whose delay is not a number: dead-lettered."""
    sqs.send_message(
        QueueUrl=delay_queue_url,
        MessageBody="poison",
        MessageGroupId="p",
        MessageDeduplicationId="p",
        MessageAttributes={wire_format.DELAY_ATTRIBUTE: {"DataType": "String", "StringValue": "x"}},
    )


def every_path(s: Settings, sqs: Any) -> dict[str, str]:
    """Queues plus one message for each path: requeue, hand-over, poison and a held send."""
    urls = {r.spec.role: str(r.url) for r in Installer(s, client=sqs).run(["orders"])}
    sqs.set_queue_attributes(
        QueueUrl=urls["destination"], Attributes={"MaximumMessageSize": "1024"}
    )
    sender = Sender(s, client=sqs)
    sender.send_batch("orders", [Message("later", delay=3600), Message("soon", delay=2)])
    sender.send("orders", "x" * 2000, delay=2)  # refused by the destination: held
    send_poison(sqs, urls["delay"])
    return urls


def every_fifo_path(s: Settings, sqs: Any) -> dict[str, str]:
    """A FIFO destination's queues plus one message for each path: a requeue, a hand-over
    into the staging queue and its forward, a poison, a hand-over the staging queue refuses
    and a forward the destination refuses (both held)."""
    urls = {r.spec.role: str(r.url) for r in Installer(s, client=sqs).run(["orders.fifo"])}
    small = {"staging": "1536", "destination": "1024"}
    for role, size in small.items():
        sqs.set_queue_attributes(QueueUrl=urls[role], Attributes={"MaximumMessageSize": size})
    sender = Sender(s, client=sqs)
    later, soon = Message("later", delay=3600, group_id="g"), Message("soon", delay=2, group_id="g")
    sender.send_batch("orders.fifo", [later, soon])
    sender.send("orders.fifo", "x" * 2000, delay=2, group_id="g")  # held: staging refuses it
    group = {wire_format.GROUP_ID_ATTRIBUTE: {"DataType": "String", "StringValue": "g"}}
    sqs.send_message(QueueUrl=urls["staging"], MessageBody="y" * 1200, MessageAttributes=group)
    send_poison(sqs, urls["delay"])
    return urls


def test_ecs_task_role_grants_exactly_what_the_worker_calls(
    make_settings: Callable[..., Settings], sqs: Any, prefix: str
) -> None:
    """moto can enforce IAM (INITIAL_NO_AUTH_ACTION_COUNT), but it authorizes GetQueueUrl
    against "*" (moto/sqs/responses.py reads the queue from QueueUrl, which GetQueueUrl does
    not have), so a resource-scoped policy cannot be run as-is there. Instead the calls the
    worker really made (counted by botocore's event hooks) are compared with the grants."""

    # idle_counts_lag_seconds 0: the empty queue's checks (GetQueueAttributes) are made too
    s = make_settings(
        max_native_delay_seconds=1,
        wait_time_seconds=1,
        visibility_timeout_seconds=2,
        idle_counts_lag_seconds=0,
    )
    every_path(s, sqs)
    calls = calls_of_every_path(s, ["orders"], "GetQueueAttributes", 1)
    resources = cfn.Renderer(
        cfn.load("worker-ecs.yaml"), {**ECS_PARAMS, "QueuePrefix": prefix, "Queues": "orders"}
    ).resources()
    statements = role_statements(resources, "TaskRole")
    made = used(calls)
    # every call allowed, and every grant used: a named queue's ARN is a pattern (its head a
    # wildcard, the account and Region in the statement's conditions: tests/integration/test_iam.py)
    assert iam.denied(statements, [iam.sqs_call(a, arn) for a, arn in made]) == []
    unused = {
        (action, pattern)
        for action, pattern in granted(statements)
        if not any(
            a == action and iam.arn_matches(pattern, arn, resource_element=True) for a, arn in made
        )
    }
    assert unused == set()


def test_ecs_task_role_for_every_queue_under_the_prefix_allows_what_discovery_calls(
    make_settings: Callable[..., Settings], sqs: Any, prefix: str
) -> None:
    """Queues "*": the role is scoped to the prefix (its delay queues, its destinations) and
    may list queues. Every call a discovering worker made is allowed by a grant, every grant
    is used, and nothing outside the prefix is allowed."""
    from fnmatch import fnmatchcase

    s = make_settings(
        max_native_delay_seconds=1,
        wait_time_seconds=1,
        visibility_timeout_seconds=2,
        idle_counts_lag_seconds=0,
        discovery_interval_seconds=1,
    )
    every_path(s, sqs)
    fifo = {name.rsplit("/", 1)[1] for name in every_fifo_path(s, sqs).values()}
    held_on = tuple(sorted(q for q in fifo if q.endswith(("-delay-fifo.fifo", "-fifo-staging"))))
    Installer(s, client=sqs).run(["billing"])  # an empty one: checked, not long-polled
    # A staging message's delete follows its forward (`delay.forwarded`): wait for both.
    staging = tuple(q for q in held_on if q.endswith("-fifo-staging"))
    calls = calls_of_every_path(
        s,
        ["*"],
        "ListQueues",
        2,
        held_on=held_on,
        events=("delay.forwarded",),
        deleted_on=staging,
    )
    listed = {(api, q) for api, q in calls if api == "ListQueues"}
    made = used(calls - listed) | {("sqs:ListQueues", "*")}
    params = {**ECS_PARAMS, "QueuePrefix": prefix, "Queues": "*"}
    resources = cfn.Renderer(cfn.load("worker-ecs.yaml"), params).resources()
    assert not any(name.startswith("QueuePolicy") for name in resources)
    grants = granted(role_statements(resources, "TaskRole"))

    def allowed(action: str, arn: str) -> bool:
        return any(a == action and fnmatchcase(arn, r) for a, r in grants)

    assert {c for c in made if not allowed(*c)} == set()
    assert {
        g for g in grants if not any(fnmatchcase(arn, g[1]) for a, arn in made if a == g[0])
    } == set()
    # nothing of another prefix, beyond the dead-letter and listing grants
    other = cfn.sqs_arn("other-orders-delay.fifo")
    assert not allowed("sqs:ReceiveMessage", other) and not allowed("sqs:SendMessage", other)


def test_lambda_role_grants_exactly_what_the_handler_and_its_poller_call(
    make_settings: Callable[..., Settings], sqs: Any, moto_url: str, prefix: str
) -> None:
    from sqsdelay.aws.lambda_driver import Handler

    s = make_settings(max_native_delay_seconds=1)
    urls = every_path(s, sqs)
    own = boto3.client("sqs", endpoint_url=moto_url, region_name=cfn.REGION)
    handler = Handler(s, client=own)
    seen: set[str] = set()

    def poll_once() -> bool:
        seen.update(r["body"][:6] for r in invoke_as_lambda(sqs, urls["delay"], handler))
        return {"later", "soon", "poison", "xxxxxx"} <= seen and bool(
            handler.stats.requests["ChangeMessageVisibilityBatch"]
        )

    wait_for(poll_once, timeout=30)
    resources = cfn.Renderer(
        cfn.load("worker-lambda.yaml"), {**LAMBDA_PARAMS, "QueuePrefix": prefix}
    ).resources()
    grants = granted(role_statements(resources, "Role"))
    poller = {(a, cfn.sqs_arn(f"{prefix}orders-delay.fifo")) for a in LAMBDA_POLLER}
    assert used(handler.stats.calls) | poller == grants


@pytest.mark.parametrize(
    ("template", "params", "role"),
    [("worker-ecs.yaml", ECS_PARAMS, "TaskRole"), ("worker-lambda.yaml", LAMBDA_PARAMS, "Role")],
)
def test_kms_grants_only_with_a_key_and_only_through_sqs(
    template: str, params: dict[str, Any], role: str
) -> None:
    key = f"arn:aws:kms:{cfn.REGION}:{cfn.ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    for arn, expected in (("", set()), (key, {("kms:GenerateDataKey", key), ("kms:Decrypt", key)})):
        resources = cfn.Renderer(cfn.load(template), {**params, "KmsKeyArn": arn}).resources()
        statements = role_statements(resources, role)
        kms = [st for st in statements if str(st["Action"]).count("kms:")]
        assert {g for g in granted(kms)} == expected
        for st in kms:
            assert (
                st["Condition"]["StringEquals"]["kms:ViaService"]
                == f"sqs.{cfn.REGION}.amazonaws.com"
            )


def test_the_deployment_pages_name_every_template_parameter() -> None:
    section = docs.text("deploy.md", "deploy-ecs.md", "deploy-lambda.md")
    for path in sorted(cfn.INFRA.glob("*.yaml")):
        template = cfn.load(path.name)
        assert f"`{path.name}`" in section, path.name
        missing = [p for p in template["Parameters"] if f"`{p}`" not in section]
        assert not missing, f"docs/deploy*.md do not describe {path.name}'s {missing}"


PARKING = {"Parking": "scheduler", "ScheduleGroupName": "sqsdelay"}
# error-queue.yaml names the role after the prefix and the Region; the worker stacks derive
# its ARN.
SCHEDULER_ROLE = f"arn:{cfn.PARTITION}:iam::{cfn.ACCOUNT}:role/sqsdelay-scheduler-{cfn.REGION}"


@pytest.mark.parametrize(
    ("template", "params", "role"),
    [("worker-ecs.yaml", ECS_PARAMS, "TaskRole"), ("worker-lambda.yaml", LAMBDA_PARAMS, "Role")],
)
def test_parking_grants_exactly_the_scheduler_calls_the_worker_makes(
    template: str,
    params: dict[str, Any],
    role: str,
    make_settings: Callable[..., Settings],
    sqs: Any,
    moto_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker parks a message and meets its own schedule after a "crash" (Create, then
    Conflict and Get): those calls, and passing the Scheduler role, are all it is granted."""
    from tests.support.workerkit import RunningWorker

    s = make_settings(
        max_native_delay_seconds=1,
        wait_time_seconds=1,
        visibility_timeout_seconds=2,
        parking="scheduler",
        scheduler_role_arn=SCHEDULER_ROLE,
        park_after_seconds=5,
    )
    scheduler = boto3.client("scheduler", endpoint_url=moto_url, region_name=cfn.REGION)
    installer = Installer(s, client=sqs, scheduler=scheduler)
    installer.run(["orders"])
    installer.schedule_group(["orders"])
    Sender(make_settings(max_native_delay_seconds=1), client=sqs).send("orders", "p", delay=60)
    crash_before_delete(monkeypatch)
    crashed = RunningWorker(s, ["orders"])
    with crashed:
        wait_for(lambda: crashed.worker.stats.events["delay.parked"] >= 2, timeout=30)
        calls = {api for api, _ in crashed.worker.stats.calls}
    scheduler_calls = {f"scheduler:{api}" for api in calls if "Schedule" in api}
    assert scheduler_calls == {"scheduler:CreateSchedule", "scheduler:GetSchedule"}

    for parking_on in (False, True):
        given = {**params, **(PARKING if parking_on else {})}
        resources = cfn.Renderer(cfn.load(template), given).resources()
        statements = role_statements(resources, role)
        grants = {
            (a, r if isinstance(r, str) else json.dumps(r))
            for st in statements
            for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
            if a.startswith(("scheduler:", "iam:"))
            for r in (st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]])
        }
        if not parking_on:
            assert grants == set()
            continue
        group = f"arn:{cfn.PARTITION}:scheduler:{cfn.REGION}:{cfn.ACCOUNT}:schedule/sqsdelay/*"
        assert grants == {(c, group) for c in scheduler_calls} | {("iam:PassRole", SCHEDULER_ROLE)}
        (passing,) = [st for st in statements if st["Action"] == "iam:PassRole"]
        assert passing["Condition"]["StringEquals"]["iam:PassedToService"] == (
            "scheduler.amazonaws.com"
        )
        env = (
            {e["Name"]: e["Value"] for e in ecs_container(given)["Environment"]}
            if role == "TaskRole"
            else resources["Function"]["Properties"]["Environment"]["Variables"]
        )
        assert (
            Settings(**{k.removeprefix("SQSDELAY_").lower(): v for k, v in env.items()}).parking
            == "scheduler"
        )


def test_the_scheduler_role_may_only_send_to_delay_queues_and_the_error_queue() -> None:
    import fnmatch

    template = cfn.load("error-queue.yaml")
    base = {"QueuePrefix": "p-", "AlarmTopicArn": TOPIC}
    off = cfn.Renderer(template, base).resources()
    assert "SchedulerRole" not in off and "ScheduleGroup" not in off
    on = cfn.Renderer(template, {**base, "Parking": "scheduler"}).resources()
    assert on["ScheduleGroup"]["Properties"]["Name"] == "sqsdelay"
    role = on["SchedulerRole"]["Properties"]
    assert role["RoleName"] == f"p-sqsdelay-scheduler-{cfn.REGION}"  # what the worker stacks pass
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    statements = [st for p in role["Policies"] for st in p["PolicyDocument"]["Statement"]]
    assert {st["Action"] for st in statements} == {"sqs:SendMessage"}
    patterns = [str(r) for st in statements for r in iam.as_list(st["Resource"])]

    def allowed(queue: str) -> bool:
        arn = cfn.sqs_arn(queue)
        return any(arn == p or fnmatch.fnmatchcase(arn, p) for p in patterns)

    assert allowed("p-orders-delay.fifo") and allowed("p-billing-delay.fifo")
    assert allowed("p-orders-delay-fifo.fifo")  # a FIFO destination's delay queue
    assert not allowed("p-orders") and not allowed("q-orders-delay.fifo")
    error = [p for p in patterns if not p.endswith(("-delay.fifo", "-delay-fifo.fifo"))]
    assert error == ["<ErrorQueue.Arn>"]  # Scheduler's dead-letter queue, by reference
