"""The templates' IAM as AWS would evaluate it, offline (moto enforces no IAM, KMS or
Lambda guard): each role's statements against the calls the code makes, with the queue names
from core/queue_names.py, so a missing grant or one too wide fails here; and the properties that
only matter on AWS (RecursiveLoop, trust conditions, alarms and where they notify)."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest

from sqsdelay.core import queue_names, queue_trios
from tests.support import cfn, docs, iam, iam_grammar
from tests.support.iam import Request

PREFIX = "p-"
TOPIC = f"arn:aws:sns:{cfn.REGION}:{cfn.ACCOUNT}:sqsdelay-alarms"
KEY = f"arn:aws:kms:{cfn.REGION}:{cfn.ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
ECS = {
    "ImageUri": f"sqsdelay-worker@sha256:{'0' * 64}",
    "Subnets": ["subnet-1"],
    "SecurityGroups": ["sg-1"],
    "AlarmTopicArn": TOPIC,
    "QueuePrefix": PREFIX,
}
LAMBDA = {"DestinationName": "orders", "ImageUri": "sqsdelay-lambda", "AlarmTopicArn": TOPIC}
SQS_VIA = {"kms:ViaService": f"sqs.{cfn.REGION}.amazonaws.com"}
EVERYTHING = {"KmsKeyArn": KEY, "Parking": "scheduler", "Registry": "dynamodb"}
IAM_INLINE_LIMIT = 10_240  # a role's inline policies together, white space not counted

# What the worker calls on each of a destination's queues (tests/integration/test_deployed.py
# checks these against the calls a running worker makes).
DRAIN = ["GetQueueUrl", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility"]
DRAIN += ["SendMessage", "GetQueueAttributes"]
SEND = ["GetQueueUrl", "SendMessage"]
PAUSE = ["ListQueueTags"]  # on the delay queue only: its tag pauses the destination


def render(template: str, **params: Any) -> dict[str, Any]:
    return cfn.Renderer(cfn.load(template), params).resources()


def sqs(actions: list[str], queue: str, arn: str = "") -> list[Request]:
    """SQS calls on one queue (by name, or by `arn` in another account or Region)."""
    return [iam.sqs_call(f"sqs:{a}", arn or cfn.sqs_arn(queue)) for a in actions]


def worker_calls(destination: str, prefix: str = PREFIX) -> list[Request]:
    """The SQS calls a worker makes for one destination, named as core/queue_names.py names it."""
    trio = queue_trios.trio(destination, prefix, "error")
    calls = sqs(DRAIN + PAUSE, trio.delay) + sqs(SEND, trio.error)
    if trio.staging is None:
        return calls + sqs(SEND, trio.destination)
    # a FIFO destination: hand-over into the staging queue, drained and forwarded from there
    return calls + sqs(DRAIN, trio.staging) + sqs(SEND, trio.destination)


def kms_calls(key: str, **context: Any) -> list[Request]:
    account = key.split(":")[4]
    ctx = {**SQS_VIA, "aws:ResourceAccount": account, **context}
    return [Request(f"kms:{a}", key, ctx) for a in ("GenerateDataKey", "Decrypt")]


# ---- the worker roles against the calls the worker makes ----


def test_ecs_named_queues_allow_every_call_on_their_queues_and_nothing_else() -> None:
    resources = render("worker-ecs.yaml", **ECS, Queues="orders,billing")
    statements = iam.role_statements(resources, "TaskRole")
    assert iam.denied(statements, worker_calls("orders") + worker_calls("billing")) == []
    other = worker_calls("shipping") + worker_calls("orders", prefix="q-")
    refused = [r for r in other if not r.resource.endswith(":p-error")]
    assert all(not iam.allows(statements, r) for r in refused)
    assert not iam.allows(statements, Request("sqs:ListQueues", "*"))
    # the ARNs' head is a wildcard (IAM takes the prefix's variable only after the fifth
    # colon): the same names in another account or Region stay out of reach
    for elsewhere in ("arn:aws:sqs:us-east-1:210987654321:", "arn:aws:sqs:eu-west-1:123456789012:"):
        for queue in ("p-orders-delay.fifo", "p-orders"):
            calls = sqs(["SendMessage", "GetQueueUrl"], "", arn=elsewhere + queue)
            assert not any(iam.allows(statements, r) for r in calls), (elsewhere, queue)


def test_ecs_every_queue_under_the_prefix_covers_standard_and_fifo_destinations() -> None:
    resources = render("worker-ecs.yaml", **ECS, Queues="*")
    statements = iam.role_statements(resources, "TaskRole")
    calls = worker_calls("orders") + worker_calls("orders.fifo") + worker_calls("billing.fifo")
    assert iam.denied(statements, [*calls, Request("sqs:ListQueues", "*")]) == []
    outside = worker_calls("orders", prefix="q-") + worker_calls("orders.fifo", prefix="q-")
    assert all(not iam.allows(statements, r) for r in outside if "q-error" not in r.resource)


def test_lambda_role_allows_every_call_on_its_destination_and_nothing_else() -> None:
    resources = render("worker-lambda.yaml", **LAMBDA, QueuePrefix=PREFIX)
    statements = iam.role_statements(resources, "Role")
    assert iam.denied(statements, worker_calls("orders")) == []
    assert all(not iam.allows(statements, r) for r in sqs(DRAIN, "p-billing-delay.fifo"))


@pytest.mark.parametrize(
    ("template", "params", "role"),
    [("worker-ecs.yaml", {**ECS, "Queues": "orders"}, "TaskRole"),
     ("worker-lambda.yaml", {**LAMBDA, "QueuePrefix": PREFIX}, "Role")],
)  # fmt: skip
def test_worker_kms_grant_is_this_accounts_key_through_sqs_only(
    template: str, params: dict[str, Any], role: str
) -> None:
    statements = iam.role_statements(render(template, **params, KmsKeyArn=KEY), role)
    assert iam.denied(statements, kms_calls(KEY)) == []
    direct = [Request(r.action, r.resource, {"aws:ResourceAccount": cfn.ACCOUNT})
              for r in kms_calls(KEY)]  # fmt: skip
    assert not any(iam.allows(statements, r) for r in direct)  # not outside SQS
    foreign = KEY.replace(cfn.ACCOUNT, "210987654321")
    foreign_stack = iam.role_statements(render(template, **params, KmsKeyArn=foreign), role)
    assert not any(iam.allows(foreign_stack, r) for r in kms_calls(foreign))


@pytest.mark.parametrize(
    ("template", "params", "role", "mine", "other"),
    [
        ("worker-ecs.yaml", {**ECS, "Queues": "orders,billing"}, "TaskRole",
         ["p-orders/m1", "p-billing/m2"], ["p-shipping/m3", "p-orders-x/m4"]),
        ("worker-ecs.yaml", {**ECS, "Queues": "*"}, "TaskRole",
         ["p-orders/m1", "p-orders.fifo/m2"], ["q-orders/m3", "orders/m4"]),
        ("worker-lambda.yaml", {**LAMBDA, "QueuePrefix": PREFIX}, "Role",
         ["p-orders/m1"], ["p-billing/m2", "p-ordersx/m3"]),
    ],
)  # fmt: skip
def test_registry_grants_reach_only_the_workers_destinations(
    template: str, params: dict[str, Any], role: str, mine: list[str], other: list[str]
) -> None:
    """The registry's key is "<destination>/<message id>" (core/registry.py key): the worker
    may read and claim only its own destinations' records (dynamodb:LeadingKeys)."""
    from sqsdelay.core.registry import key

    destination, _, message = mine[0].partition("/")
    assert key(destination, message)["id"]["S"] == mine[0]  # the layout the grant assumes
    given = {**params, "Registry": "dynamodb", "RegistryTableName": "t"}
    statements = iam.role_statements(render(template, **given), role)
    table = f"arn:aws:dynamodb:{cfn.REGION}:{cfn.ACCOUNT}:table/t"

    def calls(keys: list[str]) -> list[Request]:
        return [
            Request(f"dynamodb:{a}", table, {"dynamodb:LeadingKeys": keys})
            for a in ("BatchGetItem", "UpdateItem")
        ]

    assert iam.denied(statements, calls(mine)) == []
    for k in other:
        assert not any(iam.allows(statements, r) for r in calls([*mine, k])), k


