"""A send's tags (`send(..., tags={"customer": "42"})`, `--tag customer=42`): their rules,
the registry's index of them, and a bulk cancel's count (docs/operator-controls.md).

A tag is indexed by one small item per tag beside the message's record, in the same table:
id `tag:<destination>/<key>=<value>/<message id>` (a record's id never starts with `tag:`,
since a queue name has no colon), with `tag` = `<destination>/<key>=<value>`, the hash key
of the sparse `by-tag` index (only these items carry it; the records stay out of it). So a
tag finds its messages with a Query, never a scan, and each tagged send costs one
BatchWriteItem: per tag one write unit for the item and one for the index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sqsdelay.core.flows import Call, Flow
from sqsdelay.core.types import CancelOutcome
from sqsdelay.errors import ConfigError, InvalidTag, RegistryError

TAG_INDEX: Final = "by-tag"
TAG_ATTRIBUTE: Final = "tag"
ITEM_PREFIX: Final = "tag:"
MAX_TAGS: Final = 10  # as SQS allows message attributes: a send is not a tag store
_KEY = re.compile(r"[A-Za-z0-9_.:@+-]{1,64}")
_VALUE = re.compile(r"[A-Za-z0-9_.:@+-]{1,128}")
# BatchWriteItem takes 25 items; a send has at most MAX_TAGS. Unprocessed ones are retried
# this many times before the send is refused (nothing sent).
WRITE_ROUNDS: Final = 3

Tags = tuple[tuple[str, str], ...]


def check(
    tags: Mapping[str, str] | None,
    route: str = "delay-queue",
    seconds: int = 0,
    max_native_delay: int = 0,
) -> Tags:
    """A send's tags, sorted; refused before any call when one breaks a rule, or when the
    send's `route` is direct (no record: nothing could cancel it)."""
    if not tags:
        return ()
    if route != "delay-queue":
        raise InvalidTag(
            f"a tagged message needs the delay queue's route and its record, but a delay of "
            f"{seconds} s goes straight to the destination (SQSDELAY_MAX_NATIVE_DELAY_SECONDS="
            f"{max_native_delay}), where no cancel can reach it: send it without tags, or "
            "with a longer delay"
        )
    if not isinstance(tags, Mapping):
        raise InvalidTag(f"tags must be a mapping of names to values, not {type(tags).__name__}")
    if len(tags) > MAX_TAGS:
        raise InvalidTag(
            f"{len(tags)} tags: a message takes at most {MAX_TAGS}; keep the ones a bulk "
            "cancel selects by"
        )
    for k, v in tags.items():
        _check_one(k, v)
    return tuple(sorted(tags.items()))


def _check_one(k: object, v: object) -> None:
    if not isinstance(k, str) or not _KEY.fullmatch(k):
        raise InvalidTag(
            f"tag name {str(k)[:80]!r}: give 1 to 64 letters, digits or _.:@+- "
            "(no =, / or spaces), e.g. customer"
        )
    if not isinstance(v, str) or not _VALUE.fullmatch(v):
        raise InvalidTag(
            f"tag {k}={str(v)[:80]!r}: the value must be a string of 1 to 128 letters, "
            "digits or _.:@+- (no /, = or spaces), e.g. customer=42"
        )


def parse(text: str) -> tuple[str, str]:
    """`NAME=VALUE`, as `--tag` takes it."""
    k, sep, v = text.partition("=")
    if not sep:
        raise InvalidTag(f"--tag {text!r}: give NAME=VALUE, e.g. --tag customer=42")
    _check_one(k, v)
    return k, v


