"""Helpers for the console's tests: Debian's Chromium through Playwright, and a `sqsdelay
console` process on a free port."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.conftest import wait_for

# Debian's Chromium, as the cost report's layout test finds it (.ci/run installs it as root);
# Playwright's own browser download is not used (nothing is downloaded: executable_path).
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _playwright() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return True


needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or not _playwright(),
    reason="Chromium (apt install chromium) and playwright (make test installs it) needed",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def status_of(url: str, **headers: str) -> int:
    """The HTTP status of a GET, redirects not followed."""
    return int(requests.get(url, headers=headers, allow_redirects=False, timeout=10).status_code)


@contextlib.contextmanager
def console_process(env: dict[str, str], *args: str) -> Iterator[str]:
    """`sqsdelay console --port P ARGS` until the block ends; yields its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # stderr to a file, not a pipe: a full pipe would block the console
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sqsdelay", "console", "--port", str(port), *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        try:

            def answering() -> bool:
                if proc.poll() is not None:
                    errors.seek(0)
                    raise AssertionError(f"the console exited: {errors.read().decode()[-2000:]}")
                try:
                    return status_of(url + "/signin") > 0
                except requests.ConnectionError:
                    return False

            wait_for(answering, timeout=30, interval=0.1)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    """A headless Chromium (Debian's) at 1280x800."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def fits_1280(page: Any) -> bool:
    """No horizontal scrolling at 1280 px."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= 1280"))