def test_one_policy_document_per_worker_role() -> None:
    """IAM's 10,240 characters are per role: one document with lists of resources, and the
    ECS service waits for the role that holds it."""
    many = ",".join(f"q{i}" for i in range(40))
    for template, params, role in (
        ("worker-ecs.yaml", {**ECS, "Queues": many, **EVERYTHING}, "TaskRole"),
        ("worker-lambda.yaml", {**LAMBDA, **EVERYTHING}, "Role"),
    ):
        resources = render(template, **params)
        assert not [r for r in resources.values() if r["Type"] == "AWS::IAM::RolePolicy"]
        assert len(resources[role]["Properties"]["Policies"]) == 1
        assert inline_size(resources, role) < IAM_INLINE_LIMIT
    ecs = cfn.load("worker-ecs.yaml")["Resources"]
    assert ecs["Service"]["DependsOn"] == "TaskRole"


def inline_size(resources: dict[str, Any], role: str) -> int:
    """A role's inline policies as IAM measures them: the JSON CloudFormation sends, policy
    variables as written (IAM resolves them per request), without white space."""
    documents = [p["PolicyDocument"] for p in resources[role]["Properties"].get("Policies", [])]
    return sum(len(re.sub(r"\s", "", json.dumps(d))) for d in documents)


def documented_named_queue_limits() -> dict[tuple[int, bool], int]:
    """docs/production-checklist.md's table: (name length, with registry, parking and KMS) ->
    the most named queues the ECS task role holds."""
    doc = (cfn.INFRA.parent / "docs" / "production-checklist.md").read_text()
    rows = re.findall(r"^\s*\| (\d+) characters \| (\d+) \| (\d+) \|$", doc, re.MULTILINE)
    assert len(rows) == 2, rows
    limits = {}
    for width, plain, everything in rows:
        limits[int(width), False], limits[int(width), True] = int(plain), int(everything)
    return limits


