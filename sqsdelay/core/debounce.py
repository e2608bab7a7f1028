"""Debounce by key (`send(..., id=K, debounce=D, max_wait=W)`, docs/operator-controls.md):
a send whose key is still pending replaces it, due at now + D but never past the window's
first send + W; the last body wins.

Each send of a key is its own message, a *generation* with id `<key>#<n>`, and its own
registry record. A small item per key (`debounce:<destination>/<key>`: the generation, its
message id and due time, the window's first send and cap) names the pending one. A send
moves the key to the next generation in one transaction (TransactWriteItems): the key
item, on condition that it still names the generation this send read; the old record
`scheduled` → `cancelled`; the new record, written before its message is sent. So two
racing sends never both win (the loser reads again and goes after the winner), the old
message is cancelled exactly when the new one is recorded, and at any moment at most one
generation of a key is scheduled: the worker drops the others as cancelled, unchanged.

A pending generation is movable while its due time is more than one cycle away
(`SQSDELAY_MAX_NATIVE_DELAY_SECONDS`), as a cancel is: after that (or once handed over, or
cancelled) a send opens a new window, and the pending one is delivered as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from sqsdelay.core import registry
from sqsdelay.core.flows import Call, Flow
from sqsdelay.errors import InvalidDelay, InvalidInput, RegistryError

ITEM_PREFIX: Final = "debounce:"
# The generation's id is `<key>#<n>`: room for the suffix in SQS's 128-character group id.
MAX_KEY: Final = 112
# Transactions lost to racing sends before giving up (each loser reads the winner's).
ATTEMPTS: Final = 8

Advanced = Literal["done", "raced", "old-gone"]


@dataclass(frozen=True)
class Window:
    """A key's debounce item: the pending (or last) generation and its window."""

    generation: int
    message_id: str
    due_ms: int
    first_ms: int
    cap_ms: int | None  # first send + max_wait; None: no cap


def check(key: str | None, debounce_ms: int, max_wait_ms: int | None, cycle_s: int) -> str:
    """A debounced send's key and times, refused before any call."""
    if key is None:
        raise InvalidInput("debounce needs the key: send(..., id=KEY, debounce=...)")
    if len(key) > MAX_KEY:
        raise InvalidInput(f"a debounce key is at most {MAX_KEY} characters: {key[:40]!r}…")
    if debounce_ms <= cycle_s * 1000:
        raise InvalidDelay(
            f"debounce of {debounce_ms / 1000:g} s: it must be longer than "
            f"SQSDELAY_MAX_NATIVE_DELAY_SECONDS ({cycle_s} s), since a shorter delay goes "
            "straight to SQS, where nothing can move it"
        )
    if max_wait_ms is not None and max_wait_ms <= cycle_s * 1000:
        raise InvalidDelay(
            f"max_wait of {max_wait_ms / 1000:g} s: it must be longer than "
            f"SQSDELAY_MAX_NATIVE_DELAY_SECONDS ({cycle_s} s), as debounce (None: no cap)"
        )
    return key


def generation_id(key: str, generation: int) -> str:
    return f"{key}#{generation}"


def item_key(destination: str, key: str) -> dict[str, Any]:
    return {"id": {"S": f"{ITEM_PREFIX}{destination}/{key}"}}


def movable(window: Window | None, now_ms: int, cycle_s: int) -> bool:
    """Whether the pending generation may still be replaced (the cancel says for sure)."""
    return window is not None and window.due_ms - now_ms > cycle_s * 1000


def next_window(
    window: Window | None,
    *,
    key: str,
    now_ms: int,
    debounce_ms: int,
    max_wait_ms: int | None,
    replace: bool,
) -> Window:
    """The next generation: in the same window (`replace`), due at now + debounce but never
    past its cap; else a new window from now."""
    generation = window.generation + 1 if window is not None else 1
    if replace and window is not None:
        first, cap = window.first_ms, window.cap_ms
    else:
        first = now_ms
        cap = now_ms + max_wait_ms if max_wait_ms is not None else None
    due = now_ms + debounce_ms
    if cap is not None:
        due = min(due, cap)
    return Window(generation, generation_id(key, generation), due, first, cap)


