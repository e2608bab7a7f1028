"""sqsdelay.cdk: the sample app (docs/examples/cdk_app.py) synthesized from Python passes
cfn-lint and the IAM grammar check; what it builds is what infra/ builds for the same
parameters; a producer granted with grant_send_delayed may make every call a send makes and
nothing more; and the app deploys into the emulator and moves a message."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam_
from aws_cdk import aws_sns as sns

from sqsdelay import cdk
from tests.conftest import wait_for
from tests.support import cfn, iam, iam_grammar, stacks

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "examples"))
import cdk_app  # noqa: E402 (docs/examples is no package)

CFN_LINT = ROOT / ".venv-infra" / "bin" / "cfn-lint"
PREFIX = "shop-"


class Synth:
    """Both apps of the tests, synthesized once: the sample (Lambda workers, KMS, registry)
    and an ECS variant (parking, the registry, no KMS)."""

    def __init__(self) -> None:
        app = App(context={"cycle_seconds": "1"})
        self.shop = cdk_app.build(app)
        self.ecs = Stack(app, "Fleet")
        topic = sns.Topic(self.ecs, "Alarms")
        registry = cdk.SqsDelayRegistry(self.ecs, "Registry")
        self.ecs_queues = cdk.SqsDelayQueues(
            self.ecs, "Queues", destinations=["orders", "billing"], prefix="fleet-",
            parking=True, registry=registry, alarm_topic=topic,
        )  # fmt: skip
        self.ecs_worker = cdk.SqsDelayWorker(
            self.ecs, "Worker", queues=self.ecs_queues, runtime="ecs",
            image_uri=cdk_app.EXAMPLE_IMAGE,
            template_parameters={
                "Subnets": ["subnet-0123456789abcdef0"],
                "SecurityGroups": ["sg-0123456789abcdef0"],
            },
        )  # fmt: skip
        # a producer of a fleet that parks: the schedules, and passing the Scheduler role
        self.ecs_queues.grant_send_delayed(
            iam_.Role(self.ecs, "Producer", assumed_by=iam_.AccountRootPrincipal())
        )
        began = time.monotonic()
        assembly = app.synth()
        self.seconds = time.monotonic() - began
        self.templates = {
            name: long_form(assembly.get_stack_by_name(name).template) for name in ("Shop", "Fleet")
        }

    def construct(self, stack: Stack, path: str) -> Any:
        return stack.node.find_child(path)


def long_form(node: Any) -> Any:
    """`Fn::GetAtt: "Id.Attr"` (CfnInclude keeps the templates' string form) as the list that
    tests/support/cfn.py reads, as CloudFormation reads both."""
    if isinstance(node, list):
        return [long_form(x) for x in node]
    if isinstance(node, dict):
        if isinstance(node.get("Fn::GetAtt"), str) and len(node) == 1:
            return {"Fn::GetAtt": node["Fn::GetAtt"].split(".", 1)}
        return {k: long_form(v) for k, v in node.items()}
    return node


@pytest.fixture(scope="module")
def synth() -> Synth:
    return Synth()


def rendered(template: dict[str, Any]) -> dict[str, Any]:
    """Resources as CloudFormation would make them (tests/support/cfn.py), which checks every
    policy document with IAM's grammar and parliament (tests/support/iam_grammar.py)."""
    return cfn.Renderer(copy.deepcopy(template), {}).resources()


def test_the_sample_app_synthesizes_and_passes_cfn_lint(synth: Synth, tmp_path: Path) -> None:
    for name, template in synth.templates.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(template))
        # Parameters given to CfnInclude become literals, which cfn-lint sees: a Fn::Sub with
        # nothing left to substitute (W1020), conditions that are now constant (W8003) and
        # the branches they never take (W1028). Anything else fails, warnings included.
        done = subprocess.run(
            [str(CFN_LINT), "--ignore-checks", "W1020", "W8003", "W1028", "--", str(path)],
            # a guard against a hang: at nice 10 beside the suite it waited past 120 s
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(json.dumps(template.get("Description", ""))) < 1024


def test_every_policy_of_the_sample_app_passes_the_iam_grammar_check(synth: Synth) -> None:
    for template in synth.templates.values():
        resources = rendered(template)  # iam_grammar.check inside
        # the grants' policies among them (the producers', the consumer's)
        assert any(r["Type"] == "AWS::IAM::Policy" for r in resources.values())
        assert len(iam_grammar.documents(resources)) > 8


def _includes(synth: Synth) -> list[tuple[Stack, Any, str, dict[str, Any]]]:
    """(stack, CfnInclude, template, parameters) of every template the two apps include."""
    found = []
    for stack, queues_path, worker_path in (
        (synth.shop, "Queues", "Worker"),
        (synth.ecs, "Queues", "Worker"),
    ):
        queues = stack.node.find_child(queues_path)
        found.append((stack, queues.error_queue, "error-queue.yaml", queues.parameters[""]))
        for name, t in queues.templates.items():
            found.append((stack, t, "queues.yaml", queues.parameters[name]))
        worker = stack.node.find_child(worker_path)
        for name, t in worker.templates.items():
            file = "worker-ecs.yaml" if worker.runtime == "ecs" else "worker-lambda.yaml"
            found.append((stack, t, file, worker.parameters[name]))
        registry = stack.node.find_child("Registry")
        found.append((stack, registry.template, "registry.yaml", registry.parameters))
    return found


def test_what_the_constructs_build_is_what_the_templates_build(synth: Synth) -> None:
    """Every included template's resources, rendered from the synthesized stack, equal the
    template's own rendered with the same parameters: types, properties (the worker roles'
    policies among them) and deletion policies; their logical ids carry the construct's path."""
    by_stack = {s: rendered(synth.templates[s.stack_name]) for s in (synth.shop, synth.ecs)}
    compared = 0
    for stack, include, template, parameters in _includes(synth):
        source = cfn.load(template)
        ids = {stack.resolve(include.get_resource(x).logical_id): x for x in source["Resources"]}
        # a value CDK knows only as a token (the topic's ARN, the key's) is what the stack's
        # renderer makes of it: "<Alarms1234>" on both sides
        synth_renderer = cfn.Renderer(copy.deepcopy(synth.templates[stack.stack_name]), {})
        given = {
            k: synth_renderer.value(long_form(stack.resolve(v))) for k, v in parameters.items()
        }
        # ... and then a plausible ARN of its type on both sides (the KMS key's is checked
        # by IAM's grammar in the template's policies too)
        outside = {
            m: json.loads(iam_grammar.concrete(m, by_stack[stack]))  # type: ignore[arg-type]
            for m in re.findall(r"<[A-Za-z0-9]+(?:\.[A-Za-z]+)?>", json.dumps(given))
        }
        given = json.loads(_replaced(json.dumps(given), outside))
        expected = cfn.Renderer(source, given).resources()
        text = json.dumps({ids[k]: v for k, v in by_stack[stack].items() if k in ids})
        text = _replaced(text, outside)
        for new, old in ids.items():
            text = re.sub(rf"<{new}(\.|>)", rf"<{old}\1", text)
        got = as_strings(json.loads(text))
        expected = as_strings(expected)
        assert sorted(got) == sorted(expected), template
        for name, res in expected.items():
            for key in ("Type", "Properties", "DeletionPolicy", "UpdateReplacePolicy"):
                assert got[name].get(key) == res.get(key), (template, name, key)
            compared += 1
    assert compared >= 50  # 53: both apps, conditions applied


def as_strings(node: Any) -> Any:
    """Scalars as CloudFormation takes them: 1 and "1", true and "true" are one value (a
    parameter is always a string; CDK writes a number where the resource's schema has one)."""
    if isinstance(node, list):
        return [as_strings(x) for x in node]
    if isinstance(node, dict):
        out = {k: as_strings(v) for k, v in node.items()}
        if isinstance(out.get("Tags"), list):  # CDK's tag manager sorts them by key
            out["Tags"] = sorted(out["Tags"], key=lambda t: t["Key"])
        return out
    if isinstance(node, bool):
        return str(node).lower()
    return str(node) if isinstance(node, int | float) else node


def _replaced(text: str, values: dict[str, str]) -> str:
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def _sqs_arn(queue: str) -> str:
    return cfn.sqs_arn(queue)


def producer_statements(synth: Synth) -> list[dict[str, Any]]:
    """The Producer role's statements, each resource placeholder made the ARN it stands for."""
    resources = rendered(synth.templates["Shop"])
    (role,) = [k for k in resources if k.startswith("Producer") and "Policy" not in k]
    statements: list[dict[str, Any]] = []
    for res in resources.values():
        if res["Type"] == "AWS::IAM::Policy" and f"<{role}>" in res["Properties"]["Roles"]:
            statements += res["Properties"]["PolicyDocument"]["Statement"]
    arns = {}
    for name, res in resources.items():
        props = res["Properties"]
        if res["Type"] == "AWS::SQS::Queue":
            arns[f"<{name}.Arn>"] = _sqs_arn(props["QueueName"])
        elif res["Type"] == "AWS::DynamoDB::Table":
            arns[f"<{name}.Arn>"] = (
                f"arn:aws:dynamodb:{cfn.REGION}:{cfn.ACCOUNT}:table/{props['TableName']}"
            )
        elif res["Type"] == "AWS::KMS::Key":
            arns[f"<{name}.Arn>"] = f"arn:aws:kms:{cfn.REGION}:{cfn.ACCOUNT}:key/{name.lower()}"
    text = json.dumps(statements)
    for placeholder, arn in arns.items():
        text = text.replace(placeholder, arn)
    assert "<" not in text, text
    return list(json.loads(text))


def key_arn(synth: Synth) -> str:
    (name,) = [k for k in synth.templates["Shop"]["Resources"] if k.startswith("QueueKey")]
    return f"arn:aws:kms:{cfn.REGION}:{cfn.ACCOUNT}:key/{name.lower()}"


# -- deployed into the emulator ---------------------------------------------------------


@pytest.fixture(scope="module")
def deployed(synth: Synth, moto_url: str) -> dict[str, Any]:
    """The sample app's stack created by moto's CloudFormation. moto skips what it does not
    implement (the alarms, the queue policies); it runs no Lambda function (that needs
    Docker), so the event source mappings are deleted and the test plays Lambda's poller
    with the function's own environment."""
    template = copy.deepcopy(synth.templates["Shop"])
    # the CDK CLI's check of the account's bootstrap stack: the app has no assets to upload
    template["Parameters"].pop("BootstrapVersion")
    template["Rules"].pop("CheckBootstrapVersion")
    client = dict(endpoint_url=moto_url, region_name="us-east-1")
    cf = stacks.cloudformation(moto_url)
    cf.create_stack(
        StackName="Shop", TemplateBody=json.dumps(template), Capabilities=["CAPABILITY_IAM"]
    )
    status = cf.describe_stacks(StackName="Shop")["Stacks"][0]
    assert status["StackStatus"] == "CREATE_COMPLETE", status
    lam = boto3.client("lambda", **client)
    functions = {}
    for name in ("orders", "billing"):
        function = f"{PREFIX}{name}-sqsdelay"
        for m in lam.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]:
            assert m["EventSourceArn"] == _sqs_arn(f"{PREFIX}{name}-delay.fifo")
            lam.delete_event_source_mapping(UUID=m["UUID"])
        config = lam.get_function_configuration(FunctionName=function)
        functions[name] = {k: str(v) for k, v in config["Environment"]["Variables"].items()}
    return functions


