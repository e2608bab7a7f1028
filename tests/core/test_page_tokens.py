"""The console's page tokens (core/page_tokens.py): a continuation key sealed for one query
by one console, refused with what to do when changed, reused elsewhere or garbage."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core import page_tokens, registry
from sqsdelay.core.registry_pages import start_key
from sqsdelay.errors import PageTokenInvalid

DEST = "p-orders"
SECRET = b"s" * 32


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=4), st.text())
def test_a_sealed_key_opens_only_for_the_query_it_was_made_for(
    key: dict[str, str], fingerprint: str
) -> None:
    token = page_tokens.seal(key, fingerprint, SECRET)
    assert page_tokens.opened(token, fingerprint, SECRET) == key
    with pytest.raises(PageTokenInvalid):
        page_tokens.opened(token, fingerprint + "x", SECRET)
    with pytest.raises(PageTokenInvalid):
        page_tokens.opened(token, fingerprint, b"t" * 32)


@given(st.data())
def test_any_change_to_a_token_is_refused(data: st.DataObject) -> None:
    key = start_key(registry.Record(DEST, "m1", 5, "scheduled", "delay-queue"))
    token = page_tokens.seal(key, "q", SECRET)
    at = data.draw(st.integers(0, len(token) - 1))
    char = data.draw(st.sampled_from("AZaz09-_.=!"))
    changed = token[:at] + char + token[at + 1 :]
    if changed != token:
        try:
            opened = page_tokens.opened(changed, "q", SECRET)
        except PageTokenInvalid:
            return
        # base64 may decode two spellings to the same bytes: then it is the same key
        assert opened == key


@pytest.mark.parametrize("token", ["", ".", "abc", "abc.def", "!!.??", "e30.AAAA"])
def test_garbage_tokens_are_refused_with_what_to_do(token: str) -> None:
    with pytest.raises(PageTokenInvalid, match="start again from the first page"):
        page_tokens.opened(token, "q", SECRET)


def test_a_token_fits_a_url_as_it_is() -> None:
    token = page_tokens.seal({"id": {"S": "p-orders/a b?&=/+"}}, "q", SECRET)
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def test_a_signed_payload_that_is_not_a_key_is_refused() -> None:
    """Only an object is a DynamoDB key: a list sealed with the right secret is still refused."""
    token = page_tokens.seal(["id"], "q", SECRET)  # type: ignore[arg-type]
    with pytest.raises(PageTokenInvalid):
        page_tokens.opened(token, "q", SECRET)
