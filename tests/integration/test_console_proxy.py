"""The console behind a reverse proxy that terminates TLS (Debian's nginx, connecting from
another loopback address, as a proxy on another host would), in Debian's Chromium: signing
in and acting, with the settings and the flag as docs/console.md writes them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from sqsdelay.aws.sender import Sender
from sqsdelay.settings import Settings
from tests.conftest import wait_for
from tests.support.console import (
    browser,
    console_process,
    free_port,
    needs_chromium,
    needs_nginx,
    tls_proxy,
)

pytestmark = [needs_chromium, needs_nginx, pytest.mark.slow]

NAME = "console.example.test"  # Chromium resolves it to 127.0.0.1 (--host-resolver-rules)
PROXY_FROM = "127.0.0.2"  # nginx connects from here: not trusted unless listed
TOKEN = "a-console-token-behind-a-proxy-0123"


@dataclass
class Stack:
    settings: Settings
    env: dict[str, str]
    log: Path

    def events(self, name: str) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [e for e in map(json.loads, lines) if e.get("event") == name]

    def state(self, message_id: str) -> str:
        records = Sender(self.settings).scheduled("orders", state=None, limit=50)
        return next(r.state for r in records if r.message_id == message_id)


@pytest.fixture(scope="module")
def stack(moto_url: str, tmp_path_factory: pytest.TempPathFactory) -> Stack:
    prefix = f"x{uuid.uuid4().hex[:8]}-"
    log = tmp_path_factory.mktemp("proxy") / "events.jsonl"
    common = {
        "endpoint_url": moto_url,
        "region": "us-east-1",
        "queue_prefix": prefix,
        "error_queue": f"{prefix}error",
        "registry": "dynamodb",
        "registry_table": f"{prefix}scheduled",
    }
    env = {
        **os.environ,
        **{f"SQSDELAY_{k.upper()}": v for k, v in common.items()},
        "SQSDELAY_LOG_FILE": str(log),
        "SQSDELAY_CONSOLE_TOKEN": TOKEN,
    }
    installed = subprocess.run(
        [sys.executable, "-m", "sqsdelay", "install", "orders"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    settings = Settings(**common)
    sender = Sender(settings)
    for i in range(3):
        sender.send("orders", "x", delay=3600 + i, id=f"m-{i}")
    return Stack(settings, env, log)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser(f"--host-resolver-rules=MAP {NAME} 127.0.0.1") as b:
        yield b


def test_signing_in_and_acting_through_a_tls_proxy_in_the_browser(
    stack: Stack, chromium: Any, tmp_path: Path
) -> None:
    """The public origin and the proxy's address as settings (SQSDELAY_CONSOLE_*), the
    console bound to loopback: the proxy's Host is served, the browser's Origin matches,
    the cookie is Secure, and the client's address is the browser's, not the proxy's."""
    env = dict(stack.env)
    console_port = free_port()
    with tls_proxy(tmp_path, console_port, NAME, bind_from=PROXY_FROM) as port:
        origin = f"https://{NAME}:{port}"
        env["SQSDELAY_CONSOLE_PUBLIC_ORIGIN"] = origin
        env["SQSDELAY_CONSOLE_FORWARDED_ALLOW_IPS"] = PROXY_FROM
        with console_process(env, port=console_port):
            context = chromium.new_context(
                viewport={"width": 1280, "height": 800}, ignore_https_errors=True
            )
            page = context.new_page()
            page.goto(f"{origin}/scheduled")
            assert page.url == f"{origin}/signin"
            page.fill("input[name=token]", "not-the-token-at-all-000")
            page.click("form.signin button")
            assert "not valid" in page.locator(".error").inner_text()
            page.fill("input[name=token]", TOKEN)
            page.click("form.signin button")
            assert page.url == f"{origin}/scheduled"
            [cookie] = context.cookies()
            assert cookie["name"] == f"sqsdelay_console_{port}"
            assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            # an action: cancel one selected, its outcome on the page
            page.locator("tr[data-id='m-1'] input[type=checkbox]").check()
            with page.expect_response(re.compile(r".*/actions/cancel")) as answer:
                page.click("#cancel-selected")
            assert answer.value.status == 200
            wait_for(lambda: "cancelled" in page.locator("#outcomes").inner_text(), timeout=15)
            context.close()
    assert stack.state("m-1") == "cancelled" and stack.state("m-0") == "scheduled"
    # the wrong token was logged with the browser's address (X-Forwarded-For, believed
    # from the proxy's), never the token
    [refused] = stack.events("console.token_refused")
    assert refused["client"] == "127.0.0.1"
    assert "not-the-token-at-all" not in stack.log.read_text()
    assert TOKEN not in stack.log.read_text()
    [action] = [e for e in stack.events("console.action") if e["message_ids"] == ["m-1"]]
    assert action["who"] == "token"


def signin_through(proxy_port: int, cert: Path) -> requests.Response:
    """A sign-in as a browser at https://NAME:PORT sends it, through the proxy (its
    self-signed certificate names 127.0.0.1 too)."""
    public = f"{NAME}:{proxy_port}"
    return requests.post(
        f"https://127.0.0.1:{proxy_port}/signin",
        data={"token": TOKEN},
        headers={"Host": public, "Origin": f"https://{public}", "Sec-Fetch-Site": "same-origin"},
        allow_redirects=False,
        verify=str(cert),
        timeout=10,
    )


def test_without_a_public_origin_the_forwarded_scheme_is_believed_only_from_listed_proxies(
    stack: Stack, tmp_path: Path
) -> None:
    """`sqsdelay console --forwarded-allow-ips` (the flag, as docs/console.md writes it): the
    proxy's X-Forwarded-Proto makes the request https, so the browser's https Origin
    matches and the cookie is Secure; from an unlisted proxy the scheme stays http and the
    sign-in is refused (what every team behind a load balancer saw)."""
    for allowed, status in ((PROXY_FROM, 303), ("127.0.0.1", 403)):
        console_port = free_port()
        folder = tmp_path / allowed
        folder.mkdir()
        with (
            tls_proxy(folder, console_port, NAME, bind_from=PROXY_FROM) as port,
            console_process(
                stack.env,
                "--host",
                "0.0.0.0",
                "--forwarded-allow-ips",
                allowed,
                port=console_port,
            ),
        ):
            answer = signin_through(port, folder / "cert.pem")
        assert answer.status_code == status, (allowed, answer.text)
        if status == 303:
            assert "Secure" in answer.headers["set-cookie"]
