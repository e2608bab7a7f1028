"""The console's rules without a server (console/auth.py): tokens, binding, host names,
sessions and CSRF tokens. The times its forms take and show are test_timefmt.py's."""

from __future__ import annotations

import hmac
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.console import auth
from sqsdelay.console.auth import (
    Sessions,
    Throttle,
    Tokens,
    bearer,
    check_bind,
    cookie_name,
    given_bytes,
    host_allowed,
    load_tokens,
    public_origin,
)
from sqsdelay.errors import ConfigError
from sqsdelay.settings import load_settings

LONG = "t" * 20


def test_a_token_is_found_by_name_and_every_one_is_compared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tokens = Tokens((("alice", b"a" * 20), ("bob", b"b" * 20)))
    compared: list[bytes] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append(b)
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    assert tokens.who("a" * 20) == "alice"
    assert compared == [b"a" * 20, b"b" * 20]  # no early exit on the first match
    assert tokens.who("b" * 20) == "bob"
    assert tokens.who("a" * 19) is None and tokens.who("") is None
    assert not Tokens().required and Tokens().who("anything") is None


def test_tokens_from_the_setting_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"# who may steer\n\nalice:{LONG}a\n bob : {LONG}b \n")
    tokens = load_tokens(LONG, path)
    assert [n for n, _ in tokens.named] == ["token", "alice", "bob"]
    assert tokens.who(LONG + "b") == "bob" and tokens.who(LONG) == "token"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (f"{LONG}\n", "line 1: write NAME:TOKEN"),
        (f":{LONG}\n", "line 1: write NAME:TOKEN"),
        ("alice:short\n", "line 1's token is shorter than 16"),
    ],
)
def test_a_bad_token_file_says_which_line_and_what_to_write(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "tokens"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_tokens(None, path)


def test_a_short_or_unreadable_token_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"secrets.token_urlsafe"):
        load_tokens("short", None)
    with pytest.raises(ConfigError, match="cannot be read"):
        load_tokens(None, tmp_path / "missing")


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_token(host: str) -> None:
    check_bind(host, Tokens())


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "example.com", "localhost.evil"])
def test_any_other_address_needs_a_token(host: str) -> None:
    with pytest.raises(ConfigError, match="SQSDELAY_CONSOLE_TOKEN"):
        check_bind(host, Tokens())
    check_bind(host, Tokens((("ops", b"x" * 20),)))


def test_bearer_reads_only_a_bearer_header() -> None:
    assert bearer(f"Bearer {LONG}") == LONG
    assert bearer(f"bearer  {LONG} ") == LONG
    assert bearer(f"Basic {LONG}") is None
    assert bearer("Bearer ") is None and bearer(None) is None and bearer("") is None


def test_a_session_knows_who_and_its_csrf_token_is_its_own() -> None:
    sessions = Sessions(secret=b"k" * 32)
    a, b = sessions.start("alice"), sessions.start("bob")
    assert sessions.who(a) == "alice" and sessions.who(b) == "bob"
    assert sessions.csrf_ok(a, sessions.csrf(a))
    assert not sessions.csrf_ok(a, sessions.csrf(b))
    assert not sessions.csrf_ok(a, None) and not sessions.csrf_ok(None, sessions.csrf(a))
    assert not sessions.csrf_ok(a, "")
    # another process (another secret) cannot mint this one's tokens
    assert not Sessions(secret=b"j" * 32).csrf_ok(a, sessions.csrf(a))
    sessions.end(a)
    assert sessions.who(a) is None and sessions.who("made-up") is None


@given(st.text(max_size=80))
def test_no_guessed_csrf_token_passes(guess: str) -> None:
    sessions = Sessions()
    sid = sessions.start("local")
    assert sessions.csrf_ok(sid, guess) == (guess == sessions.csrf(sid))


def test_sessions_are_bounded_and_the_least_recently_used_goes_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(auth, "MAX_SESSIONS", 3)
    sessions = Sessions()
    first = sessions.start("a")
    second = sessions.start("b")
    sessions.start("c")
    assert sessions.who(first) == "a"  # used: now the most recent
    sessions.start("d")
    assert sessions.who(second) is None and sessions.who(first) == "a"
    assert len(sessions) == 3


def test_a_session_ends_when_idle_or_too_old() -> None:
    now = [0.0]
    sessions = Sessions(idle_seconds=10, lifetime_seconds=25, clock=lambda: now[0])
    idle, busy = sessions.start("a"), sessions.start("b")
    for t in (9, 18):
        now[0] = t
        assert sessions.who(busy) == "b"
    assert sessions.who(idle) is None  # 18 s since its last request
    now[0] = 26
    assert sessions.who(busy) is None  # used 8 s ago, but started 26 s ago
    assert len(sessions) == 0


def test_a_console_without_tokens_keeps_no_session_and_its_ids_prove_themselves() -> None:
    sessions = Sessions(secret=b"k" * 32)
    sid = sessions.local()
    assert sessions.is_local(sid) and sessions.local(sid) == sid
    assert len(sessions) == 0  # nothing kept: nothing to evict
    assert not sessions.is_local(sid[:-1] + ("0" if sid[-1] != "0" else "1"))
    assert not sessions.is_local("made-up") and not sessions.is_local(None)
    assert not Sessions(secret=b"j" * 32).is_local(sid)
    assert sessions.who(sid) is None  # never a signed-in session