def parse_all(texts: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in texts:
        k, v = parse(text)
        if k in out and out[k] != v:
            raise InvalidTag(f"--tag {k} given twice ({out[k]} and {v}): a name takes one value")
        out[k] = v
    check(out)
    return out


def as_strings(tags: Tags) -> list[str]:
    return [f"{k}={v}" for k, v in tags]


def index_key(destination: str, name: str, value: str) -> str:
    return f"{destination}/{name}={value}"


def item_id(destination: str, name: str, value: str, message_id: str) -> str:
    return f"{ITEM_PREFIX}{index_key(destination, name, value)}/{message_id}"


def tag_items(
    destination: str, message_id: str, tags: Tags, expires_at: int
) -> list[dict[str, Any]]:
    """A message's tag items, one per tag."""
    return [
        {
            "id": {"S": item_id(destination, k, v, message_id)},
            TAG_ATTRIBUTE: {"S": index_key(destination, k, v)},
            "message_id": {"S": message_id},
            "expires_at": {"N": str(expires_at)},
        }
        for k, v in tags
    ]


def write(
    table: str,
    destination: str,
    message_id: str,
    tags: Tags,
    expires_at: int,
    timeout: float | None,
) -> Flow[None]:
    """Index a message's tags (after its record is written, before it is sent): one item per
    tag, unconditional (a retried send writes the same items). Raises RegistryError when
    they cannot all be written: the send stops there and nothing is sent."""
    items = [
        {"PutRequest": {"Item": i}} for i in tag_items(destination, message_id, tags, expires_at)
    ]
    for _ in range(WRITE_ROUNDS):
        if not items:
            return
        params = {"RequestItems": {table: items}}
        [reply] = yield [Call("dynamodb", "BatchWriteItem", params, timeout=timeout)]
        if reply.fault is not None:
            raise RegistryError("BatchWriteItem", table, reply.fault.code, reply.fault.detail)
        items = list(reply.response.get("UnprocessedItems", {}).get(table, []))
    if items:
        raise RegistryError(
            "BatchWriteItem", table, "UnprocessedItems", f"{len(items)} tag item(s) left unwritten"
        )


def query_params(
    table: str, destination: str, tag: tuple[str, str], start: Mapping[str, Any] | None
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "TableName": table,
        "IndexName": TAG_INDEX,
        "KeyConditionExpression": "#t = :t",
        "ExpressionAttributeNames": {"#t": TAG_ATTRIBUTE},
        "ExpressionAttributeValues": {":t": {"S": index_key(destination, *tag)}},
    }
    if start:
        params["ExclusiveStartKey"] = dict(start)
    return params


def matching(
    table: str, destination: str, tag: tuple[str, str], timeout: float | None
) -> Flow[list[str]]:
    """The ids of a destination's messages sent with `tag` (any state: the cancel tells),
    page by page. The index is eventually consistent: a message tagged a moment ago may
    be missed (run the cancel again)."""
    ids: set[str] = set()
    start: Mapping[str, Any] | None = None
    while True:
        params = query_params(table, destination, tag, start)
        [reply] = yield [Call("dynamodb", "Query", params, timeout=timeout)]
        if reply.fault is not None:
            # DynamoDB answers ValidationException ("does not have the specified index"),
            # moto ResourceNotFoundException ("Invalid index")
            missing = ("ValidationException", "ResourceNotFoundException")
            if reply.fault.code in missing and "index" in reply.fault.detail.lower():
                raise ConfigError(
                    f"the registry table {table!r} has no index {TAG_INDEX}: run `sqsdelay "
                    "install` with the registry on to add it (untagged sends work without it)"
                )
            raise RegistryError("Query", table, reply.fault.code, reply.fault.detail)
        ids.update(i["message_id"]["S"] for i in reply.response.get("Items", []))
        start = reply.response.get("LastEvaluatedKey")
        if not start:
            return sorted(ids)


@dataclass
class BulkCancel:
    """What `cancel --tag` found and did: `matched` messages carry the tag (`sample`: some
    of their ids); each cancel's outcome counted (none on a dry run)."""

    tag: str
    matched: int
    sample: list[str]
    dry_run: bool
    outcomes: dict[CancelOutcome, int] = field(
        default_factory=lambda: {"cancelled": 0, "too-late": 0, "unknown": 0}
    )

    def count(self, outcome: CancelOutcome) -> None:
        self.outcomes[outcome] += 1

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tag": self.tag, "matched": self.matched, "dry_run": self.dry_run}
        if self.dry_run:
            out["sample"] = self.sample
        else:
            out |= {str(k): n for k, n in self.outcomes.items()}
        return out
