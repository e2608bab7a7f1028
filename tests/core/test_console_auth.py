"""The console's rules without a server: tokens, binding, sessions and CSRF tokens, the times
its forms take and show."""

from __future__ import annotations

import hmac
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.console import auth, timefmt
from sqsdelay.console.auth import (
    Sessions,
    Tokens,
    bearer,
    check_bind,
    host_allowed,
    load_tokens,
)
from sqsdelay.errors import ConfigError, InvalidDelay

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


def test_sessions_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "MAX_SESSIONS", 3)
    sessions = Sessions()
    first = sessions.start("a")
    for _ in range(3):
        sessions.start("b")
    assert sessions.who(first) is None


@pytest.mark.parametrize(
    ("delta_s", "shown"),
    [
        (0, "now"),
        (0.4, "now"),
        (42, "in 42 s"),
        (3 * 3600 + 12 * 60 + 5, "in 3 h 12 min"),
        (-300, "5 min ago"),
        (2 * 86400 + 3 * 3600 + 60, "in 2 d 3 h"),
        (3600, "in 1 h"),
    ],
)
def test_relative_times(delta_s: float, shown: str) -> None:
    now = 1_800_000_000_000
    assert timefmt.relative(now + int(delta_s * 1000), now) == shown


def test_a_time_needs_a_zone() -> None:
    assert timefmt.parse_time(" 2027-01-31T09:00:00Z ", "x").isoformat() == (
        "2027-01-31T09:00:00+00:00"
    )
    assert timefmt.parse_time("2027-01-31T09:00:00+01:00", "x").utcoffset() is not None
    with pytest.raises(InvalidDelay, match="has no time zone: add Z"):
        timefmt.parse_time("2027-01-31T09:00:00", "the new time")
    with pytest.raises(InvalidDelay, match="not an ISO 8601 time"):
        timefmt.parse_time("tomorrow", "the new time")
    assert timefmt.utc(0) == "1970-01-01 00:00:00 UTC"


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
