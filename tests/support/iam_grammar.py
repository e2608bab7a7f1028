"""Every IAM policy document of a rendered template, checked the way IAM checks it when the
stack creates it, so a policy IAM would refuse fails the test that renders it.

Two checkers that know IAM and not our evaluator (tests/support/iam.py):

- moto's `IAMPolicyDocumentValidator` (and its trust-policy variant): IAM's grammar, the
  error IAM answers (`MalformedPolicyDocument`: an ARN's partition, a vendor with a
  wildcard, an unknown condition operator, a missing element);
- parliament (duo-labs, BSD-3-Clause): IAM's actions, resource types and condition keys from
  the definitions it ships (no network), so an unknown action, an ARN no action of the
  statement takes, a condition key an action does not carry or an ARN that is not six
  components long is found offline. Every finding fails but one it gets wrong: a condition
  key of the action's resource type (the Service Authorization Reference lists
  `kms:ResourceAliases` under the key, not under `kms:Decrypt`; parliament reads only the
  latter).

A policy variable stands only after an ARN's fifth colon (tests/support/iam.py says why);
checked here too, then each variable is given to parliament as a plain name (its own pattern
for them takes no `-`, which IAM's tag keys may hold).

`cfn.Renderer.resources()` calls `check`, so every template and every parameter combination
any test renders goes through both. Values the renderer cannot know before deployment
(`<Queue>`, `<Queue.Arn>`) are given plausible ARNs of their resource's type first.
"""

from __future__ import annotations

import json
import re
from typing import Any

from moto.iam.exceptions import MalformedPolicyDocument
from moto.iam.policy_validation import (
    IAMPolicyDocumentValidator,
    IAMTrustPolicyDocumentValidator,
)

ACCOUNT, REGION = "123456789012", "us-east-1"  # as tests/support/cfn.py (no import: a cycle)

# A resource's ARN by its type, for `<LogicalId.Arn>` before deployment.
_HERE = f"{REGION}:{ACCOUNT}"
_ARN_OF_TYPE = {
    "AWS::SQS::Queue": f"arn:aws:sqs:{_HERE}:{{}}",
    "AWS::SNS::Topic": f"arn:aws:sns:{_HERE}:{{}}",
    "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{_HERE}:table/{{}}",
    "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{{}}",
    "AWS::Logs::LogGroup": f"arn:aws:logs:{_HERE}:log-group:{{}}:*",
    "AWS::Lambda::Function": f"arn:aws:lambda:{_HERE}:function:{{}}",
    "AWS::Scheduler::ScheduleGroup": f"arn:aws:scheduler:{_HERE}:schedule-group/{{}}",
    "AWS::EMRServerless::Application": f"arn:aws:emr-serverless:{_HERE}:/applications/{{}}",
    "AWS::S3::Bucket": "arn:aws:s3:::{}",
    "AWS::KMS::Key": f"arn:aws:kms:{_HERE}:key/{{}}",
}

_PLACEHOLDER = re.compile(r"<([A-Za-z0-9]+)(?:\.([A-Za-z]+))?>")
_VARIABLE = re.compile(r"\$\{[^}]+\}")
_UNKNOWN_CONDITION = re.compile(r"Unknown condition (\S+) for action (\w[\w-]*):(\w+)$")


def documents(resources: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(where, kind, document) for every policy document in the rendered resources: kind is
    "identity" (a role's inline policies, managed and role policies), "trust" (a role's
    trust policy) or "resource" (a queue's, bucket's, topic's or key's own policy)."""
    found = []
    for name, res in resources.items():
        props, kind = res.get("Properties", {}), res["Type"]
        if kind == "AWS::IAM::Role":
            found.append((f"{name} trust", "trust", props["AssumeRolePolicyDocument"]))
            for p in props.get("Policies", []):
                found.append((f"{name} {p['PolicyName']}", "identity", p["PolicyDocument"]))
        elif kind in ("AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy", "AWS::IAM::Policy"):
            found.append((name, "identity", props["PolicyDocument"]))
        elif kind in ("AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy", "AWS::S3::BucketPolicy"):
            found.append((name, "resource", props["PolicyDocument"]))
        elif kind == "AWS::KMS::Key" and "KeyPolicy" in props:
            found.append((name, "resource", props["KeyPolicy"]))
    return found


def concrete(document: dict[str, Any], resources: dict[str, Any]) -> str:
    """The document as JSON, each `<LogicalId>` and `<LogicalId.Arn>` made a plausible value."""

    def one(m: re.Match[str]) -> str:
        name, attr = m.group(1), m.group(2)
        if attr is None or name not in resources:
            return name.lower()
        assert attr == "Arn", f"no stand-in for {m.group(0)}"
        return _ARN_OF_TYPE[resources[name]["Type"]].format(name.lower())

    return _PLACEHOLDER.sub(one, json.dumps(document))


def _resource_type_key(detail: Any) -> bool:
    """Whether parliament's UNKNOWN_CONDITION_FOR_ACTION names a key that the action's own
    resource type carries, by parliament's own definitions."""
    from parliament import iam_definition

    m = _UNKNOWN_CONDITION.match(str(detail))
    if m is None:
        return False
    key, prefix, action = m.groups()
    (service,) = [s for s in iam_definition if s["prefix"] == prefix]
    (privilege,) = [p for p in service["privileges"] if p["privilege"] == action]
    types = {t["resource_type"].rstrip("*") for t in privilege["resource_types"]}
    return any(key in r["condition_keys"] for r in service["resources"] if r["resource"] in types)


def problems(resources: dict[str, Any]) -> list[str]:
    """What IAM (moto's validator) or parliament finds wrong, one line each."""
    from parliament import analyze_policy_string

    from tests.support.iam import as_list, variable_before_fifth_colon

    out = []
    for where, kind, document in documents(resources):
        text = concrete(document, resources)
        is_trust = kind == "trust"
        validator = IAMTrustPolicyDocumentValidator if is_trust else IAMPolicyDocumentValidator
        try:
            validator(text).validate()
        except MalformedPolicyDocument as e:
            out.append(f"{where}: IAM: {e.message}")
        for st in as_list(document["Statement"]):
            for arn in as_list(st.get("Resource", [])) + as_list(st.get("NotResource", [])):
                if variable_before_fifth_colon(str(arn)):
                    out.append(f"{where}: IAM: a policy variable before the fifth colon: {arn}")
        if kind != "identity":
            continue  # parliament reads identity policies (it knows no principal's grammar)
        for f in analyze_policy_string(_VARIABLE.sub("VARIABLE", text)).findings:
            if f.issue == "UNKNOWN_CONDITION_FOR_ACTION" and _resource_type_key(f.detail):
                continue
            out.append(f"{where}: parliament: {f.issue} {f.detail} {f.location}")
    return out


def check(resources: dict[str, Any]) -> None:
    found = problems(resources)
    assert not found, "IAM would refuse these policies:\n" + "\n".join(found)
