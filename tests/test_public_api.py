"""The package's public names (issue 60, 4): each in `sqsdelay.__all__`, importable from the
package and identical to the one its own module documents; `import sqsdelay` alone stays
light (nothing is imported until a name is used)."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import subprocess
import sys
from types import ModuleType

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


# Old names kept one release (docs/architecture.md, "One public API"), outside every
# __all__; each warns when used (tests/integration/test_consumer.py shows each still works).
DEPRECATED = {"sqsdelay": {"aretry_later"}, "sqsdelay.consumer": {"aretry_later"}}


def _public_names(module: ModuleType) -> set[str]:
    """The names a reader of `module` would take for its API: no leading underscore, and
    sqsdelay's own (a class or function of the package, or a constant), not a module or a
    name imported from elsewhere (`Any`, `contextmanager`)."""
    found = set()
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, ModuleType):
            continue
        home = getattr(value, "__module__", None)
        constant = type(value) in (int, float, str, bytes, tuple, frozenset)
        if constant or (isinstance(home, str) and home.startswith("sqsdelay")):
            found.add(name)
    return found


@pytest.mark.parametrize("module", ["sqsdelay", "sqsdelay.consumer", "sqsdelay.sender"])
def test_no_public_name_outside_all(module: str) -> None:
    loaded = importlib.import_module(module)
    if module == "sqsdelay":  # each name is loaded on first use: load them all
        for name in loaded.__all__:
            getattr(loaded, name)
    outside = _public_names(loaded) - set(loaded.__all__) - DEPRECATED.get(module, set())
    assert not outside, f"{module}: public names not in __all__: {sorted(outside)}"


def test_the_deprecated_names_stay_out_of_all_and_dir() -> None:
    assert set(sqsdelay._DEPRECATED) == DEPRECATED["sqsdelay"]
    for name in DEPRECATED["sqsdelay"]:
        assert name not in sqsdelay.__all__ and name not in dir(sqsdelay)
        assert getattr(sqsdelay, name) is getattr(
            importlib.import_module("sqsdelay.consumer"), name
        )


def test_aretry_later_warns_naming_async_retry_later() -> None:
    from sqsdelay.errors import InvalidInput

    async def caller() -> object:  # the line a warning points at: this await
        return await sqsdelay.aretry_later({"not": "a message"}, sender=None)  # type: ignore[arg-type]

    expected = "use sqsdelay.consumer.async_retry_later"
    with (
        pytest.warns(DeprecationWarning, match=expected) as seen,
        pytest.raises(InvalidInput),  # a message of no known shape: nothing is sent
    ):
        asyncio.run(caller())
    assert seen.list[0].filename == __file__


def test_retry_policy_aretry_warns_naming_async_retry_policy() -> None:
    from sqsdelay.errors import InvalidInput

    policy = sqsdelay.RetryPolicy()
    expected = r"RetryPolicy.aretry is deprecated.*AsyncRetryPolicy"
    with pytest.warns(DeprecationWarning, match=expected), pytest.raises(InvalidInput):
        asyncio.run(policy.aretry({"not": "a message"}, "why", sender=None))  # type: ignore[arg-type]


def test_async_twins_are_named_one_way() -> None:
    """An async twin is `Async<Name>` or `async_<name>`; nothing public has an `a` prefix
    (but the deprecated `RetryPolicy.aretry`)."""
    for name in sqsdelay.__all__:
        assert not (name.startswith("a") and name[1:] in sqsdelay.__all__), name
        if name.startswith("Async"):
            assert name.removeprefix("Async") in sqsdelay.__all__, name
        if name.startswith("async_"):
            assert name.removeprefix("async_") in sqsdelay.__all__, name
        value = getattr(sqsdelay, name)
        if isinstance(value, type) and not name.startswith("Async"):
            coroutines = [
                m
                for m, f in vars(value).items()
                if not m.startswith("_") and inspect.iscoroutinefunction(f) and m != "aretry"
            ]
            assert not coroutines, f"{name} (a sync class) has coroutine methods {coroutines}"
        if isinstance(value, type):
            members = {m for m in dir(value) if not m.startswith("_")} - {"aretry"}
            prefixed = sorted(m for m in members if m.startswith("a") and m[1:] in members)
            assert not prefixed, f"{name}: {prefixed}"
