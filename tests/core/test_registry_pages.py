"""The console's pages of the registry: filters and DynamoDB's continuation keys (pure: a
small in-memory index answers the flow's Query and BatchGetItem). The sealed page tokens
are `test_page_tokens.py`'s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sqsdelay.core import registry
from sqsdelay.core.flows import Call, Reply, drive
from sqsdelay.core.registry_pages import MAX_QUERIES, PageQuery, is_start_key, page, start_key

TABLE = "scheduled"
DEST = "p-orders"


@dataclass
class Index:
    """The `by-due` index of one table: items sorted by (due_ms, id), as DynamoDB's Query
    reads them for one destination (ties in due time kept in a fixed order)."""

    items: list[dict[str, Any]]
    calls: list[Call] = field(default_factory=list)

    def __call__(self, calls: list[Call]) -> list[Reply]:
        self.calls += calls
        return [self._answer(c) for c in calls]

    def _answer(self, call: Call) -> Reply:
        p = call.params
        if call.api == "BatchGetItem":
            keys = {k["id"]["S"] for k in p["RequestItems"][TABLE]["Keys"]}
            found = [i for i in self.items if i["id"]["S"] in keys]
            return Reply({"Responses": {TABLE: found}})
        assert call.api == "Query" and p["IndexName"] == registry.DUE_INDEX
        assert "Scan" not in call.api
        values = p["ExpressionAttributeValues"]
        mine = sorted(
            (i for i in self.items if i["destination"]["S"] == values[":d"]["S"]),
            key=lambda i: (int(i["due_ms"]["N"]), i["id"]["S"]),
        )
        low, high = _bounds(p["KeyConditionExpression"], values)
        mine = [i for i in mine if low <= int(i["due_ms"]["N"]) <= high]
        if "ExclusiveStartKey" in p:
            k = p["ExclusiveStartKey"]
            after = (int(k["due_ms"]["N"]), k["id"]["S"])
            mine = [i for i in mine if (int(i["due_ms"]["N"]), i["id"]["S"]) > after]
        read = mine[: p["Limit"]]  # DynamoDB's Limit counts items read, before the filter
        kept = [i for i in read if _matches(p.get("FilterExpression", ""), values, i)]
        answer: dict[str, Any] = {"Items": kept, "ScannedCount": len(read), "Count": len(kept)}
        if len(mine) > len(read):
            last = read[-1]
            answer["LastEvaluatedKey"] = {
                "id": last["id"],
                "destination": last["destination"],
                "due_ms": last["due_ms"],
            }
        return Reply(answer)


def _bounds(condition: str, values: dict[str, Any]) -> tuple[int, int]:
    low, high = -1, 2**63
    if "BETWEEN" in condition:
        return int(values[":after"]["N"]), int(values[":last"]["N"])
    if ":after" in condition:
        low = int(values[":after"]["N"])
    if ":before" in condition:
        high = int(values[":before"]["N"]) - 1
    return low, high


def _matches(expression: str, values: dict[str, Any], item: dict[str, Any]) -> bool:
    if ":state" in expression and item["state"]["S"] != values[":state"]["S"]:
        return False
    return not (
        ":prefix" in expression and not item["message_id"]["S"].startswith(values[":prefix"]["S"])
    )


def item(message_id: str, due_ms: int, state: str = "scheduled", **more: Any) -> dict[str, Any]:
    return {
        **registry.key(DEST, message_id),
        "destination": {"S": DEST},
        "message_id": {"S": message_id},
        "due_ms": {"N": str(due_ms)},
        "state": {"S": state},
        "route": {"S": "delay-queue"},
        **more,
    }


def all_pages(index: Index, query: PageQuery) -> list[list[registry.Record]]:
    pages, start = [], None
    for _ in range(1000):
        before = len(index.calls)
        got = drive(page(TABLE, query, start, None), index)
        made = index.calls[before:]
        assert sum(c.api == "Query" for c in made) <= MAX_QUERIES
        assert sum(c.api == "BatchGetItem" for c in made) == (1 if got.records else 0)
        assert len(got.records) <= query.size
        pages.append(got.records)
        if got.next_key is None:
            return pages
        assert is_start_key(got.next_key, DEST)
        start = got.next_key
    raise AssertionError("paging did not end")


def test_an_unfiltered_page_is_one_query_of_fifty_and_one_batch_get() -> None:
    index = Index([item(f"m{i:03d}", 1000 + i) for i in range(120)])
    pages = all_pages(index, PageQuery(DEST, state=None))
    assert [len(p) for p in pages] == [50, 50, 20]
    queries = [c for c in index.calls if c.api == "Query"]
    assert [q.params["Limit"] for q in queries] == [50, 50, 50]
    assert [r.message_id for p in pages for r in p] == [f"m{i:03d}" for i in range(120)]


def test_the_rows_carry_size_and_attribute_names_from_the_table() -> None:
    extra = {"size_bytes": {"N": "321"}, "attribute_names": {"SS": ["tenant", "kind"]}}
    index = Index([item("a", 1, **extra)])
    [record] = drive(page(TABLE, PageQuery(DEST), None, None), index).records
    assert record.size_bytes == 321 and set(record.attribute_names) == {"tenant", "kind"}


def test_a_filter_that_matches_few_ends_the_page_short_and_goes_on_from_there() -> None:
    items = [item(f"m{i:05d}", i, "cancelled") for i in range(3000)]
    items.append(item("late-match", 5000))
    index = Index(items)
    first = drive(page(TABLE, PageQuery(DEST, state="scheduled"), None, None), index)
    assert first.records == [] and first.short and first.next_key is not None
    assert first.queries == MAX_QUERIES and first.examined == MAX_QUERIES * registry.PAGE
    assert [r.message_id for p in all_pages(index, PageQuery(DEST)) for r in p] == ["late-match"]


ids = st.text(alphabet="abc-_.:<>\"'/", min_size=1, max_size=6)
entries = st.lists(
    st.tuples(ids, st.integers(0, 50), st.sampled_from(registry.STATES)),
    unique_by=lambda e: e[0],
    max_size=160,
)


@settings(max_examples=150, deadline=None)
@given(
    entries,
    st.sampled_from([None, *registry.STATES]),
    st.one_of(st.none(), st.integers(0, 50)),
    st.one_of(st.none(), st.integers(1, 51)),
    st.sampled_from(["", "a", "b-", "<"]),
    st.integers(1, 60),
)
def test_paging_shows_every_matching_record_once_soonest_first(
    rows: list[tuple[str, int, str]],
    state: registry.State | None,
    after: int | None,
    before: int | None,
    prefix: str,
    size: int,
) -> None:
    """Whatever a producer wrote as ids and however the filters are set, following the
    continuation keys shows each matching record exactly once, in the index's order."""
    index = Index([item(m, due, s) for m, due, s in rows])
    query = PageQuery(DEST, state, after, before, prefix, size)
    shown = [(r.due_ms, r.message_id) for p in all_pages(index, query) for r in p]
    expected = sorted(
        (due, m)
        for m, due, s in rows
        if (state is None or s == state)
        and (after is None or due >= after)
        and (before is None or due < before)
        and m.startswith(prefix)
    )
    assert shown == expected


def test_a_start_key_is_the_index_key_of_the_last_row_and_nothing_else() -> None:
    record = registry.Record(DEST, "x/y", 5, "scheduled", "delay-queue")
    key = start_key(record)
    assert is_start_key(key, DEST)
    assert not is_start_key(key, "p-other")
    assert not is_start_key({**key, "state": {"S": "scheduled"}}, DEST)
    assert not is_start_key({**key, "due_ms": {"N": "5; DROP"}}, DEST)
    assert not is_start_key({**key, "id": {"S": "p-other/x"}}, DEST)
    assert not is_start_key(["id"], DEST)