def settings_of(env: dict[str, str], moto_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    from sqsdelay.settings import Settings

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return Settings(endpoint_url=moto_url, region="us-east-1")


def recorded(client: Any, into: list[iam.Request]) -> None:
    """Every call the client makes, as the IAM request it is (the queue's or table's ARN,
    the registry key's leading key)."""

    def one(model: Any, params: dict[str, Any], **_: Any) -> None:
        service = client.meta.service_model.service_name
        action = f"{service}:{model.name}"
        if service == "sqs":
            name = params.get("QueueName") or params["QueueUrl"].rsplit("/", 1)[-1]
            # SendMessageBatch is authorised as SendMessage (SQS's Service Authorization
            # Reference lists no action of its own for it)
            action = action.replace("SendMessageBatch", "SendMessage")
            into.append(iam.sqs_call(action, _sqs_arn(name)))
        else:
            key = (params.get("Item") or params.get("Key"))["id"]["S"]
            table = f"arn:aws:dynamodb:{cfn.REGION}:{cfn.ACCOUNT}:table/{params['TableName']}"
            into.append(iam.Request(action, table, {"dynamodb:LeadingKeys": [key]}))

    client.meta.events.register("before-parameter-build", one)


def test_a_producer_granted_to_send_may_make_every_call_a_send_makes_and_nothing_more(
    synth: Synth, deployed: dict[str, Any], moto_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqsdelay.aws.sender import Message, Sender

    s = settings_of(deployed["orders"], moto_url, monkeypatch)
    assert s.registry == "dynamodb" and s.max_native_delay_seconds == 1
    sqs = boto3.client("sqs", endpoint_url=moto_url, region_name="us-east-1")
    ddb = boto3.client("dynamodb", endpoint_url=moto_url, region_name="us-east-1")
    calls: list[iam.Request] = []
    recorded(sqs, calls)
    recorded(ddb, calls)
    sender = Sender(s, client=sqs, dynamodb=ddb)
    sender.send("orders", "direct", delay=0, id="grant-direct")  # within the cycle
    sender.send("orders", "delayed", delay=3600, id="grant-delayed")  # via the delay queue
    sender.send_batch("orders", [Message("b1", delay=0), Message("b2", delay=7200, id="grant-b2")])
    # SQS asks KMS on the caller's behalf for every send to an encrypted queue
    via = {"kms:ViaService": f"sqs.{cfn.REGION}.amazonaws.com"}
    calls += [iam.Request(a, key_arn(synth), via) for a in ("kms:GenerateDataKey", "kms:Decrypt")]
    made = {(c.action, c.resource) for c in calls}
    assert ("sqs:SendMessage", _sqs_arn(f"{PREFIX}orders")) in made
    assert ("sqs:SendMessage", _sqs_arn(f"{PREFIX}orders-delay.fifo")) in made
    assert {"dynamodb:PutItem", "dynamodb:UpdateItem"} <= {a for a, _ in made}

    statements = producer_statements(synth)
    assert iam.denied(statements, calls) == []
    never = [
        iam.sqs_call("sqs:SendMessage", _sqs_arn(f"{PREFIX}billing")),
        iam.sqs_call("sqs:SendMessage", _sqs_arn(f"{PREFIX}billing-delay.fifo")),
        iam.sqs_call("sqs:SendMessage", _sqs_arn(f"{PREFIX}error")),
        iam.sqs_call("sqs:SendMessage", _sqs_arn("other-orders")),
        iam.sqs_call("sqs:ReceiveMessage", _sqs_arn(f"{PREFIX}orders")),
        iam.sqs_call("sqs:DeleteMessage", _sqs_arn(f"{PREFIX}orders")),
        iam.sqs_call("sqs:ReceiveMessage", _sqs_arn(f"{PREFIX}orders-delay.fifo")),
        iam.sqs_call("sqs:DeleteMessage", _sqs_arn(f"{PREFIX}orders-delay.fifo")),
        iam.sqs_call("sqs:PurgeQueue", _sqs_arn(f"{PREFIX}orders")),
        iam.Request("kms:Decrypt", key_arn(synth)),  # not through SQS
        iam.Request(
            "dynamodb:PutItem",
            f"arn:aws:dynamodb:{cfn.REGION}:{cfn.ACCOUNT}:table/shop-scheduled",
            {"dynamodb:LeadingKeys": [f"{PREFIX}billing/x"]},
        ),
        iam.Request(
            "dynamodb:DeleteItem",
            f"arn:aws:dynamodb:{cfn.REGION}:{cfn.ACCOUNT}:table/shop-scheduled",
            {"dynamodb:LeadingKeys": [f"{PREFIX}orders/x"]},
        ),
    ]
    assert [r for r in never if iam.allows(statements, r)] == []
    # nothing more than the calls: every action granted is one a send made
    granted = {a for st in statements for a in iam.as_list(st["Action"])}
    assert granted == {c.action for c in calls}


def test_the_sample_app_deployed_into_the_emulator_moves_a_message(
    deployed: dict[str, Any], moto_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqsdelay.aws.sender import Sender
    from sqsdelay.aws_lambda import Handler
    from tests.support.lambda_events import invoke_as_lambda

    s = settings_of(deployed["billing"], moto_url, monkeypatch)
    sqs = boto3.client("sqs", endpoint_url=moto_url, region_name="us-east-1")
    sent = Sender(s, client=sqs).send("billing", "invoice 7", delay=3, id="move-1")
    assert not sent.duplicate
    delay_url = sqs.get_queue_url(QueueName=f"{PREFIX}billing-delay.fifo")["QueueUrl"]
    url = sqs.get_queue_url(QueueName=f"{PREFIX}billing")["QueueUrl"]
    handler = Handler(s)  # the function's handler, with the function's environment
    began = time.monotonic()
    wait_for(
        lambda: (
            invoke_as_lambda(sqs, delay_url, handler) and handler.stats.events["delay.handed_over"]
        ),
        timeout=30,
    )
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", [])
    assert [m["Body"] for m in got] == ["invoice 7"]
    assert time.monotonic() - began < 30


# -- what the constructs refuse, and what they leave alone ------------------------------


def test_a_value_the_template_refuses_is_refused_when_the_construct_is_made() -> None:
    stack = Stack(App(), "Refused")
    topic = sns.Topic(stack, "Alarms")
    with pytest.raises(ValueError, match="DestinationName"):
        cdk.SqsDelayQueues(stack, "Q1", destinations=["no spaces"], alarm_topic=topic)
    with pytest.raises(ValueError, match="CycleSeconds"):
        cdk.SqsDelayQueues(stack, "Q2", destinations=["a"], alarm_topic=topic, cycle_seconds=901)
    queues = cdk.SqsDelayQueues(stack, "Q3", destinations=["a"], alarm_topic=topic)
    with pytest.raises(ValueError, match="SecurityGroups, Subnets"):
        cdk.SqsDelayWorker(
            stack, "W1", queues=queues, runtime="ecs", image_uri=cdk_app.EXAMPLE_IMAGE
        )
    with pytest.raises(ValueError, match="ImageUri"):  # by digest only
        cdk.SqsDelayWorker(stack, "W2", queues=queues, runtime="lambda", image_uri="repo:latest")
    with pytest.raises(ValueError, match="parking=True"):
        cdk.SqsDelayWorker(
            stack, "W3", queues=queues, runtime="lambda", image_uri=cdk_app.EXAMPLE_IMAGE,
            parking=True,
        )  # fmt: skip
    with pytest.raises(ValueError, match="not destinations"):
        queues.grant_send_delayed(
            iam_.Role(stack, "P", assumed_by=iam_.AccountRootPrincipal()), ["b"]
        )


def test_importing_sqsdelay_loads_no_aws_cdk() -> None:
    code = (
        "import sys, sqsdelay, sqsdelay.sender, sqsdelay.consumer, sqsdelay.cli;"
        "import sqsdelay.aws_lambda;"
        "cdk = ('aws_cdk', 'constructs', 'jsii');"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in cdk))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
