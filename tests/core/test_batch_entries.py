from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.core.batch_entries import chunk, read_batch_response


@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 400)), max_size=60))
def test_batches_respect_entry_and_size_limits(items: list[tuple[str, int]]) -> None:
    batches = chunk(items, key=lambda i: i[0], size=lambda i: i[1], max_bytes=1000)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(items)))  # every item exactly once
    for b in batches:
        assert 1 <= len(b) <= 10
        assert len({items[i][0] for i in b}) == 1
        assert sum(items[i][1] for i in b) <= 1000
        assert b == sorted(b)


def test_missing_entries_count_as_failures() -> None:
    ok, failed = read_batch_response(
        {
            "Successful": [{"Id": "0", "MessageId": "m"}],
            "Failed": [{"Id": "1", "Code": "X", "Message": "bad", "SenderFault": True}],
        },
        ["0", "1", "2"],
    )
    assert set(ok) == {"0"}
    assert failed["1"].code == "X" and failed["1"].sender_fault
    assert failed["2"].code == "MissingFromResponse"
