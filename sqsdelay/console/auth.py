"""Who may use the console, and proof that a POST came from its own page (no web framework
here: the rules are tested on their own).

- Tokens: `SQSDELAY_CONSOLE_TOKEN` (named `token`) or a file of `NAME:TOKEN` lines, compared
  in constant time (`hmac.compare_digest`) against every configured token, so that timing
  tells neither which token nor how much of one matched.
- Binding: loopback needs no token; any other address does (`check_bind`). Bound to
  loopback, requests must name a loopback host (`host_allowed`: DNS rebinding).
- Sessions: a random id in an HttpOnly, SameSite=Strict cookie; the server keeps who it is.
- CSRF: each session's form token is an HMAC of its id under a secret of this process, sent
  back in a hidden field of every form and compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from sqsdelay.errors import ConfigError

LOCAL = "local"  # who acted, when no token is configured (a loopback console)
MIN_TOKEN_LENGTH = 16
MAX_SESSIONS = 10_000  # the oldest sign-in is forgotten first


@dataclass(frozen=True)
class Tokens:
    """The configured tokens by name; empty: no token (loopback only)."""

    named: tuple[tuple[str, bytes], ...] = ()

    @property
    def required(self) -> bool:
        return bool(self.named)

    def who(self, given: str) -> str | None:
        """The name of the token `given` is, or None. Every token is compared, whatever
        matched, so the time taken does not depend on which one did."""
        found = None
        candidate = given.encode()
        for name, token in self.named:
            if hmac.compare_digest(candidate, token):
                found = name
        return found


def load_tokens(token: str | None, token_file: Path | None) -> Tokens:
    """The tokens of the settings; `ConfigError` (exit 2) naming what to fix."""
    named: list[tuple[str, bytes]] = []
    if token is not None:
        named.append(("token", _checked(token, "SQSDELAY_CONSOLE_TOKEN")))
    if token_file is not None:
        try:
            lines = token_file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(
                f"SQSDELAY_CONSOLE_TOKEN_FILE {str(token_file)!r} cannot be read "
                f"({exc.strerror}): give a readable file of NAME:TOKEN lines"
            ) from None
        for number, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, sep, value = line.strip().partition(":")
            if not sep or not name.strip():
                raise ConfigError(
                    f"SQSDELAY_CONSOLE_TOKEN_FILE line {number}: write NAME:TOKEN (the name "
                    "is logged as who acted)"
                )
            named.append((name.strip(), _checked(value.strip(), f"line {number}'s token")))
    return Tokens(tuple(named))


def _checked(token: str, what: str) -> bytes:
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"{what} is shorter than {MIN_TOKEN_LENGTH} characters: make one with "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return token.encode()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def check_bind(host: str, tokens: Tokens) -> None:
    """Refuse to serve beyond this machine without a token."""
    if not is_loopback(host) and not tokens.required:
        raise ConfigError(
            f"refusing to bind the console to {host}, which is not loopback, without a token: "
            "anyone who can reach it could cancel messages. Set SQSDELAY_CONSOLE_TOKEN (or "
            "SQSDELAY_CONSOLE_TOKEN_FILE), or bind to 127.0.0.1"
        )


def host_allowed(host_header: str | None, bind: str) -> bool:
    """Bound to loopback, only requests addressed to a loopback name are served: a page of
    another site whose name was rebound to 127.0.0.1 (DNS rebinding) would otherwise be
    same-origin with the console, read its CSRF token and post with it. The browser sends
    that site's name in Host, which this refuses."""
    if not is_loopback(bind):
        return True  # reached from elsewhere: a token is required there
    host = (host_header or "").strip()
    if host.startswith("["):  # [::1]:8080
        name = host[1 : host.find("]")] if "]" in host else ""
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return bool(name) and is_loopback(name)


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class Sessions:
    """Signed-in browsers: session id -> who. In memory: a restart signs everyone out."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self._who: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, who: str) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._who[sid] = who
            while len(self._who) > MAX_SESSIONS:
                self._who.popitem(last=False)
        return sid

    def who(self, sid: str | None) -> str | None:
        if not sid:
            return None
        with self._lock:
            return self._who.get(sid)

    def end(self, sid: str | None) -> None:
        with self._lock:
            self._who.pop(sid or "", None)

    def csrf(self, sid: str) -> str:
        """The form token of a session."""
        return hmac.new(self._secret, b"csrf\0" + sid.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, sid: str | None, given: str | None) -> bool:
        if not sid or not given:
            return False
        return hmac.compare_digest(self.csrf(sid).encode(), given.encode())