@pytest.mark.parametrize(("width", "everything"), list(itertools.product([8, 24], [False, True])))
def test_ecs_role_holds_exactly_the_documented_number_of_named_queues(
    width: int, everything: bool
) -> None:
    """The rendered policy, as IAM counts it, at the documented number of named queues fits
    IAM's 10,240 characters, and one queue more does not (the docs' conditions: default
    names, a 10-character prefix). `Queues=*` fits with everything, whatever the queues."""
    limit = documented_named_queue_limits()[width, everything]
    extra = EVERYTHING if everything else {}

    def size(count: int) -> int:
        names = ",".join(f"q{i:0{width - 1}d}" for i in range(count))
        params = {**ECS, "QueuePrefix": "team-name-", "Queues": names, **extra}
        return inline_size(render("worker-ecs.yaml", **params), "TaskRole")

    assert size(limit) <= IAM_INLINE_LIMIT < size(limit + 1)
    every = {**ECS, "QueuePrefix": "team-name-", "Queues": "*", **extra}
    assert inline_size(render("worker-ecs.yaml", **every), "TaskRole") < 2_000  # "about 1,800"


def test_the_template_and_the_docs_state_the_documented_limits() -> None:
    limits = documented_named_queue_limits()
    template = " ".join((cfn.INFRA / "worker-ecs.yaml").read_text().split())
    readme = " ".join(docs.text("deploy-ecs.md").split())
    plain, everything = (limits[24, False], limits[8, False]), (limits[24, True], limits[8, True])
    for text in (template, readme):
        assert "hundreds of named queues" not in text
        assert f"{plain[0]} to {plain[1]} named queues" in text
        assert f"{everything[0]} to {everything[1]} with" in text
    assert f"holds {plain[0]} named queues of 24 characters ({everything[0]} with" in template


# ---- every rendered policy as IAM takes it, and the evaluator no kinder than IAM ----


