"""Who may use the console, and proof that a POST came from its own page (no web framework
here: the rules are tested on their own).

- Tokens: `SQSDELAY_CONSOLE_TOKEN` (named `token`) or a file of `NAME:TOKEN` lines, stripped
  of surrounding whitespace at load, at least 16 characters, never printed. A given token is
  compared as UTF-8 bytes in constant time (`hmac.compare_digest`) against every configured
  one, so that timing tells neither which token nor how much of one matched; the form's and
  the `Authorization` header's bytes are the same bytes (`given_bytes`).
- Binding: loopback needs no token; any other address does (`check_bind`). Bound to
  loopback, requests must name a loopback host, or the public origin's (`host_allowed`:
  DNS rebinding).
- Sessions: a random id in an HttpOnly, SameSite=Strict cookie; the server keeps who it is,
  for at most an idle and an absolute lifetime, the least recently used forgotten first. A
  console without tokens keeps none: its id is signed (`Sessions.local`), so no request
  can push a signed-in user out.
- Wrong tokens: counted per client address (`Throttle`); past the limit, refused unchecked.
- CSRF: each session's form token is an HMAC of its id under a secret of this process, sent
  back in a hidden field of every form and compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from sqsdelay.errors import ConfigError

LOCAL = "local"  # who acted, when no token is configured (a loopback console)
MIN_TOKEN_LENGTH = 16
MAX_SESSIONS = 10_000  # signed-in browsers; the least recently used is forgotten first
MAX_THROTTLED = 10_000  # client addresses whose wrong tokens are counted
WRONG_TOKENS = 10  # wrong tokens a client address may give per window
WRONG_TOKENS_WINDOW_SECONDS = 60.0
Clock = Callable[[], float]


@dataclass(frozen=True)
class Tokens:
    """The configured tokens by name; empty: no token (loopback only)."""

    named: tuple[tuple[str, bytes], ...] = ()

    @property
    def required(self) -> bool:
        return bool(self.named)

    def who(self, given: str | bytes) -> str | None:
        """The name of the token `given` is (text, or its UTF-8 bytes), or None. Surrounding
        whitespace is ignored, as at load. Every token is compared, whatever matched, so the
        time taken does not depend on which one did."""
        candidate = (given.encode() if isinstance(given, str) else given).strip()
        found = None
        for name, token in self.named:
            if hmac.compare_digest(candidate, token):
                found = name
        return found


def given_bytes(header_value: str) -> bytes:
    """A header's value as the bytes the client sent: ASGI servers decode headers as
    latin-1, so a UTF-8 token in `Authorization` is re-encoded to compare what the sign-in
    form (UTF-8) compares."""
    try:
        return header_value.encode("latin-1")
    except UnicodeEncodeError:
        return header_value.encode()


def load_tokens(token: str | None, token_file: Path | None) -> Tokens:
    """The tokens of the settings; `ConfigError` (exit 2) naming what to fix, never a token."""
    named: list[tuple[str, bytes]] = []
    if token is not None:
        named.append(("token", _checked(token, "SQSDELAY_CONSOLE_TOKEN")))
    if token_file is not None:
        try:
            lines = token_file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
            raise ConfigError(
                f"SQSDELAY_CONSOLE_TOKEN_FILE {str(token_file)!r} cannot be read "
                f"({why}): give a readable file of NAME:TOKEN lines"
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
            named.append((name.strip(), _checked(value, f"line {number}'s token")))
    return Tokens(tuple(named))


def _checked(token: str, what: str) -> bytes:
    """A token stripped of surrounding whitespace (a secret file's newline); refused when
    shorter than 16 characters or holding whitespace or control characters. The message
    never holds the token."""
    value = token.strip()
    if len(value) < MIN_TOKEN_LENGTH:
        blank = " (it is blank)" if not value else ""
        raise ConfigError(
            f"{what} is shorter than {MIN_TOKEN_LENGTH} characters{blank}: make one with "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    if any(c.isspace() or not c.isprintable() for c in value):
        raise ConfigError(
            f"{what} holds whitespace or control characters: make one with "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return value.encode()


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


def public_origin(value: str | None) -> str | None:
    """`scheme://host[:port]` as browsers send it in `Origin` (lower case, no default
    port, no path); `ConfigError` for anything else."""
    if value is None or not value.strip():
        return None
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        parts, port = None, None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        raise ConfigError(
            f"SQSDELAY_CONSOLE_PUBLIC_ORIGIN {value[:80]!r}: give the address browsers open, "
            "scheme and host (and port) only, e.g. https://console.example.com"
        )
    host = parts.hostname.lower()
    shown = f"[{host}]" if ":" in host else host
    if port is not None and port != {"http": 80, "https": 443}[parts.scheme]:
        shown += f":{port}"
    return f"{parts.scheme}://{shown}"


def _host_name(host_header: str) -> tuple[str, str]:
    """(name, port) of a Host header; port '' when absent."""
    host = host_header.strip().lower()
    if host.startswith("["):  # [::1]:8080
        if "]" not in host:
            return "", ""
        end = host.find("]")
        return host[1:end], host[end + 2 :] if host[end + 1 : end + 2] == ":" else ""
    if host.count(":") == 1:
        name, port = host.split(":")
        return name, port
    return host, ""


def host_allowed(host_header: str | None, bind: str, origin: str | None = None) -> bool:
    """Bound to loopback, only requests addressed to a loopback name, or to the public
    origin's host (`origin`, a proxy's), are served: a page of another site whose name was
    rebound to 127.0.0.1 (DNS rebinding) would otherwise be same-origin with the console,
    read its CSRF token and post with it. The browser sends that site's name in Host, which
    this refuses."""
    if not is_loopback(bind):
        return True  # reached from elsewhere: a token is required there
    name, port = _host_name(host_header or "")
    if origin is not None:
        parts = urlsplit(origin)
        default = "443" if parts.scheme == "https" else "80"
        if name == parts.hostname and (port or default) == str(parts.port or default):
            return True
    return bool(name) and is_loopback(name)


def cookie_name(host_header: str | None, origin: str | None) -> str:
    """The session cookie's name, unique per port the browser reaches a console on: cookies
    are shared by every port of a host, so two consoles (two SSH tunnels) on one host would
    otherwise sign each other out."""
    if origin is not None:
        parts = urlsplit(origin)
        port = str(parts.port or (443 if parts.scheme == "https" else 80))
    else:
        port = _host_name(host_header or "")[1] or "80"
    return f"sqsdelay_console_{port if port.isdigit() else '80'}"


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


@dataclass
class _Session:
    who: str
    started: float
    used: float


class Sessions:
    """Signed-in browsers: session id -> who. In memory: a restart signs everyone out. A
    session ends `idle_seconds` after its last request, `lifetime_seconds` after its start,
    or when MAX_SESSIONS newer ones were used since (least recently used first)."""

    def __init__(
        self,
        secret: bytes | None = None,
        *,
        idle_seconds: float = 3600.0,
        lifetime_seconds: float = 43_200.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self._who: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()
        self.idle_seconds = idle_seconds
        self.lifetime_seconds = lifetime_seconds
        self._clock = clock

    def start(self, who: str) -> str:
        sid = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            self._who[sid] = _Session(who, now, now)
            while len(self._who) > MAX_SESSIONS:
                self._who.popitem(last=False)
        return sid

    def who(self, sid: str | None) -> str | None:
        """Who a session is (and it was used now), or None: unknown, idle or too old."""
        if not sid:
            return None
        now = self._clock()
        with self._lock:
            session = self._who.get(sid)
            if session is None:
                return None
            if (
                now - session.used > self.idle_seconds
                or now - session.started > self.lifetime_seconds
            ):
                del self._who[sid]
                return None
            session.used = now
            self._who.move_to_end(sid)
            return session.who

    def end(self, sid: str | None) -> None:
        with self._lock:
            self._who.pop(sid or "", None)

    def __len__(self) -> int:
        return len(self._who)

    def local(self, sid: str | None = None) -> str:
        """A console without tokens: a session id that proves itself (a nonce and its HMAC),
        kept nowhere, so that no number of requests can forget another's. `sid` given: it,
        when it is one of this process's (else a new one)."""
        if sid and self.is_local(sid):
            return sid
        nonce = secrets.token_urlsafe(24)
        return f"{nonce}.{self._sign(b'local', nonce)}"

    def is_local(self, sid: str | None) -> bool:
        if not sid or "." not in sid:
            return False
        nonce, _, mac = sid.partition(".")
        return hmac.compare_digest(self._sign(b"local", nonce).encode(), mac.encode())

    def _sign(self, kind: bytes, value: str) -> str:
        return hmac.new(self._secret, kind + b"\0" + value.encode(), hashlib.sha256).hexdigest()

    def csrf(self, sid: str) -> str:
        """The form token of a session."""
        return self._sign(b"csrf", sid)

    def csrf_ok(self, sid: str | None, given: str | None) -> bool:
        if not sid or not given:
            return False
        return hmac.compare_digest(self.csrf(sid).encode(), given.encode())


class Throttle:
    """Wrong tokens per client address: at most WRONG_TOKENS per window, then refused
    unchecked until the window has passed. Bounded: the least recently seen addresses are
    forgotten first."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._wrong: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> list[float]:
        times = [t for t in self._wrong.get(client, []) if now - t < WRONG_TOKENS_WINDOW_SECONDS]
        if times:
            self._wrong[client] = times
        else:
            self._wrong.pop(client, None)
        return times

    def retry_after(self, client: str) -> int:
        """0 when `client` may try a token; else seconds until it may."""
        now = self._clock()
        with self._lock:
            times = self._recent(client, now)
            if len(times) < WRONG_TOKENS:
                return 0
            return max(1, int(WRONG_TOKENS_WINDOW_SECONDS - (now - times[0])) + 1)

    def wrong(self, client: str) -> None:
        now = self._clock()
        with self._lock:
            times = self._recent(client, now)
            self._wrong[client] = [*times, now][-WRONG_TOKENS:]
            self._wrong.move_to_end(client)
            while len(self._wrong) > MAX_THROTTLED:
                self._wrong.popitem(last=False)
