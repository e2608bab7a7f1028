#!/usr/bin/env python3
"""Smoke test of the templates in a real AWS account: deploy, send, check, tear down.

    cd scripts && ../.venv/bin/python aws_smoke.py --prefix smoke1- \\
        --worker-image ACCOUNT.dkr.ecr.REGION.amazonaws.com/sqsdelay-worker@sha256:... \\
        --lambda-image ACCOUNT.dkr.ecr.REGION.amazonaws.com/sqsdelay-lambda@sha256:... \\
        [--region R] [--subnets a,b --security-groups sg] [--kms-key-arn ARN]
        [--alarm-topic-arn ARN] [--cycles 30,120] [--tolerance 5]
    ../.venv/bin/python aws_smoke.py --dry-run [--cycles 4,14]

It deploys infra/error-queue.yaml (Parking=scheduler), queues.yaml for two destinations
(`lam` and `ecs`), worker-lambda.yaml for `lam` and worker-ecs.yaml for `ecs`, all under
`--prefix`, with a 1 s cycle (CycleSeconds=1: SQSDELAY_MAX_NATIVE_DELAY_SECONDS=1) and every
queue encrypted with a KMS key (`--kms-key-arn`, or a new key scheduled for deletion at the
end). It sends to each destination one message per `--cycles` delay (30 and 120 cycles)
into its delay queue, so that the worker (the Lambda function, the ECS service) parks it in
EventBridge Scheduler (beyond 11 s at a 1 s cycle) and hands it over when it is back; then it
long-polls the destinations and checks that each message arrives exactly once, never before
its due time and at most `--tolerance` seconds after it. Everything is torn down at the end,
whatever happened: the stacks, the queues they retain (DeletionPolicy Retain), the topic and
key it created. Without `--subnets`, the ECS service runs in the default VPC's subnets with
its default security group and a public IP (to reach SQS and ECR without a NAT). At a 1 s
cycle a parked message is back one second before its due time, so Scheduler's own delay in
firing shows as lateness: that is one of the things this run measures.

Costs a few cents (Fargate minutes, requests) plus a KMS key's month if it creates one.
Needs CAPABILITY_NAMED_IAM (the Scheduler role has a name) and images built from the
Dockerfile's `worker` and `lambda` targets, pushed to ECR, named by digest.

`--dry-run` does the same against the embedded emulator (sqsdelay.dev.emulator) and prints the
calls it made. What that exercises: the four templates deploy into moto's CloudFormation with
these parameters (moto skips the alarms, the queue policies, the autoscaling resources and the
schedule group, which the dry run then creates itself; it enforces no IAM, KMS or key policy);
the deployed function keeps RecursiveLoop Allow (read back with GetFunctionRecursionConfig);
the sends, the workers' parking through the emulator's Scheduler, the hand-overs and the
checks. What it does not: moto runs neither the ECS task nor the Lambda function (it would
need Docker), so the event source mapping is deleted (moto would invoke the function from
within SendMessage) and `sqsdelay worker` stands in for each, as a subprocess with the
environment read from the deployed task definition and function configuration. The images,
IAM, KMS, the Lambda poller and Scheduler's real timing are only tested by a real run.

Prints one JSON object: each message's worker, delay, lateness and copies, whether all passed,
and the calls made (consecutive repeats counted). Exit 0 when every message arrived once and
on time, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

INFRA = Path(__file__).resolve().parents[1] / "infra"
CYCLE = 1  # seconds: SQSDELAY_MAX_NATIVE_DELAY_SECONDS of every stack
DESTINATIONS = {"lam": "lambda", "ecs": "ecs"}  # destination name -> the worker that moves it
DRY_RUN_DIGEST = "@sha256:" + "0" * 64  # the emulator pulls no image


@dataclass
class Calls:
    """Every AWS call the script makes, in order; consecutive repeats counted once."""

    made: list[dict[str, Any]] = field(default_factory=list)

    def watch(self, client: Any) -> Any:
        client.meta.events.register("provide-client-params.*.*", self._record)
        return client

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        call = {"service": model.service_model.service_name, "operation": model.name}
        for key in ("StackName", "QueueUrl", "FunctionName", "UUID", "Name", "KeyId"):
            if isinstance(params.get(key), str):
                call[key] = params[key]
                break
        last = self.made[-1] if self.made else None
        if last is not None and {k: v for k, v in last.items() if k != "count"} == call:
            last["count"] = last.get("count", 1) + 1
        else:
            self.made.append(call)


@dataclass
class Sent:
    worker: str
    destination: str
    cycles: int
    body: str
    earliest: float  # local clock before the send + the delay: it may not arrive before
    latest: float  # local clock after the send + the delay
    arrivals: list[float] = field(default_factory=list)

    def report(self, tolerance: float) -> dict[str, Any]:
        first = min(self.arrivals) if self.arrivals else None
        ok = (
            len(self.arrivals) == 1
            and first is not None
            and self.earliest <= first <= self.latest + tolerance
        )
        return {
            "worker": self.worker,
            "destination": self.destination,
            "delay_seconds": self.cycles * CYCLE,
            "copies": len(self.arrivals),
            "late_seconds": None if first is None else round(first - self.latest, 3),
            "ok": ok,
        }


class Smoke:
    def __init__(self, args: argparse.Namespace, kwargs: dict[str, Any], calls: Calls) -> None:
        self.args = args
        self.prefix: str = args.prefix
        self.kwargs = kwargs
        self.calls = calls
        self.cf = self.client("cloudformation")
        self.sqs = self.client("sqs")
        self.created_key: str | None = None
        self.created_topic: str | None = None
        self.stacks: list[str] = []
        self.emulator_group: str | None = None

    def client(self, service: str) -> Any:
        client = boto3.client(service, **self.kwargs)  # type: ignore[call-overload]
        return self.calls.watch(client)

    # -- what the stacks need ---------------------------------------------------------------

    def kms_key(self) -> str:
        if self.args.kms_key_arn:
            return str(self.args.kms_key_arn)
        key = self.client("kms").create_key(Description=f"sqsdelay smoke {self.prefix}")
        self.created_key = str(key["KeyMetadata"]["KeyId"])
        return str(key["KeyMetadata"]["Arn"])

    def alarm_topic(self) -> str:
        if self.args.alarm_topic_arn:
            return str(self.args.alarm_topic_arn)
        topic = self.client("sns").create_topic(Name=f"{self.prefix}sqsdelay-smoke-alarms")
        self.created_topic = str(topic["TopicArn"])
        return self.created_topic

    def network(self) -> tuple[str, str, str]:
        """Subnets, security groups, AssignPublicIp."""
        if self.args.subnets:
            return self.args.subnets, self.args.security_groups, self.args.assign_public_ip
        if self.args.dry_run:
            return "subnet-1", "sg-1", "DISABLED"  # moto starts no task
        ec2 = self.client("ec2")
        vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
        if not vpc:
            raise SystemExit("no default VPC: give --subnets and --security-groups")
        only = [{"Name": "vpc-id", "Values": [vpc[0]["VpcId"]]}]
        subnets = [s["SubnetId"] for s in ec2.describe_subnets(Filters=only)["Subnets"]]
        groups = ec2.describe_security_groups(
            Filters=[*only, {"Name": "group-name", "Values": ["default"]}]
        )["SecurityGroups"]
        return ",".join(subnets), groups[0]["GroupId"], "ENABLED"

    # -- deploy and tear down ---------------------------------------------------------------

    def deploy(self) -> dict[str, str]:
        key, topic = self.kms_key(), self.alarm_topic()
        subnets, groups, public_ip = self.network()
        group = f"{self.prefix}smoke"
        common = {"QueuePrefix": self.prefix, "AlarmTopicArn": topic}
        parking = {"Parking": "scheduler", "ScheduleGroupName": group, "KmsKeyArn": key}
        cycle = {"CycleSeconds": str(CYCLE)}
        self.stack("error", "error-queue.yaml", {**common, "KmsKeyId": key,
                   "Parking": "scheduler", "ScheduleGroupName": group})  # fmt: skip
        if self.args.dry_run:  # moto's CloudFormation skips AWS::Scheduler::ScheduleGroup
            self.client("scheduler").create_schedule_group(Name=group)
            self.emulator_group = group
        for name in DESTINATIONS:
            self.stack(f"queues-{name}", "queues.yaml",
                       {**common, **cycle, "DestinationName": name, "KmsKeyId": key})  # fmt: skip
        self.stack("worker-lambda", "worker-lambda.yaml", {**common, **cycle, **parking,
                   "DestinationName": "lam", "ImageUri": self.image("lambda")})  # fmt: skip
        self.stack("worker-ecs", "worker-ecs.yaml", {**common, **cycle, **parking,
                   "Queues": "ecs", "ImageUri": self.image("worker"), "Subnets": subnets,
                   "SecurityGroups": groups, "AssignPublicIp": public_ip})  # fmt: skip
        return {"kms_key": key, "alarm_topic": topic, "schedule_group": group}

    def image(self, target: str) -> str:
        if self.args.dry_run:
            return f"123456789012.dkr.ecr.us-east-1.amazonaws.com/sqsdelay-{target}{DRY_RUN_DIGEST}"
        return str(getattr(self.args, f"{target}_image"))

    def stack(self, suffix: str, template: str, params: dict[str, str]) -> None:
        name = f"{self.prefix}sqsdelay-smoke-{suffix}"
        self.cf.create_stack(
            StackName=name,
            TemplateBody=(INFRA / template).read_text(),
            Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()],
            Capabilities=["CAPABILITY_NAMED_IAM"],
            OnFailure="DELETE",
        )
        self.stacks.append(name)
        self.cf.get_waiter("stack_create_complete").wait(
            StackName=name, WaiterConfig={"Delay": 1 if self.args.dry_run else 15}
        )

    def tear_down(self) -> list[str]:
        """Everything, in reverse; what could not be deleted is returned, not raised."""
        failed: list[str] = []
        for name in reversed(self.stacks):
            try:
                self.cf.delete_stack(StackName=name)
                self.cf.get_waiter("stack_delete_complete").wait(
                    StackName=name, WaiterConfig={"Delay": 1 if self.args.dry_run else 15}
                )
            except Exception as exc:  # keep going: the rest must still go
                failed.append(f"stack {name}: {exc}")
        retained = [f"{self.prefix}error"]
        for name in DESTINATIONS:
            retained += [f"{self.prefix}{name}", f"{self.prefix}{name}-delay.fifo"]
        for queue in retained:
            try:
                url = self.sqs.get_queue_url(QueueName=queue)["QueueUrl"]
                self.sqs.delete_queue(QueueUrl=url)
            except self.sqs.exceptions.QueueDoesNotExist:
                pass
            except Exception as exc:
                failed.append(f"queue {queue}: {exc}")
        try:
            if self.emulator_group:
                self.client("scheduler").delete_schedule_group(Name=self.emulator_group)
            if self.created_topic:
                self.client("sns").delete_topic(TopicArn=self.created_topic)
            if self.created_key:  # 7 days is KMS's shortest waiting period
                self.client("kms").schedule_key_deletion(
                    KeyId=self.created_key, PendingWindowInDays=7
                )
        except Exception as exc:
            failed.append(f"topic or key: {exc}")
        return failed

    # -- what runs the workers ----------------------------------------------------------------

    def recursive_loop(self) -> str:
        function = f"{self.prefix}lam-sqsdelay"
        reply = self.client("lambda").get_function_recursion_config(FunctionName=function)
        return str(reply.get("RecursiveLoop", "Terminate"))

    def wait_for_ecs_task(self, timeout: float = 300) -> None:
        ecs = self.client("ecs")
        cluster = self.output("worker-ecs", "ClusterName")
        service = self.output("worker-ecs", "ServiceName")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = ecs.describe_services(cluster=cluster, services=[service])["services"]
            if found and found[0].get("runningCount", 0) >= 1:
                return
            time.sleep(10)
        raise SystemExit(f"the ECS service {service} runs no task after {timeout:.0f} s")

    def output(self, suffix: str, key: str) -> str:
        stack = self.cf.describe_stacks(StackName=f"{self.prefix}sqsdelay-smoke-{suffix}")
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Stacks"][0]["Outputs"]}
        return str(outputs[key])

    @contextlib.contextmanager
    def stand_ins(self, url: str) -> Iterator[Path]:
        """Dry run: `sqsdelay worker` for each worker moto cannot run, with the environment
        the deployed task definition and function configuration give."""
        lam = self.client("lambda")
        function = f"{self.prefix}lam-sqsdelay"
        for mapping in lam.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]:
            lam.delete_event_source_mapping(UUID=mapping["UUID"])
        config = lam.get_function_configuration(FunctionName=function)
        # moto keeps the template's numbers as numbers; Lambda's variables are strings
        lambda_env = {k: str(v) for k, v in config["Environment"]["Variables"].items()}
        ecs = self.client("ecs")
        family = f"{self.prefix}sqsdelay-worker"
        (container,) = ecs.describe_task_definition(taskDefinition=family)["taskDefinition"][
            "containerDefinitions"
        ]
        ecs_env = {e["name"]: str(e["value"]) for e in container["environment"]}
        base = {k: v for k, v in os.environ.items() if not k.startswith("SQSDELAY_")}
        base.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                    AWS_DEFAULT_REGION="us-east-1", SQSDELAY_ENDPOINT_URL=url)  # fmt: skip
        logs = Path(tempfile.mkdtemp(prefix="sqsdelay-smoke-"))
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "sqsdelay", "worker", *queues],
                env={**base, **env, "SQSDELAY_LOG_FILE": str(logs / f"{name}.jsonl")},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for name, env, queues in (("lambda", lambda_env, ["lam"]), ("ecs", ecs_env, []))
        ]
        try:
            # Messages are sent once both poll, as a deployed stack's worker already does.
            deadline = time.monotonic() + 60
            while len(self.events(logs, "worker.started")) < len(procs):
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    raise SystemExit(f"the stand-in workers did not start; logs in {logs}")
                time.sleep(0.1)
            yield logs
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=90)

    @staticmethod
    def events(logs: Path, event: str) -> list[dict[str, Any]]:
        found = []
        for path in logs.glob("*.jsonl"):
            for line in path.read_text().splitlines():
                record = json.loads(line) if line.startswith("{") else {}
                if record.get("event") == event:
                    found.append(record)
        return found

    # -- the messages -------------------------------------------------------------------------

    def send(self, cycles: list[int]) -> list[Sent]:
        """With the library's Sender as a user would, parking off at send, so that each
        message goes to the delay queue and its worker parks it: the workers' Scheduler
        grants and the Scheduler role are what is tested."""
        from sqsdelay.sender import Sender
        from sqsdelay.settings import Settings

        settings = Settings(
            queue_prefix=self.prefix,
            max_native_delay_seconds=CYCLE,
            region=self.sqs.meta.region_name,
            endpoint_url=self.kwargs.get("endpoint_url"),
        )
        sender = Sender(settings, client=self.sqs)
        sent: list[Sent] = []
        for destination, worker in DESTINATIONS.items():
            for n in cycles:
                body = json.dumps({"smoke": self.prefix, "worker": worker, "cycles": n,
                                   "id": uuid.uuid4().hex})  # fmt: skip
                before = time.time()
                result = sender.send(destination, body, delay=n * CYCLE)
                after = time.time()
                assert result.route == "delay-queue", result  # the worker must move it
                sent.append(Sent(worker, destination, n, body, before + n * CYCLE,
                                 after + n * CYCLE))  # fmt: skip
        return sent

    def receive(self, sent: list[Sent]) -> None:
        by_body = {s.body: s for s in sent}
        urls = [
            self.sqs.get_queue_url(QueueName=f"{self.prefix}{d}")["QueueUrl"] for d in DESTINATIONS
        ]
        until = max(s.latest for s in sent) + self.args.tolerance + self.args.grace
        while time.time() < until:
            for url in urls:  # short long polls, so that each queue is seen every second
                got = self.sqs.receive_message(
                    QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1
                ).get("Messages", [])
                now = time.time()
                for m in got:
                    if m["Body"] in by_body:
                        by_body[m["Body"]].arrivals.append(now)
                    self.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", help="queue and stack prefix, e.g. smoke1- (required)")
    parser.add_argument("--region")
    parser.add_argument("--worker-image", help="the worker image, ECR URI @sha256:DIGEST")
    parser.add_argument("--lambda-image", help="the lambda image, ECR URI @sha256:DIGEST")
    parser.add_argument("--subnets", help="comma-separated; default: the default VPC's")
    parser.add_argument("--security-groups", help="comma-separated, with --subnets")
    parser.add_argument("--assign-public-ip", default="DISABLED", choices=["ENABLED", "DISABLED"])
    parser.add_argument("--kms-key-arn", help="default: a new key, scheduled for deletion")
    parser.add_argument("--alarm-topic-arn", help="default: a new SNS topic, deleted at the end")
    parser.add_argument("--cycles", default="30,120", help="delays in cycles of 1 s")
    parser.add_argument("--tolerance", type=float, default=5.0, help="seconds late allowed")
    parser.add_argument(
        "--grace", type=float, default=10.0, help="seconds more of polling, to see copies"
    )
    parser.add_argument("--dry-run", action="store_true", help="against the embedded emulator")
    args = parser.parse_args(argv)
    if args.dry_run and not args.prefix:
        args.prefix = f"dry{uuid.uuid4().hex[:6]}-"
    if not args.prefix or not re.fullmatch(r"[A-Za-z0-9_-]{1,30}", args.prefix):
        parser.error("--prefix: 1 to 30 of A-Z a-z 0-9 _ - (parking needs a prefix)")
    digest = re.compile(r".+@sha256:[0-9a-f]{64}")
    images = (args.worker_image, args.lambda_image)
    if not args.dry_run and not all(i and digest.fullmatch(i) for i in images):
        parser.error("--worker-image and --lambda-image: ECR image URIs ending in @sha256:DIGEST")
    if bool(args.subnets) != bool(args.security_groups):
        parser.error("--subnets and --security-groups go together")
    cycles = [int(c) for c in args.cycles.split(",")]
    if args.dry_run:
        from sqsdelay.dev.emulator import Emulator

        with Emulator() as emulator:
            kwargs = {
                "endpoint_url": emulator.url,
                "region_name": "us-east-1",
                "aws_access_key_id": "testing",
                "aws_secret_access_key": "testing",
            }
            code = run(args, kwargs, cycles, emulator)
        return code
    return run(args, {"region_name": args.region} if args.region else {}, cycles, None)


def run(args: argparse.Namespace, kwargs: dict[str, Any], cycles: list[int], emulator: Any) -> int:
    """`emulator`: the running Emulator of a dry run, else None."""
    calls = Calls()
    smoke = Smoke(args, kwargs, calls)
    result: dict[str, Any] = {
        "dry_run": args.dry_run,
        "prefix": args.prefix,
        "cycle_seconds": CYCLE,
    }
    messages: list[dict[str, Any]] = []
    try:
        result["deployed"] = smoke.deploy()
        result["recursive_loop"] = smoke.recursive_loop()
        running = smoke.stand_ins(emulator.url) if emulator else contextlib.nullcontext()
        with running as logs:
            if emulator is None:
                smoke.wait_for_ecs_task()
            sent = smoke.send(cycles)
            smoke.receive(sent)
        messages = [s.report(args.tolerance) for s in sent]
        if logs is not None:  # what the stand-ins did; a real run's workers log to CloudWatch
            result["parked_by_workers"] = len(smoke.events(logs, "delay.parked"))
    finally:
        result["not_torn_down"] = smoke.tear_down()
        result["messages"] = messages
        result["ok"] = (
            bool(messages)
            and all(m["ok"] for m in messages)
            and result.get("recursive_loop") == "Allow"
            and not result["not_torn_down"]
        )
        if emulator is not None:  # how many parked messages the emulator's Scheduler sent back
            result["schedules_fired"] = emulator.runner.fired if emulator.runner else 0
            result["stand_ins"] = [
                "sqsdelay worker lam (the function's environment)",
                "sqsdelay worker (the task definition's environment)",
            ]
        result["calls"] = calls.made
        print(json.dumps(result, indent=1))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