def grammar_cases() -> list[tuple[str, dict[str, Any]]]:
    """Every template, and for the worker and parking templates every combination of the
    parameters that change a policy."""
    cases: list[tuple[str, dict[str, Any]]] = []
    for queues, kms, parking, registry in itertools.product(
        ["orders,billing", "*"], ["", KEY], ["off", "scheduler"], ["off", "dynamodb"]
    ):
        given = {"KmsKeyArn": kms, "Parking": parking, "Registry": registry}
        cases.append(("worker-ecs.yaml", {**ECS, "Queues": queues, **given}))
        if queues == "*":
            cases.append(("worker-lambda.yaml", {**LAMBDA, "QueuePrefix": PREFIX, **given}))
    for parking, kms in itertools.product(["off", "scheduler"], ["", KEY, "alias/sqsdelay"]):
        given = {"QueuePrefix": PREFIX, "AlarmTopicArn": TOPIC, "Parking": parking}
        cases.append(("error-queue.yaml", {**given, "KmsKeyId": kms}))
    cases += [
        (
            "queues.yaml",
            {"DestinationName": "orders", "QueuePrefix": PREFIX, "AlarmTopicArn": TOPIC},
        ),
        ("registry.yaml", {}),
        ("dashboard.yaml", {"QueuePrefix": PREFIX, "AlarmTopicArn": TOPIC}),
        ("cost-report.yaml", {"EventsBucket": "events", "ReportBucket": "reports"}),
    ]
    return cases


@pytest.mark.parametrize(("template", "params"), grammar_cases())
def test_every_rendered_policy_passes_iams_grammar_and_parliament(
    template: str, params: dict[str, Any]
) -> None:
    """moto's IAMPolicyDocumentValidator and parliament on every policy document (the
    renderer runs the same check on every render of every test: tests/support/cfn.py)."""
    resources = cfn.Renderer(cfn.load(template), params).resources()
    assert iam_grammar.documents(resources)
    assert iam_grammar.problems(resources) == []


def one_role(resource: str, **condition: Any) -> dict[str, Any]:
    statement = {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": resource}
    trust = {"Effect": "Allow", "Principal": {"Service": "ecs-tasks.amazonaws.com"}}
    tags = {"head": cfn.sqs_arn("p-"), "prefix": "p-"}
    return {
        "Role": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [{**trust, "Action": "sts:AssumeRole"}],
                },
                "Policies": [
                    {
                        "PolicyName": "p",
                        "PolicyDocument": {
                            "Version": "2012-10-17",
                            "Statement": [{**statement, **condition}],
                        },
                    }
                ],
            },
        }
    }


def test_a_policy_variable_before_the_fifth_colon_is_refused() -> None:
    """IAM takes a variable only in an ARN's resource part and refuses the whole policy
    otherwise; the evaluator used to resolve it anywhere (so the ECS role's named queues, as
    `${aws:PrincipalTag/…-arn-prefix}NAME`, passed here and failed to create on AWS)."""
    head = one_role("${aws:PrincipalTag/head}orders")
    with pytest.raises(AssertionError, match="fifth colon"):
        iam.role_statements(head, "Role")
    found = iam_grammar.problems(head)
    assert any("IAM: Partition" in p for p in found)  # moto's validator, as IAM answers
    assert any("parliament: INVALID_ARN" in p for p in found)
    tail = one_role("arn:aws:sqs:*:*:${aws:PrincipalTag/prefix}orders")
    assert iam_grammar.problems(tail) == []
    (statement,) = iam.role_statements(tail, "Role")
    assert statement["Resource"] == "arn:aws:sqs:*:*:p-orders"


def test_the_grammar_check_finds_what_iam_refuses() -> None:
    for refused in ("orders", "arn:amazon:sqs:*:*:orders"):  # no ARN; no such partition
        assert any("IAM:" in p for p in iam_grammar.problems(one_role(refused))), refused
    unknown = one_role(cfn.sqs_arn("q"))
    unknown["Role"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"][0]["Action"] = (
        "sqs:SendMessages"
    )
    assert any("UNKNOWN_ACTION" in p for p in iam_grammar.problems(unknown))
    foreign_key = {"Condition": {"StringEquals": {"kms:ViaService": "sqs.x.amazonaws.com"}}}
    assert any(
        "UNKNOWN_CONDITION_FOR_ACTION" in p
        for p in iam_grammar.problems(one_role(cfn.sqs_arn("q"), **foreign_key))
    )


