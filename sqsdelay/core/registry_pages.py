"""One page of a destination's registry records, for the console: the filters and DynamoDB's
own continuation key (pure, no I/O).

Pages come from the `by-due` index, soonest first, one bounded run of Query calls each and
never a scan: `registry.query_params` writes the query, this module adds the console's
filters (a due window, an id prefix) and cuts the page. DynamoDB filters after its `Limit`,
so a filtered page may need several Queries; after `MAX_QUERIES` the page ends short with
the key to go on from, rather than reading the whole partition to fill it. The index
projects only what `scheduled` prints, so one BatchGetItem of the page's keys adds each
row's size and attribute names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sqsdelay.core import registry
from sqsdelay.core.flows import Call, Flow
from sqsdelay.errors import RegistryError

PAGE_SIZE: Final = 50
# Queries per page at most: 10 times registry.PAGE items looked at before a page ends short.
MAX_QUERIES: Final = 10


@dataclass(frozen=True)
class PageQuery:
    destination: str
    state: registry.State | None = "scheduled"
    due_after_ms: int | None = None  # inclusive
    due_before_ms: int | None = None  # exclusive
    id_prefix: str = ""
    size: int = PAGE_SIZE

    def fingerprint(self) -> str:
        """What a continuation key was made for: a key only continues the same query."""
        return "|".join(
            str(v)
            for v in (
                self.destination,
                self.state,
                self.due_after_ms,
                self.due_before_ms,
                self.id_prefix,
                self.size,
            )
        )


@dataclass(frozen=True)
class Page:
    records: list[registry.Record]
    next_key: dict[str, Any] | None  # ExclusiveStartKey of the next page; None: the last
    queries: int  # Query calls this page made
    examined: int = 0  # items DynamoDB read for it (ScannedCount)
    short: bool = False  # ended after MAX_QUERIES with fewer than `size` matches
    lookups: int = 0  # BatchGetItem calls for the rows' details


def start_key(record: registry.Record) -> dict[str, Any]:
    """The index's continuation key at `record`: the table's key and the index's keys."""
    return {
        **registry.key(record.destination, record.message_id),
        "destination": {"S": record.destination},
        "due_ms": {"N": str(record.due_ms)},
    }


def is_start_key(value: Any, destination: str) -> bool:
    """A continuation key of this destination's index, and nothing else (a token's payload)."""
    if not isinstance(value, dict) or set(value) != {"id", "destination", "due_ms"}:
        return False
    try:
        ident, dest, due = value["id"]["S"], value["destination"]["S"], value["due_ms"]["N"]
    except (KeyError, TypeError):
        return False
    return (
        all(isinstance(v, str) for v in (ident, dest, due))
        and dest == destination
        and ident.startswith(destination + "/")
        and due.isdigit()
        and len(value["id"]) == len(value["destination"]) == len(value["due_ms"]) == 1
    )


def query_params(
    table: str, query: PageQuery, start: Mapping[str, Any] | None, limit: int
) -> dict[str, Any]:
    """`registry.query_params` plus the console's due window and id prefix."""
    params = registry.query_params(
        table,
        query.destination,
        due_before_ms=query.due_before_ms,
        state=query.state,
        page_size=limit,
        start=start,
    )
    values = params["ExpressionAttributeValues"]
    if query.due_after_ms is not None:
        params["KeyConditionExpression"] += " AND due_ms >= :after"
        if query.due_before_ms is not None:  # one condition per key attribute: BETWEEN
            params["KeyConditionExpression"] = "#d = :d AND due_ms BETWEEN :after AND :last"
            values[":last"] = {"N": str(query.due_before_ms - 1)}
            values.pop(":before")
        values[":after"] = {"N": str(query.due_after_ms)}
    if query.id_prefix:
        prefix = "begins_with(message_id, :prefix)"
        current = params.get("FilterExpression")
        params["FilterExpression"] = f"{current} AND {prefix}" if current else prefix
        values[":prefix"] = {"S": query.id_prefix}
    return params


def page(
    table: str, query: PageQuery, start: Mapping[str, Any] | None, timeout: float | None
) -> Flow[Page]:
    """Up to `query.size` records from `start`, soonest first, and the key of the next page."""
    filtered = query.state is not None or bool(query.id_prefix)
    out: list[registry.Record] = []
    key: Mapping[str, Any] | None = start
    queries = examined = 0
    while True:
        # Unfiltered, DynamoDB's Limit is the page; filtered, read a registry page at a time.
        limit = registry.PAGE if filtered else query.size - len(out)
        params = query_params(table, query, key, limit)
        [reply] = yield [Call("dynamodb", "Query", params, timeout=timeout)]
        queries += 1
        if reply.fault is not None:
            raise RegistryError("Query", table, reply.fault.code, reply.fault.detail)
        examined += int(reply.response.get("ScannedCount", 0))
        items = reply.response.get("Items", [])
        out += [r for i in items if (r := registry.record_of(i)) is not None]
        key = reply.response.get("LastEvaluatedKey") or None
        if len(out) >= query.size:
            kept = out[: query.size]
            # More matched than fit, or DynamoDB has more: the next page starts after the last.
            more = len(out) > query.size or key is not None
            following = start_key(kept[-1]) if more else None
            return (yield from _detailed(table, Page(kept, following, queries, examined), timeout))
        if key is None or queries >= MAX_QUERIES:
            following = dict(key) if key is not None else None
            short = key is not None
            page = Page(out, following, queries, examined, short=short)
            return (yield from _detailed(table, page, timeout))


def _detailed(table: str, page: Page, timeout: float | None) -> Flow[Page]:
    """The page's records with their size and attribute names, which the index does not
    project (adding them would rebuild every table's index): one BatchGetItem of the page's
    keys. Where it fails the rows are shown without them."""
    if not page.records:
        return page
    destination = page.records[0].destination
    found = yield from registry.read(
        table, destination, [r.message_id for r in page.records], timeout
    )
    records = [
        dataclasses.replace(
            r,
            size_bytes=found.records[r.message_id].size_bytes,
            attribute_names=found.records[r.message_id].attribute_names,
        )
        if r.message_id in found.records
        else r
        for r in page.records
    ]
    return dataclasses.replace(page, records=records, lookups=1)
