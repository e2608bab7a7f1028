"""CloudFormation's parameter constraints, checked as CloudFormation checks them before it
creates anything (moto ignores them): AllowedPattern (the whole value), MinLength and
MaxLength, MinValue and MaxValue, AllowedValues; each member of a CommaDelimitedList."""

from __future__ import annotations

import re
from typing import Any


def refused(template: dict[str, Any], params: dict[str, Any]) -> list[str]:
    """The parameters whose given value the template's constraints refuse."""
    out = []
    for name, spec in template["Parameters"].items():
        if name not in params:
            continue
        value = params[name]
        if spec.get("Type") == "CommaDelimitedList":
            values = value.split(",") if isinstance(value, str) else list(value)
        elif isinstance(value, list):
            values = [str(v) for v in value]
        else:
            values = [str(value)]
        if not all(_accepts(spec, v) for v in values):
            out.append(name)
    return out


def _accepts(spec: dict[str, Any], value: str) -> bool:
    if "AllowedPattern" in spec and re.fullmatch(spec["AllowedPattern"], value) is None:
        return False
    if not spec.get("MinLength", 0) <= len(value) <= spec.get("MaxLength", len(value)):
        return False
    if "AllowedValues" in spec and value not in [str(v) for v in spec["AllowedValues"]]:
        return False
    if spec.get("Type") == "Number":
        try:
            number = float(value)
        except ValueError:
            return False
        if not spec.get("MinValue", number) <= number <= spec.get("MaxValue", number):
            return False
    return True