def test_arn_like_matches_component_by_component() -> None:
    """IAM checks an ARN's first five components each on its own: a `*` for the Region
    never reaches into the account. fnmatch's `*` crosses colons, so the evaluator used to
    take another account's ARN whose resource part repeats the expected account."""
    allowed = "arn:aws:emr-serverless:*:123456789012:/applications/a1/*"
    statement = {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}
    statement["Condition"] = {"ArnLike": {"aws:SourceArn": allowed}}

    def assumed_from(source: str) -> bool:
        return iam.allows([statement], Request("sts:AssumeRole", "*", {"aws:SourceArn": source}))

    assert assumed_from("arn:aws:emr-serverless:eu-west-1:123456789012:/applications/a1/jobruns/j")
    crafted = "arn:aws:emr-serverless:us-east-1:210987654321:123456789012:/applications/a1/j"
    assert not assumed_from(crafted)
    assert not assumed_from("arn:aws:emr-serverless:us-east-1:123456789012:/applications/a2/j")
    # the resource part is matched whole, its own colons included; "?" is one character
    assert iam.arn_matches("arn:aws:logs:*:*:log-group:g:*", "arn:aws:logs:r:1:log-group:g:s:t")
    assert iam.arn_matches("arn:aws:sqs:us-east-?:*:q", "arn:aws:sqs:us-east-1:1:q")
    assert not iam.arn_matches("arn:aws:sqs:us-east-?:*:q", "arn:aws:sqs:us-east-1:1:2:q")


def test_for_all_values_of_an_absent_key_is_true() -> None:
    """IAM: ForAllValues over no values holds (a key the request does not carry, or an empty
    list); every other operator fails on an absent key. The evaluator used to fail it."""
    table = f"arn:aws:dynamodb:{cfn.REGION}:{cfn.ACCOUNT}:table/t"
    keys = {"dynamodb:LeadingKeys": ["p-orders/*"]}
    for_all = {"Effect": "Allow", "Action": "dynamodb:*", "Resource": table}
    for_all["Condition"] = {"ForAllValues:StringLike": keys}
    like = {**for_all, "Condition": {"StringLike": keys}}

    def call(context: dict[str, Any]) -> Request:
        return Request("dynamodb:Scan", table, context)

    absent, empty = call({}), call({"dynamodb:LeadingKeys": []})
    assert iam.allows([for_all], absent) and iam.allows([for_all], empty)
    assert iam.allows([for_all], call({"dynamodb:LeadingKeys": ["p-orders/m1"]}))
    assert not iam.allows([for_all], call({"dynamodb:LeadingKeys": ["p-orders/m", "p-b/m"]}))
    assert not iam.allows([like], absent)
    # so the registry grants, conditioned so, must hold only actions that always carry
    # their items' keys (a Scan or a table-wide call would pass without one)
    for template, params, role in (
        ("worker-ecs.yaml", {**ECS, "Queues": "orders", **EVERYTHING}, "TaskRole"),
        ("worker-lambda.yaml", {**LAMBDA, **EVERYTHING}, "Role"),
    ):
        for st in iam.role_statements(render(template, **params), role):
            if any(op.startswith("ForAllValues:") for op in st.get("Condition", {})):
                assert set(iam.as_list(st["Action"])) <= {
                    "dynamodb:BatchGetItem",
                    "dynamodb:UpdateItem",
                }


# ---- the Scheduler role (error-queue.yaml, Parking=scheduler) ----


def scheduler(**params: Any) -> dict[str, Any]:
    given = {"QueuePrefix": PREFIX, "AlarmTopicArn": TOPIC, "Parking": "scheduler", **params}
    return render("error-queue.yaml", **given)