def window_of(item: dict[str, Any]) -> Window | None:
    try:
        cap = item.get("cap_ms", {}).get("N")
        return Window(
            int(item["generation"]["N"]),
            item["message_id"]["S"],
            int(item["due_ms"]["N"]),
            int(item["first_ms"]["N"]),
            int(cap) if cap is not None else None,
        )
    except (KeyError, TypeError, ValueError):
        return None


def read(table: str, destination: str, key: str, timeout: float | None) -> Flow[Window | None]:
    """The key's debounce item, strongly consistent (the transaction checks it anyway)."""
    params = {"TableName": table, "Key": item_key(destination, key), "ConsistentRead": True}
    [reply] = yield [Call("dynamodb", "GetItem", params, timeout=timeout)]
    if reply.fault is not None:
        raise RegistryError("GetItem", table, reply.fault.code, reply.fault.detail)
    return window_of(dict(reply.response.get("Item", {})))


def advance_params(
    table: str,
    destination: str,
    key: str,
    before: Window | None,
    after: Window,
    record: registry.Record,
    now_ms: int,
    *,
    cancel_old: bool,
) -> dict[str, Any]:
    """The transaction: the key item moved on from `before`, the old record cancelled
    (`cancel_old`), the new record written (scheduled, not yet sent)."""
    item: dict[str, Any] = {
        **item_key(destination, key),
        "generation": {"N": str(after.generation)},
        "message_id": {"S": after.message_id},
        "due_ms": {"N": str(after.due_ms)},
        "first_ms": {"N": str(after.first_ms)},
        registry.TTL_ATTRIBUTE: {"N": str(after.due_ms // 1000 + registry.KEEP_AFTER_DUE_SECONDS)},
    }
    if after.cap_ms is not None:
        item["cap_ms"] = {"N": str(after.cap_ms)}
    key_put: dict[str, Any] = {"TableName": table, "Item": item}
    if before is None:
        key_put["ConditionExpression"] = "attribute_not_exists(id)"
    else:
        key_put["ConditionExpression"] = "generation = :g"
        key_put["ExpressionAttributeValues"] = {":g": {"N": str(before.generation)}}
    items: list[dict[str, Any]] = [{"Put": key_put}]
    if cancel_old and before is not None:
        items.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": registry.key(destination, before.message_id),
                    "UpdateExpression": "SET #s = :cancelled, updated_ms = :now",
                    "ConditionExpression": "#s = :scheduled",
                    "ExpressionAttributeNames": {"#s": "state"},
                    "ExpressionAttributeValues": {
                        ":cancelled": {"S": "cancelled"},
                        ":scheduled": {"S": "scheduled"},
                        ":now": {"N": str(now_ms)},
                    },
                }
            }
        )
    items.append(
        {
            "Put": {
                "TableName": table,
                "Item": registry.item_of(record, now_ms),
                "ConditionExpression": "attribute_not_exists(id)",
            }
        }
    )
    return {"TransactItems": items}


_REASONS = re.compile(r"\[([^\]]*)\]")


def advance(
    table: str,
    destination: str,
    key: str,
    before: Window | None,
    after: Window,
    record: registry.Record,
    now_ms: int,
    *,
    cancel_old: bool,
    timeout: float | None,
) -> Flow[Advanced]:
    """`done`; `raced` (another send moved the key first: read again); `old-gone` (the old
    generation was no longer scheduled: handed over or cancelled; open a new window)."""
    params = advance_params(
        table, destination, key, before, after, record, now_ms, cancel_old=cancel_old
    )
    [reply] = yield [Call("dynamodb", "TransactWriteItems", params, timeout=timeout)]
    if reply.fault is None:
        return "done"
    if reply.fault.code != "TransactionCanceledException":
        raise RegistryError("TransactWriteItems", table, reply.fault.code, reply.fault.detail)
    # "... cancellation reasons for specific reasons [None, ConditionalCheckFailed, None]"
    found = _REASONS.search(reply.fault.detail)
    reasons = [r.strip() for r in found.group(1).split(",")] if found else []
    if reasons and reasons[0] == "ConditionalCheckFailed":
        return "raced"
    if cancel_old and len(reasons) > 1 and reasons[1] == "ConditionalCheckFailed":
        return "old-gone"
    return "raced"  # the new record's id taken: a generation another send wrote; read again
