"""The Dramatiq tests' app (tests/integration/dramatiq_app.py), as its publisher loads it: the
app reads the broker's endpoint and namespace, the file its actors write to, and sqsdelay's
settings (SQSDELAY_*) from the environment when it is imported, and builds its broker then."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType

APP = "tests.integration.dramatiq_app"


def app_variables(namespace: str, endpoint: str, out: Path) -> dict[str, str]:
    """The variables the app reads besides sqsdelay's (its worker process needs them too)."""
    return {
        "DRAMATIQ_TEST_NAMESPACE": namespace,
        "DRAMATIQ_TEST_ENDPOINT": endpoint,
        "DRAMATIQ_TEST_OUT": str(out),
    }


@contextlib.contextmanager
def imported_app(variables: Mapping[str, str]) -> Iterator[ModuleType]:
    """The app imported afresh (a new broker, set as Dramatiq's global one) with `variables`
    in this process's environment while it is in use; the environment is restored after."""
    saved = {k: os.environ.get(k) for k in variables}
    os.environ.update(variables)
    try:
        sys.modules.pop(APP, None)
        yield importlib.import_module(APP)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