def test_scheduler_sends_back_to_standard_and_fifo_delay_queues_and_the_error_queue() -> None:
    statements = iam.role_statements(scheduler(), "SchedulerRole")
    standard, fifo = (
        queue_trios.trio("orders", PREFIX, "error"),
        queue_trios.trio("o.fifo", PREFIX, "error"),
    )
    assert fifo.delay == "p-o-delay-fifo.fifo"  # not *-delay.fifo
    error = Request("sqs:SendMessage", "<ErrorQueue.Arn>")
    sends = [*sqs(["SendMessage"], standard.delay), *sqs(["SendMessage"], fifo.delay), error]
    assert iam.denied(statements, sends) == []
    for queue in ("p-orders", "p-o.fifo", "p-o-fifo-staging", "q-orders-delay.fifo", "x.fifo"):
        assert not iam.allows(statements, Request("sqs:SendMessage", cfn.sqs_arn(queue))), queue
    assert not iam.allows(statements, Request("sqs:ReceiveMessage", cfn.sqs_arn(standard.delay)))
    assert not [st for st in statements if str(st["Action"]).count("kms:")]  # SSE-SQS


@pytest.mark.parametrize(
    ("given", "key"),
    [
        (KEY, KEY),
        ("1234abcd-12ab-34cd-56ef-1234567890ab", KEY),
        ("alias/sqsdelay", f"arn:aws:kms:{cfn.REGION}:{cfn.ACCOUNT}:key/any-key-id"),
    ],
)
def test_scheduler_may_use_the_queues_kms_key_through_sqs(given: str, key: str) -> None:
    """Without the key Scheduler cannot send to the encrypted delay or error queue: it
    retries for 24 hours, then drops the message and deletes the schedule."""
    statements = iam.role_statements(scheduler(KmsKeyId=given), "SchedulerRole")
    aliases = {"kms:ResourceAliases": ["alias/sqsdelay"]} if given.startswith("alias/") else {}
    assert iam.denied(statements, kms_calls(key, **aliases)) == []
    other_key = key.rsplit("/", 1)[0] + "/another"
    assert not any(iam.allows(statements, r) for r in kms_calls(other_key))
    assert not any(
        iam.allows(statements, Request(r.action, r.resource, {"aws:ResourceAccount": cfn.ACCOUNT}))
        for r in kms_calls(key, **aliases)
    )


def test_scheduler_role_is_assumed_only_for_this_accounts_schedule_group() -> None:
    role = scheduler(ScheduleGroupName="g1")["SchedulerRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {
        "aws:SourceAccount": cfn.ACCOUNT,
        "aws:SourceArn": f"arn:aws:scheduler:{cfn.REGION}:{cfn.ACCOUNT}:schedule-group/g1",
    }
    # IAM names are global: two Regions' stacks must not collide; the workers pass this one
    assert role["RoleName"] == f"p-sqsdelay-scheduler-{cfn.REGION}"
    arn = f"arn:aws:iam::{cfn.ACCOUNT}:role/{role['RoleName']}"
    ecs = render("worker-ecs.yaml", **ECS, Queues="orders", Parking="scheduler")
    (container,) = ecs["TaskDefinition"]["Properties"]["ContainerDefinitions"]
    env = {e["Name"]: e["Value"] for e in container["Environment"]}
    lam = render("worker-lambda.yaml", **LAMBDA, QueuePrefix=PREFIX, Parking="scheduler")
    lam_env = lam["Function"]["Properties"]["Environment"]["Variables"]
    assert env["SQSDELAY_SCHEDULER_ROLE_ARN"] == lam_env["SQSDELAY_SCHEDULER_ROLE_ARN"] == arn
    for resources, name in ((ecs, "TaskRole"), (lam, "Role")):
        statements = iam.role_statements(resources, name)
        passing = {"iam:PassedToService": "scheduler.amazonaws.com"}
        assert iam.allows(statements, Request("iam:PassRole", arn, passing))


def test_parking_without_a_prefix_is_refused() -> None:
    template = cfn.load("error-queue.yaml")
    base = {"AlarmTopicArn": TOPIC, "Parking": "scheduler"}
    [message] = cfn.Renderer(template, {**base, "QueuePrefix": ""}).broken_rules()
    assert "QueuePrefix" in message and "every delay queue of the account" in message
    assert cfn.Renderer(template, {**base, "QueuePrefix": PREFIX}).broken_rules() == []
    off = {"AlarmTopicArn": TOPIC, "QueuePrefix": ""}
    assert cfn.Renderer(template, off).broken_rules() == []


