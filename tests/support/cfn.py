"""Reading the CloudFormation templates in infra/ as CloudFormation would, for the tests.

`load` reads the YAML short forms (!Ref, !Sub, ...) into their long forms; `render` expands
`Fn::ForEach` (AWS::LanguageExtensions), evaluates conditions and resolves the intrinsic
functions the templates use, with given parameters and pseudo parameters. A function the
renderer does not know fails the test instead of being guessed. Every policy document a
render gives is checked as IAM would check it (tests/support/iam_grammar.py).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from tests.support import iam_grammar

INFRA = Path(__file__).resolve().parents[2] / "infra"
ACCOUNT, REGION, PARTITION = "123456789012", "us-east-1", "aws"  # moto's defaults


class _Loader(yaml.SafeLoader):
    pass


def _tag(name: str) -> None:
    long = name if name in ("Ref", "Condition") else f"Fn::{name}"

    def construct(loader: yaml.Loader, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if name == "GetAtt":
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
        return {long: value}

    _Loader.add_constructor(f"!{name}", construct)


for _name in ("Ref", "Sub", "Join", "Select", "Split", "If", "Equals", "Not", "GetAtt", "And",
              "Condition"):  # fmt: skip
    _tag(_name)


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.load((INFRA / name).read_text(), Loader=_Loader)  # noqa: S506
    return data


def defaults(template: dict[str, Any]) -> dict[str, Any]:
    return {k: v["Default"] for k, v in template["Parameters"].items() if "Default" in v}


class _NoValue:
    pass


NO_VALUE = _NoValue()


class Renderer:
    def __init__(self, template: dict[str, Any], params: dict[str, Any]) -> None:
        self.template = template
        self.params = {**defaults(template), **params}
        for key, spec in template["Parameters"].items():
            assert key in self.params, f"parameter {key} has no value"
            if spec.get("Type") == "CommaDelimitedList" and isinstance(self.params[key], str):
                self.params[key] = self.params[key].split(",")
        self.pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": PARTITION,
            "AWS::StackName": "stack",
            "AWS::NoValue": NO_VALUE,
        }
        self.conditions: dict[str, bool] = {}
        for key, expr in template.get("Conditions", {}).items():
            self.conditions[key] = bool(self.value(expr))

    def broken_rules(self) -> list[str]:
        """The AssertDescription of every rule assertion that fails with these parameters, as
        CloudFormation checks them before it creates anything."""
        broken = []
        for rule in self.template.get("Rules", {}).values():
            if "RuleCondition" in rule and not self.value(rule["RuleCondition"]):
                continue
            broken += [
                a["AssertDescription"] for a in rule["Assertions"] if not self.value(a["Assert"])
            ]
        return broken

    def ref(self, name: str) -> Any:
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.params:
            return self.params[name]
        return f"<{name}>"  # a resource: its physical id is not known before deployment

    def sub(self, text: str, extra: dict[str, Any]) -> str:
        def one(m: re.Match[str]) -> str:
            key = m.group(1)
            if key in extra:
                return str(extra[key])
            if "." in key:
                return f"<{key}>"
            return str(self.ref(key))

        return re.sub(r"\$\{([A-Za-z0-9_:.]+)\}", one, text)

    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            out = [self.value(x) for x in node]
            return [x for x in out if x is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::Sub":
                text, extra = (arg, {}) if isinstance(arg, str) else arg
                return self.sub(text, {k: self.value(v) for k, v in extra.items()})
            if key == "Fn::Join":
                return arg[0].join(str(x) for x in self.value(arg[1]))
            if key == "Fn::Select":
                return self.value(arg[1])[int(self.value(arg[0]))]
            if key == "Fn::Split":
                return str(self.value(arg[1])).split(arg[0])
            if key == "Fn::If":
                return self.value(arg[1] if self.conditions[arg[0]] else arg[2])
            if key == "Fn::Equals":
                return str(self.value(arg[0])) == str(self.value(arg[1]))
            if key == "Fn::Not":
                return not self.value(arg[0])
            if key == "Fn::And":
                return all(self.value(a) for a in arg)
            if key == "Fn::Or":
                return any(self.value(a) for a in arg)
            if key == "Fn::Contains":  # rules only: a list holds a string
                return str(self.value(arg[1])) in [str(x) for x in self.value(arg[0])]
            if key == "Condition":
                return self.conditions[arg]
            if key == "Fn::GetAtt":
                return f"<{arg[0]}.{arg[1]}>"
            assert not key.startswith("Fn::"), f"the test renderer does not know {key}"
        out = {k: self.value(v) for k, v in node.items()}
        return {k: v for k, v in out.items() if v is not NO_VALUE}

    def resources(self) -> dict[str, Any]:
        """Resources after Fn::ForEach and conditions, with every value resolved."""
        expanded: dict[str, Any] = {}
        for key, body in self.template["Resources"].items():
            if key.startswith("Fn::ForEach::"):
                ident, collection, templates = body
                for item in self.value(collection):
                    for name_t, res in templates.items():
                        name = name_t.replace(f"&{{{ident}}}", re.sub(r"\W", "", item))
                        expanded[name] = _replace(copy.deepcopy(res), ident, item)
            else:
                expanded[key] = body
        rendered = {
            k: {**v, "Properties": self.value(v.get("Properties", {}))}
            for k, v in expanded.items()
            if "Condition" not in v or self.conditions[v["Condition"]]
        }
        iam_grammar.check(rendered)  # a policy IAM would refuse fails the test rendering it
        return rendered


def _replace(node: Any, ident: str, item: str) -> Any:
    """Fn::ForEach: the identifier as ${Ident} in Fn::Sub strings and as a bare Ref."""
    if isinstance(node, str):
        return node.replace(f"${{{ident}}}", item)
    if isinstance(node, list):
        return [_replace(x, ident, item) for x in node]
    if isinstance(node, dict):
        if node == {"Ref": ident}:
            return item
        return {k: _replace(v, ident, item) for k, v in node.items()}
    return node


def sqs_arn(queue: str) -> str:
    return f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{queue}"
