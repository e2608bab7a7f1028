"""The console's guards over HTTP, on a real uvicorn with a stand-in for the AWS side (no
emulator: what is checked here is what the application answers before and around its
calls): cross-site requests on every route, dead letters listed only when asked, the
body's and the form's bounds, sessions, tokens and their throttle, unreadable due times,
the public origin behind a proxy."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from sqsdelay.console import auth
from sqsdelay.console.app import MAX_BODY_BYTES, create_app
from sqsdelay.console.auth import Sessions, Tokens
from sqsdelay.console.service import ActionResult
from sqsdelay.core import registry
from sqsdelay.core.parked import ParkedList, ParkedMessage
from sqsdelay.core.registry_pages import Page
from tests.support.console import app_served
from tests.support.logs import capture_logs, logged

TOKEN = "a-console-token-for-tests-0123456789"
NOW_MS = 1_900_000_000_000
HUGE_MS = 10**20  # an out-of-range sqsdelay.DueAt / due_ms (year > 9999)


@dataclass
class FakeService:
    """What `create_app` calls of `ConsoleService`, recorded."""

    registry_on: bool = True
    read_only: bool = False
    records: list[registry.Record] = field(default_factory=list)
    parked_list: ParkedList | None = None
    listed: int = 0  # dead_letters() calls: each would receive the error queue's messages
    refusals: list[str] = field(default_factory=list)

    def destinations(self) -> list[str]:
        return ["orders"]

    def known(self, destination: str) -> str:
        return destination

    def query(self, destination: str, filters: Any) -> Any:
        return destination

    def page(self, query: Any, token: str | None) -> tuple[Page, str | None]:
        return Page(self.records, None, 1), None

    def parked(self, destination: str) -> ParkedList | None:
        return self.parked_list

    def dead_letters(self, destination: str) -> list[Any]:
        self.listed += 1
        return []

    def cancel(self, who: str, destination: str, ids: list[str]) -> list[ActionResult]:
        return [ActionResult(i, "cancelled") for i in ids]

    def health(self, destinations: list[str]) -> Any:
        raise AssertionError("not used here")

    def refused(self, who: str, action: str, reason: str, **fields: Any) -> None:
        self.refusals.append(reason)


def record(message_id: str, due_ms: int) -> registry.Record:
    return registry.Record("orders", message_id, due_ms, "scheduled", "delay-queue")


@pytest.fixture
def fake() -> FakeService:
    return FakeService(records=[record("m-ok", NOW_MS)])


@pytest.fixture
def local_url(fake: FakeService) -> Iterator[str]:
    """A console without tokens (loopback)."""
    with app_served(create_app(fake, Tokens())) as url:  # type: ignore[arg-type]
        yield url


@pytest.fixture
def token_url(fake: FakeService) -> Iterator[str]:
    with app_served(create_app(fake, auth.load_tokens(TOKEN, None))) as url:  # type: ignore[arg-type]
        yield url


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found is not None, html[:500]
    return found.group(1)


@pytest.mark.parametrize(
    "path", ["/", "/scheduled", "/dead-letters", "/health", "/signin", "/static/console.css"]
)
@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_another_site_is_refused_on_every_route(
    local_url: str, fake: FakeService, path: str, site: str
) -> None:
    answer = requests.get(local_url + path, headers={"Sec-Fetch-Site": site}, timeout=10)
    assert answer.status_code == 403, (path, answer.status_code)
    assert "another site" in answer.text and "set-cookie" not in answer.headers
    assert fake.listed == 0


@pytest.mark.parametrize("site", ["same-origin", "none", None])
def test_the_console_itself_a_typed_address_and_scripts_are_served(
    local_url: str, site: str | None
) -> None:
    headers = {"Sec-Fetch-Site": site} if site else {}
    for path in ("/scheduled", "/dead-letters", "/static/console.css"):
        answer = requests.get(local_url + path, headers=headers, timeout=10)
        assert answer.status_code == 200, (path, site)


def test_loading_the_dead_letters_page_receives_nothing_only_the_list_action_does(
    local_url: str, fake: FakeService
) -> None:
    s = requests.Session()
    page = s.get(f"{local_url}/dead-letters?destination=orders", timeout=10)
    assert page.status_code == 200 and fake.listed == 0
    assert "receive count" in page.text and 'id="list-dead-letters"' in page.text
    # the list is a POST from the console's own page, with its CSRF token
    refused = s.post(f"{local_url}/dead-letters", data={"destination": "orders"}, timeout=10)
    assert refused.status_code == 403 and fake.listed == 0
    listed = s.post(
        f"{local_url}/dead-letters",
        data={"destination": "orders", "csrf": csrf_of(page.text)},
        timeout=10,
    )
    assert listed.status_code == 200 and fake.listed == 1
    assert "No dead letters of orders" in listed.text


def test_a_body_over_the_bound_is_refused_before_it_is_read(token_url: str) -> None:
    # as Content-Length says
    big = requests.post(f"{token_url}/signin", data={"token": "x" * MAX_BODY_BYTES}, timeout=10)
    assert big.status_code == 413

    # streamed without a length (chunked): refused once the bound is passed
    def chunks() -> Iterator[bytes]:
        yield b"token="
        for _ in range(64):
            yield b"y" * 4096

    streamed = requests.post(
        f"{token_url}/signin",
        data=chunks(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=10,
    )
    assert streamed.status_code == 413


def test_a_form_of_many_fields_or_with_a_file_is_refused_before_the_token_is_checked(
    token_url: str,
) -> None:
    many = requests.post(
        f"{token_url}/signin", data=[("f", "v")] * 200 + [("token", TOKEN)], timeout=10
    )
    assert many.status_code == 400 and "fields" in many.text
    with_file = requests.post(
        f"{token_url}/signin",
        data={"token": TOKEN},
        files={"upload": ("a.bin", b"\0" * 1000)},
        timeout=10,
    )
    assert with_file.status_code == 400
    one_big_field = requests.post(
        f"{token_url}/signin", data={"token": TOKEN, "pad": "z" * 20_000}, timeout=10
    )
    assert one_big_field.status_code == 400
    good = requests.post(
        f"{token_url}/signin", data={"token": TOKEN}, allow_redirects=False, timeout=10
    )
    assert good.status_code == 303


def test_cookieless_requests_never_sign_anyone_out(
    local_url: str, fake: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "MAX_SESSIONS", 3)
    s = requests.Session()
    csrf = csrf_of(s.get(f"{local_url}/scheduled?destination=orders", timeout=10).text)
    for _ in range(10):  # what 10,001 were with the bound at 10,000
        assert requests.get(f"{local_url}/scheduled", timeout=10).status_code == 200
    done = s.post(
        f"{local_url}/actions/cancel",
        data={"destination": "orders", "id": "m-ok", "csrf": csrf},
        timeout=10,
    )
    assert done.status_code == 200 and "cancelled" in done.text, done.text


def test_the_cookie_is_named_for_the_port_the_browser_reached(local_url: str) -> None:
    port = local_url.rsplit(":", 1)[1]
    answer = requests.get(f"{local_url}/scheduled", timeout=10)
    assert answer.cookies.keys() == [f"sqsdelay_console_{port}"]


def test_sessions_end_after_their_lifetime(fake: FakeService) -> None:
    clock = [0.0]
    sessions = Sessions(idle_seconds=60, lifetime_seconds=100, clock=lambda: clock[0])
    app = create_app(fake, auth.load_tokens(TOKEN, None), sessions)  # type: ignore[arg-type]
    with app_served(app) as url:
        s = requests.Session()
        assert s.post(f"{url}/signin", data={"token": TOKEN}, timeout=10).url.endswith("/scheduled")
        clock[0] = 59
        assert s.get(f"{url}/scheduled", allow_redirects=False, timeout=10).status_code == 200
        clock[0] = 101  # used within the idle time, but past the lifetime
        assert s.get(f"{url}/scheduled", allow_redirects=False, timeout=10).status_code == 303


def test_a_non_ascii_token_works_as_bearer_and_on_the_sign_in_page(fake: FakeService) -> None:
    token = "jeton-éphémère-ключ-0123456789"
    with app_served(create_app(fake, auth.load_tokens(token + "\n", None))) as url:  # type: ignore[arg-type]
        header = {"Authorization": b"Bearer " + token.encode()}
        assert requests.get(f"{url}/scheduled", headers=header, timeout=10).status_code == 200
        signed = requests.post(
            f"{url}/signin", data={"token": token}, allow_redirects=False, timeout=10
        )
        assert signed.status_code == 303


def test_wrong_tokens_are_throttled_and_logged_with_the_address_never_the_token(
    token_url: str,
) -> None:
    wrong = "wrong-token-wrong-token-wrong"
    out = capture_logs()
    for _ in range(auth.WRONG_TOKENS):
        answer = requests.post(f"{token_url}/signin", data={"token": wrong}, timeout=10)
        assert answer.status_code == 403
    # the right token now waits too: nothing is checked until the window has passed
    late = requests.post(f"{token_url}/signin", data={"token": TOKEN}, timeout=10)
    assert late.status_code == 429 and int(late.headers["retry-after"]) > 0
    bearer = requests.get(
        f"{token_url}/health", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    assert bearer.status_code == 429
    events = logged(out)
    refused = [e for e in events if e["event"] == "console.token_refused"]
    assert len(refused) == auth.WRONG_TOKENS
    assert {e["client"] for e in refused} == {"127.0.0.1"}
    assert any(e["event"] == "console.token_throttled" for e in events)
    assert wrong not in json.dumps(events) and TOKEN not in json.dumps(events)


def test_an_unreadable_due_time_is_one_unreadable_row(fake: FakeService) -> None:
    fake.records = [record("m-ok", NOW_MS), record("m-bad", HUGE_MS), record("m-neg", -(10**18))]
    with app_served(create_app(fake, Tokens())) as url:  # type: ignore[arg-type]
        answer = requests.get(f"{url}/scheduled?destination=orders", timeout=10)
    assert answer.status_code == 200
    assert answer.text.count("unreadable due time") == 2
    assert "2030-03-17 17:46:40 UTC" in answer.text and 'data-id="m-bad"' in answer.text


def test_an_unreadable_parked_due_time_is_one_unreadable_row(fake: FakeService) -> None:
    fake.registry_on = False
    fake.parked_list = ParkedList(
        [
            ParkedMessage("p-ok", NOW_MS, "at(2030-03-17T17:47:00)", 10, ()),
            ParkedMessage("p-bad", HUGE_MS, "at(2030-03-17T17:47:00)", 10, ()),
        ],
        2,
        False,
    )
    with app_served(create_app(fake, Tokens())) as url:  # type: ignore[arg-type]
        answer = requests.get(f"{url}/scheduled?destination=orders", timeout=10)
    assert answer.status_code == 200
    assert answer.text.count("unreadable due time") == 1 and 'data-id="p-bad"' in answer.text
    assert "2030-03-17 17:46:40 UTC" in answer.text


def test_behind_a_proxy_the_public_origin_signs_in_and_its_cookie_is_secure(
    fake: FakeService,
) -> None:
    origin = "https://console.example.test"
    app = create_app(fake, auth.load_tokens(TOKEN, None), origin=origin)  # type: ignore[arg-type]
    with app_served(app) as url:
        public = {"Host": "console.example.test", "Origin": origin}
        signed = requests.post(
            f"{url}/signin",
            data={"token": TOKEN},
            headers=public,
            allow_redirects=False,
            timeout=10,
        )
        assert signed.status_code == 303, signed.text
        cookie = signed.headers["set-cookie"]
        assert cookie.startswith("sqsdelay_console_443=") and "Secure" in cookie
        # another origin, or the plain one, is refused; another host name too (421)
        other = {"Host": "console.example.test", "Origin": "http://console.example.test"}
        assert (
            requests.post(
                f"{url}/signin", data={"token": TOKEN}, headers=other, timeout=10
            ).status_code
            == 403
        )
        rebound = requests.get(f"{url}/signin", headers={"Host": "evil.example"}, timeout=10)
        assert rebound.status_code == 421