def test_every_template_grants_the_delay_queues_by_the_same_patterns() -> None:
    """One source for the queue patterns: every pattern a template grants a prefix's delay
    queues by is one of the same few, and they cover what core/queue_names.py names."""
    ecs = iam.role_statements(render("worker-ecs.yaml", **ECS, Queues="*"), "TaskRole")
    sched = iam.role_statements(scheduler(), "SchedulerRole")

    def delay_patterns(statements: list[dict[str, Any]]) -> set[str]:
        found = {str(r) for st in statements for r in iam.as_list(st["Resource"])}
        return {r for r in found if "*" in r and "delay" in r}

    assert delay_patterns(ecs) == delay_patterns(sched)
    for destination in ("orders", "orders.fifo", "a-delay", "x_y.fifo"):
        delay = queue_names.delay_queue_name(queue_names.destination_name(destination, PREFIX))
        for statements in (ecs, sched):
            assert iam.allows(statements, Request("sqs:SendMessage", cfn.sqs_arn(delay)))


# ---- what only AWS would show ----


def test_lambda_worker_may_requeue_into_its_own_trigger_forever() -> None:
    """Lambda's recursive loop detection stops a function that sends back to its own SQS
    trigger after about 16 hops unless RecursiveLoop is Allow (docs/lambda-recursion.md)."""
    resources = render("worker-lambda.yaml", **LAMBDA)
    assert resources["Function"]["Properties"]["RecursiveLoop"] == "Allow"
    trigger = resources["EventSourceMapping"]["Properties"]["EventSourceArn"]
    assert trigger == cfn.sqs_arn(queue_names.delay_queue_name("orders"))


ALARMED = ["error-queue.yaml", "queues.yaml", "dashboard.yaml", "worker-ecs.yaml"]
ALARMED += ["worker-lambda.yaml"]


@pytest.mark.parametrize("template", ALARMED)
def test_every_alarm_notifies_the_required_topic(template: str) -> None:
    spec = cfn.load(template)["Parameters"]["AlarmTopicArn"]
    assert "Default" not in spec  # required: an alarm that notifies nobody is none
    params = {**ECS, **LAMBDA, "Queues": "orders", "AlarmTopicArn": TOPIC}
    params = {k: v for k, v in params.items() if k in cfn.load(template)["Parameters"]}
    alarms = [r for r in render(template, **params).values() if r["Type"].endswith("::Alarm")]
    assert alarms
    assert all(a["Properties"]["AlarmActions"] == [TOPIC] for a in alarms)


def test_lambda_errors_and_throttles_are_alarmed_on_the_function() -> None:
    resources = render("worker-lambda.yaml", **LAMBDA)
    alarmed = {
        r["Properties"]["MetricName"]: r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
    }
    assert set(alarmed) == {"Errors", "Throttles"}
    for props in alarmed.values():
        assert props["Namespace"] == "AWS/Lambda"
        assert props["Dimensions"] == [{"Name": "FunctionName", "Value": "<Function>"}]


def test_ecs_worker_not_running_is_alarmed_without_container_insights() -> None:
    resources = render("worker-ecs.yaml", **ECS, Queues="orders")
    (alarm,) = [r["Properties"] for r in resources.values() if r["Type"].endswith("::Alarm")]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "AWS/ECS", "CPUUtilization", "SampleCount"
    )  # fmt: skip
    assert {d["Name"] for d in alarm["Dimensions"]} == {"ClusterName", "ServiceName"}
    # ECS writes nothing for a service without running tasks: no data is the alarm
    assert alarm["TreatMissingData"] == "breaching"
    assert alarm["ComparisonOperator"] == "LessThanThreshold" and alarm["Threshold"] == 1


def test_not_handing_over_is_alarmed_per_destination() -> None:
    """The Destination dimension the worker writes (the prefixed destination name)."""
    resources = render("queues.yaml", DestinationName="orders", QueuePrefix=PREFIX,
                       AlarmTopicArn=TOPIC, MetricsNamespace="acme")  # fmt: skip
    props = resources["NotHandingOverAlarm"]["Properties"]
    metrics = [m["MetricStat"]["Metric"] for m in props["Metrics"] if "MetricStat" in m]
    assert {m["MetricName"] for m in metrics} == {"DueWithin1h", "HandedOver"}
    for m in metrics:
        assert m["Namespace"] == "acme"
        assert m["Dimensions"] == [
            {"Name": "Destination", "Value": queue_names.destination_name("orders", PREFIX)}
        ]


