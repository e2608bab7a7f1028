"""Splitting work into SQS batches and reading batch responses (pure)."""

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqsdelay.core import quotas

T = TypeVar("T")


def chunk(
    items: Sequence[T],
    *,
    key: Callable[[T], Hashable],
    size: Callable[[T], int],
    max_bytes: int,
    max_entries: int = quotas.MAX_BATCH_ENTRIES,
) -> list[list[int]]:
    """Indexes of `items` grouped by key into batches within the entry and payload limits.

    Order within a key is preserved. A single item over `max_bytes` gets a batch of its own
    (the caller has validated sizes already; SQS will reject it with a per-entry error).
    """
    open_batches: dict[Hashable, tuple[list[int], int]] = {}
    done: list[list[int]] = []
    for index, item in enumerate(items):
        k, n = key(item), size(item)
        batch, total = open_batches.get(k, ([], 0))
        if batch and (len(batch) >= max_entries or total + n > max_bytes):
            done.append(batch)
            batch, total = [], 0
        batch.append(index)
        open_batches[k] = (batch, total + n)
    done.extend(batch for batch, _ in open_batches.values() if batch)
    return done


@dataclass(frozen=True)
class EntryFailure:
    code: str
    message: str
    sender_fault: bool


def read_batch_response(
    response: dict[str, Any], ids: Iterable[str]
) -> tuple[dict[str, dict[str, Any]], dict[str, EntryFailure]]:
    """Successful entries by Id and failures by Id. An Id missing from both is a failure."""
    ok = {e["Id"]: e for e in response.get("Successful", [])}
    failed = {
        e["Id"]: EntryFailure(
            e.get("Code", "Unknown"), e.get("Message", ""), e.get("SenderFault", False)
        )
        for e in response.get("Failed", [])
    }
    for entry_id in ids:
        if entry_id not in ok and entry_id not in failed:
            failed[entry_id] = EntryFailure(
                "MissingFromResponse", "no result for this entry", False
            )
    return ok, failed
