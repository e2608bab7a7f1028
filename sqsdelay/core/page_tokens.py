"""Continuation tokens of the console's pages: DynamoDB's key, sealed (pure).

A page link carries the key of the next page. The key names an item of the registry, so a
token is signed (HMAC-SHA256 under a secret of the console's process) and bound to the
query it continues: a token that was changed, or pasted into another destination's or
filter's page, is refused with `PageTokenInvalid` and no call is made with it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from sqsdelay.errors import PageTokenInvalid

_REFUSED = (
    "the page link is not valid (changed, or made for other filters or another console): "
    "start again from the first page"
)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, fingerprint: str, payload: bytes) -> bytes:
    return hmac.new(secret, fingerprint.encode() + b"\0" + payload, hashlib.sha256).digest()


def seal(key: Mapping[str, Any], fingerprint: str, secret: bytes) -> str:
    """`key` as a URL-safe token, signed for the query whose fingerprint is given."""
    payload = json.dumps(key, sort_keys=True, separators=(",", ":")).encode()
    return f"{_b64(payload)}.{_b64(_mac(secret, fingerprint, payload))}"


def opened(token: str, fingerprint: str, secret: bytes) -> dict[str, Any]:
    """The key a token holds; `PageTokenInvalid` unless this console sealed it for this query."""
    body, _, signature = token.partition(".")
    try:
        payload, given = _unb64(body), _unb64(signature)
    except (ValueError, TypeError):
        raise PageTokenInvalid(_REFUSED) from None
    if not hmac.compare_digest(given, _mac(secret, fingerprint, payload)):
        raise PageTokenInvalid(_REFUSED)
    key = json.loads(payload)
    if not isinstance(key, dict):
        raise PageTokenInvalid(_REFUSED)
    return key