@pytest.mark.parametrize(
    ("template", "params", "queue_keys"),
    [("queues.yaml", {"DestinationName": "orders"}, ["DestinationQueue", "DelayQueue"]),
     ("error-queue.yaml", {}, ["ErrorQueue"])],
)  # fmt: skip
def test_every_queue_refuses_requests_without_tls(
    template: str, params: dict[str, Any], queue_keys: list[str]
) -> None:
    resources = render(template, **params, QueuePrefix=PREFIX, AlarmTopicArn=TOPIC)
    policies = [r["Properties"] for r in resources.values() if r["Type"].endswith("QueuePolicy")]
    covered = {q for p in policies for q in p["Queues"]}
    assert covered == {f"<{k}>" for k in queue_keys}
    statements = [st for p in policies for st in p["PolicyDocument"]["Statement"]]
    for key in queue_keys:
        arn = f"<{key}.Arn>"
        plain = Request("sqs:SendMessage", arn, {"aws:SecureTransport": "false"})
        tls = Request("sqs:SendMessage", arn, {"aws:SecureTransport": "true"})
        assert not iam.allows([*statements, _allow_all(arn)], plain)
        assert iam.allows([*statements, _allow_all(arn)], tls)


def _allow_all(arn: str) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": "sqs:*", "Resource": arn}


def test_registry_table_cannot_be_deleted_by_a_call() -> None:
    table = render("registry.yaml")["Table"]
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert cfn.load("registry.yaml")["Resources"]["Table"]["DeletionPolicy"] == "Retain"


def test_cost_report_role_runs_only_this_accounts_code_for_this_accounts_application() -> None:
    params = {"EventsBucket": "events", "ReportBucket": "reports"}
    resources = render("cost-report.yaml", **params)
    role = resources["JobRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": cfn.ACCOUNT}
    application, runs = trust["Condition"]["ArnLike"]["aws:SourceArn"]
    assert application.endswith("/applications/<Application>") and runs == application + "/*"
    statements = iam.role_statements(resources, "JobRole")
    code = "arn:aws:s3:::reports/sqsdelay/code/sqsdelay-venv.tar.gz"
    mine, theirs = {"s3:ResourceAccount": cfn.ACCOUNT}, {"s3:ResourceAccount": "210987654321"}
    assert iam.allows(statements, Request("s3:GetObject", code, mine))
    assert not iam.allows(statements, Request("s3:GetObject", code, theirs))
    listing = {**mine, "s3:prefix": "sqsdelay/reports/latest/"}
    assert iam.allows(statements, Request("s3:ListBucket", "arn:aws:s3:::reports", listing))
    elsewhere = {**mine, "s3:prefix": "other/"}
    assert not iam.allows(statements, Request("s3:ListBucket", "arn:aws:s3:::reports", elsewhere))


@pytest.mark.parametrize("template", ["queues.yaml", "worker-ecs.yaml", "worker-lambda.yaml"])
def test_the_new_alarms_are_accepted_by_put_metric_alarm(moto_url: str, template: str) -> None:
    """moto's CloudFormation skips alarms; PutMetricAlarm validates their properties (cfn-lint
    checks the template in `make test`)."""
    import boto3

    cw = boto3.client("cloudwatch", endpoint_url=moto_url, region_name=cfn.REGION)
    params = {**ECS, **LAMBDA, "Queues": "orders"}
    params = {k: v for k, v in params.items() if k in cfn.load(template)["Parameters"]}
    alarms = {k: r for k, r in render(template, **params).items() if r["Type"].endswith("::Alarm")}
    for key, alarm in alarms.items():
        cw.put_metric_alarm(AlarmName=f"{PREFIX}{template}-{key}", **alarm["Properties"])
    found = cw.describe_alarms(AlarmNamePrefix=f"{PREFIX}{template}-")["MetricAlarms"]
    assert len(found) == len(alarms) >= 1
