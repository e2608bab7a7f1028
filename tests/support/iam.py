"""A small offline IAM evaluator for the templates' roles, for the tests (moto enforces no IAM).

It reads a rendered role's policy statements (inline `Policies` and `AWS::IAM::RolePolicy`
resources), resolves the policy variables the templates use (`${aws:PrincipalTag/KEY}`, from
the role's own tags) and answers whether a request is allowed: an explicit Deny wins, then
any Allow whose action, resource (IAM's `*` and `?` wildcards) and conditions match. A
condition key the request does not carry fails the statement, as in IAM; an operator or a
policy variable it does not know fails the test instead of being guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

_VARIABLE = re.compile(r"\$\{([^}]+)\}")


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _wildcard(pattern: str, value: str) -> bool:
    # IAM's wildcards are * and ?; fnmatch's [ ] classes never occur in an ARN pattern.
    assert "[" not in pattern, pattern
    return fnmatchcase(value, pattern)


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: dict[str, Any] = field(default_factory=dict)  # condition keys -> value(s)


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
    return [_resolve(st, tags) for st in statements]


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
            if key not in context:
                return False
            wanted = [str(x) for x in as_list(expected)]
            given = [str(x) for x in as_list(context[key])]
            if operator in ("StringEquals", "ArnEquals", "Bool"):
                ok = all(g in wanted for g in given) and len(given) == 1
            elif operator in ("StringLike", "ArnLike"):
                ok = len(given) == 1 and any(_wildcard(w, given[0]) for w in wanted)
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
    if not any(_wildcard(str(r), request.resource) for r in as_list(st["Resource"])):
        return False
    return _condition_holds(st.get("Condition", {}), request.context)


def allows(statements: list[dict[str, Any]], request: Request) -> bool:
    if any(st["Effect"] == "Deny" and _matches(st, request) for st in statements):
        return False
    return any(st["Effect"] == "Allow" and _matches(st, request) for st in statements)


def denied(statements: list[dict[str, Any]], requests: list[Request]) -> list[Request]:
    """The requests these statements do not allow (what a test wants empty)."""
    return [r for r in requests if not allows(statements, r)]
