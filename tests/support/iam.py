"""A small offline IAM evaluator for the templates' roles, for the tests (moto enforces no IAM).

It reads a rendered role's policy statements (inline `Policies` and `AWS::IAM::RolePolicy`
resources), resolves the policy variables the templates use (`${aws:PrincipalTag/KEY}`, from
the role's own tags) and answers whether a request is allowed: an explicit Deny wins, then
any Allow whose action, resource and conditions match. It is no kinder than IAM where the
templates could rely on it:

- a policy variable in a `Resource` stands only in the resource part of an ARN, after its
  fifth colon (IAM refuses the policy otherwise: `MalformedPolicyDocument`), and this
  evaluator refuses it too;
- ARNs (`Resource`, `ArnLike`, `ArnEquals`) match component by component: a `*` or `?` in
  the partition, service, Region or account never crosses a colon (in a `Resource`, a `*`
  that ends a component may, as IAM documents); the resource part matches as a whole;
- a condition key the request does not carry fails the statement, except under
  `ForAllValues:` (true for an absent key or an empty set, as in IAM: what `Null` is for).

An operator or a policy variable it does not know fails the test instead of being guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

_VARIABLE = re.compile(r"\$\{([^}]+)\}")
_RESOURCE_KEYS = ("Resource", "NotResource")


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _wildcard(pattern: str, value: str) -> bool:
    # IAM's wildcards are * and ?; fnmatch's [ ] classes never occur in an ARN pattern.
    assert "[" not in pattern, pattern
    return fnmatchcase(value, pattern)


def variable_before_fifth_colon(resource: str) -> bool:
    """Whether a Resource entry has a policy variable where IAM refuses one: anywhere before
    the ARN's resource part (IAM User Guide, "Where you can use policy variables")."""
    first = resource.find("${")
    return first != -1 and resource.count(":", 0, first) < 5


def arn_matches(pattern: str, arn: str, *, resource_element: bool = False) -> bool:
    """IAM's ARN matching: the first five components (arn, partition, service, Region,
    account) each on their own, where `*` and `?` never cross a colon, then the resource
    part as a whole (its own colons and slashes included). In a `Resource` element a `*`
    ending one of the first five components may run on past the colon, as IAM documents."""
    if pattern == "*" and resource_element:
        return True
    if not pattern.startswith("arn:") or not arn.startswith("arn:"):
        return pattern == arn if "*" not in pattern else _wildcard(pattern, arn)
    parts = pattern.split(":", 5)
    regex = []
    for i, part in enumerate(parts):
        out = ""
        for j, ch in enumerate(part):
            if ch == "*":
                free = i == 5 or (resource_element and j == len(part) - 1)
                out += ".*" if free else "[^:]*"
            elif ch == "?":
                out += "." if i == 5 else "[^:]"
            else:
                out += re.escape(ch)
        regex.append(out)
    return re.fullmatch(":".join(regex), arn, re.DOTALL) is not None


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: dict[str, Any] = field(default_factory=dict)  # condition keys -> value(s)


def sqs_call(action: str, arn: str) -> Request:
    """An SQS call on the queue `arn`, with the keys IAM puts in every SQS request's context:
    the queue's owner and the Region of the endpoint called (the queue's own: SQS answers for
    a queue only at its Region's endpoint)."""
    _, _, _, region, account, _ = arn.split(":", 5)
    return Request(action, arn, {"aws:ResourceAccount": account, "aws:RequestedRegion": region})


def role_statements(resources: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """Every statement of the role `role` (a logical id), policy variables resolved."""
    props = resources[role]["Properties"]
    tags = {t["Key"]: str(t["Value"]) for t in props.get("Tags", [])}
    statements: list[dict[str, Any]] = []
    for policy in props.get("Policies", []):
        statements += policy["PolicyDocument"]["Statement"]
    for res in resources.values():
        p = res["Properties"]
        if res["Type"] == "AWS::IAM::RolePolicy" and p["RoleName"] == f"<{role}>":
            statements += p["PolicyDocument"]["Statement"]
    for st in statements:
        refused(st)
    return [_resolve(st, tags) for st in statements]


def refused(statement: dict[str, Any]) -> None:
    """Fails as IAM fails the whole policy: a policy variable before an ARN's fifth colon."""
    for key in _RESOURCE_KEYS:
        for resource in as_list(statement.get(key, [])):
            assert not variable_before_fifth_colon(str(resource)), (
                f"IAM refuses a policy variable before the fifth colon of {resource!r} "
                "(MalformedPolicyDocument): only the resource part may hold one"
            )


def _resolve(node: Any, tags: dict[str, str]) -> Any:
    if isinstance(node, str):

        def one(m: re.Match[str]) -> str:
            name = m.group(1)
            assert name.startswith("aws:PrincipalTag/"), f"unknown policy variable {name}"
            return tags[name.removeprefix("aws:PrincipalTag/")]

        return _VARIABLE.sub(one, node)
    if isinstance(node, list):
        return [_resolve(x, tags) for x in node]
    if isinstance(node, dict):
        return {k: _resolve(v, tags) for k, v in node.items()}
    return node


def _condition_holds(condition: dict[str, Any], context: dict[str, Any]) -> bool:
    for operator, tests in condition.items():
        for key, expected in tests.items():
            wanted = [str(x) for x in as_list(expected)]
            if operator == "Null":
                ok = all((key not in context) == (w == "true") for w in wanted)
                if not ok:
                    return False
                continue
            if key not in context or as_list(context[key]) == []:
                # ForAllValues over no values is true; every other test of an absent key fails
                if operator.startswith("ForAllValues:"):
                    continue
                return False
            given = [str(x) for x in as_list(context[key])]
            if operator in ("StringEquals", "Bool"):
                ok = all(g in wanted for g in given) and len(given) == 1
            elif operator == "StringLike":
                ok = len(given) == 1 and any(_wildcard(w, given[0]) for w in wanted)
            elif operator in ("ArnEquals", "ArnLike"):
                ok = len(given) == 1 and any(arn_matches(w, given[0]) for w in wanted)
            elif operator == "ForAllValues:StringLike":
                ok = all(any(_wildcard(w, g) for w in wanted) for g in given)
            elif operator == "ForAnyValue:StringEquals":
                ok = any(g in wanted for g in given)
            else:
                raise AssertionError(f"the evaluator does not know {operator}")
            if not ok:
                return False
    return True


def _matches(st: dict[str, Any], request: Request) -> bool:
    actions = as_list(st["Action"])
    if not any(_wildcard(a.lower(), request.action.lower()) for a in actions):
        return False
    resources = as_list(st["Resource"])
    if not any(arn_matches(str(r), request.resource, resource_element=True) for r in resources):
        return False
    return _condition_holds(st.get("Condition", {}), request.context)


def allows(statements: list[dict[str, Any]], request: Request) -> bool:
    if any(st["Effect"] == "Deny" and _matches(st, request) for st in statements):
        return False
    return any(st["Effect"] == "Allow" and _matches(st, request) for st in statements)


def denied(statements: list[dict[str, Any]], requests: list[Request]) -> list[Request]:
    """The requests these statements do not allow (what a test wants empty)."""
    return [r for r in requests if not allows(statements, r)]
