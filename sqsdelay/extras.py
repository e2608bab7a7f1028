"""The optional extras and the one way a command says it needs one."""

from __future__ import annotations

import sys
from importlib.util import find_spec

from sqsdelay.errors import ConfigError

# what each extra brings that a command imports (pyproject.toml's optional-dependencies)
EXTRAS: dict[str, tuple[str, ...]] = {
    "emulator": ("moto",),
    "spark": ("pyspark", "pandas", "matplotlib"),
    "celery": ("celery", "kombu", "pycurl"),
    "dramatiq": ("dramatiq", "dramatiq_sqs"),
    "console": ("starlette", "uvicorn", "jinja2", "multipart"),
    "taskiq": ("taskiq", "taskiq_aio_sqs"),
}


class MissingExtra(ConfigError):
    """A command needs an extra that is not installed (exit 2: nothing was done)."""


def require(extra: str, what: str) -> None:
    """Raise `MissingExtra`, naming the pip command, if `extra`'s modules are missing."""
    # A module already imported counts (kombu and celery replace theirs: no __spec__).
    missing = [m for m in EXTRAS[extra] if m not in sys.modules and find_spec(m) is None]
    if missing:
        raise MissingExtra(f"{what} needs {', '.join(missing)}: pip install 'sqsdelay[{extra}]'")