def test_tokens_are_stripped_and_blank_or_spaced_ones_refused(tmp_path: Path) -> None:
    assert load_tokens(LONG + "\n", None).who(LONG) == "token"  # a secret file's newline
    assert load_tokens(LONG, None).who(f" {LONG}\n") == "token"
    path = tmp_path / "tokens"
    path.write_text(f"alice:{LONG}\r\n")
    assert load_tokens(None, path).who(LONG) == "alice"
    for bad, message in ((" " * 16, "it is blank"), ("\t" * 20, "it is blank")):
        with pytest.raises(ConfigError, match=message):
            load_tokens(bad, None)
    with pytest.raises(ConfigError, match="whitespace or control"):
        load_tokens("half of it" + "x" * 10, None)


def test_a_bad_token_is_never_printed() -> None:
    secret = "sh0rt-s3cret"
    with pytest.raises(ConfigError) as raised:
        load_tokens(secret, None)
    assert secret not in str(raised.value)
    # nor does it stop the other commands: the settings take it, the console checks it
    assert load_settings(console_token=secret).console_token == secret
    with pytest.raises(ConfigError) as bad_type:
        load_settings(console_token=["not", secret])
    assert "SQSDELAY_CONSOLE_TOKEN=(hidden)" in str(bad_type.value)
    assert secret not in str(bad_type.value)


def test_a_non_ascii_token_compares_the_same_bytes_from_a_header_and_a_form() -> None:
    token = "jeton-éphémère-ключ-0123"
    tokens = load_tokens(token, None)
    assert tokens.who(token) == "token"  # the form: text
    as_header = (b"Bearer " + token.encode()).decode("latin-1")  # how ASGI hands it over
    given = bearer(as_header)
    assert given is not None and tokens.who(given_bytes(given)) == "token"


def test_wrong_tokens_are_throttled_per_address() -> None:
    now = [0.0]
    throttle = Throttle(clock=lambda: now[0])
    for _ in range(auth.WRONG_TOKENS):
        assert throttle.retry_after("10.0.0.1") == 0
        throttle.wrong("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") > 0
    assert throttle.retry_after("10.0.0.2") == 0  # another address is not held back
    now[0] = auth.WRONG_TOKENS_WINDOW_SECONDS + 1
    assert throttle.retry_after("10.0.0.1") == 0


def test_the_throttle_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "MAX_THROTTLED", 5)
    throttle = Throttle()
    for i in range(50):
        throttle.wrong(f"10.0.0.{i}")
    assert len(throttle._wrong) == 5


@pytest.mark.parametrize(
    ("given", "origin"),
    [
        ("https://console.example.com", "https://console.example.com"),
        ("https://Console.Example.com:443/", "https://console.example.com"),
        ("http://127.0.0.1:8443", "http://127.0.0.1:8443"),
        ("https://[::1]:9000", "https://[::1]:9000"),
        (None, None),
        ("", None),
    ],
)
def test_the_public_origin_is_written_as_browsers_send_it(
    given: str | None, origin: str | None
) -> None:
    assert public_origin(given) == origin


@pytest.mark.parametrize(
    "given",
    ["console.example.com", "ftp://x", "https://x/console", "https://u@x", "https://x:99999"],
)
def test_a_public_origin_that_is_not_one_is_refused(given: str) -> None:
    with pytest.raises(ConfigError, match="SQSDELAY_CONSOLE_PUBLIC_ORIGIN"):
        public_origin(given)


def test_a_loopback_console_behind_a_proxy_answers_to_the_public_host_only() -> None:
    origin = "https://console.example.com"
    for host in ("console.example.com", "console.example.com:443", "127.0.0.1:8080"):
        assert host_allowed(host, "127.0.0.1", origin), host
    for host in ("console.example.com:8443", "evil.example", "console.example.com.evil"):
        assert not host_allowed(host, "127.0.0.1", origin), host
    assert host_allowed("c.example:8443", "127.0.0.1", "https://c.example:8443")


def test_each_port_has_its_own_cookie() -> None:
    assert cookie_name("127.0.0.1:8080", None) == "sqsdelay_console_8080"
    assert cookie_name("localhost:9001", None) != cookie_name("localhost:9002", None)
    assert cookie_name("[::1]:8081", None) == "sqsdelay_console_8081"
    assert cookie_name("example.com", None) == "sqsdelay_console_80"
    assert cookie_name("anything:1", "https://console.example.com") == "sqsdelay_console_443"
    assert cookie_name("x:1", "https://c.example:8443") == "sqsdelay_console_8443"


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8080", "127.0.0.1", "localhost:8080", "[::1]:8080", "127.0.0.2:80"]
)
def test_a_loopback_console_answers_to_loopback_names(host: str) -> None:
    assert host_allowed(host, "127.0.0.1")


@pytest.mark.parametrize(
    "host", ["evil.example:8080", "evil.example", "", "10.0.0.1:8080", "[::1", "localhost.evil"]
)
def test_a_loopback_console_refuses_other_names_dns_rebinding(host: str) -> None:
    assert not host_allowed(host, "127.0.0.1")
    assert host_allowed(host, "0.0.0.0")  # beyond loopback a token guards it instead
