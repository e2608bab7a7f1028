"""The package's public names (issue 60, 4): each in `sqsdelay.__all__`, importable from the
package and identical to the one its own module documents; `import sqsdelay` alone stays
light (nothing is imported until a name is used)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import sqsdelay


@pytest.mark.parametrize("name", sqsdelay.__all__)
def test_every_public_name_is_its_homes(name: str) -> None:
    home = importlib.import_module(sqsdelay._HOMES[name])
    assert getattr(sqsdelay, name) is getattr(home, name)
    assert name in dir(sqsdelay)


def test_the_modules_public_names_are_the_packages() -> None:
    """A name a public module exports is exported by the package too (one API, two paths)."""
    for module in ("sqsdelay.sender", "sqsdelay.consumer"):
        exported = set(importlib.import_module(module).__all__)
        # the consumer's constants and helpers of the Powertools recipe stay in their module
        kept = {
            "DEFAULT_EXPIRES_AFTER_SECONDS",
            "DEFAULT_IN_PROGRESS_SECONDS",
            "POWERTOOLS_KEY_JMESPATH",
            "GuardError",  # from sqsdelay.errors, its home
            "GuardInProgress",
            "GuardTableMissing",
            "powertools_config",
            "traced",
            "plan",
        }
        assert exported - kept <= set(sqsdelay.__all__), module


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        sqsdelay.Nope  # noqa: B018


def test_import_sqsdelay_loads_no_sdk() -> None:
    code = (
        "import sys, sqsdelay; "
        "print(sorted(m for m in ('boto3', 'botocore', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_all_is_every_name_with_a_home() -> None:
    assert sqsdelay.__all__ == sorted(sqsdelay._HOMES)
