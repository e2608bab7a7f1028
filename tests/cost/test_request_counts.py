"""How many requests a message makes (cost/request_counts.py): each message's quantities and
each model's requests, one message at a time and summed by usage month (what they cost is
test_money.py's)."""

import math
from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.cost.request_counts import (
    AT_SEND,
    PythonOps,
    Quantities,
    Requests,
    idle_polls_per_month,
    quantities,
    requests,
)
from sqsdelay.errors import ConfigError

OPS = PythonOps()


def test_every_started_64_kib_is_a_request() -> None:
    one = requests(1925, 65_536, ops=OPS)
    two = requests(1925, 65_537, ops=OPS)
    assert (one.exact_fifo, one.exact_standard) == (6, 1)
    # first send 2 + 2 passes x (receive 2 + delete 1) + 1 requeue send 2; hand-over 2
    assert (two.exact_fifo, two.exact_standard) == (10, 2)


def test_batched_with_full_batches() -> None:
    r = requests(31_536_000, 1024, ops=OPS, batch_fill=10)
    assert r.batched_fifo + r.batched_standard == pytest.approx(1 + 35_039 * 0.3)


@given(st.integers(0, 10**8), st.integers(1, 1_048_576))
def test_batch_fill_one_is_the_exact_count(delay: int, size: int) -> None:
    r = requests(delay, size, ops=OPS, batch_fill=1)
    assert r.batched_fifo == pytest.approx(r.exact_fifo)
    assert r.batched_standard == pytest.approx(r.exact_standard)


@given(st.integers(0, 10**8), st.integers(1, 1_048_576), st.integers(1, 10))
def test_batching_never_costs_more(delay: int, size: int, fill: int) -> None:
    r = requests(delay, size, ops=OPS, batch_fill=fill)
    assert r.batched_fifo <= r.exact_fifo + 1e-9
    assert r.batched_standard <= r.exact_standard + 1e-9


def test_batch_fill_is_bounded() -> None:
    with pytest.raises(ConfigError):
        requests(1000, 1, ops=OPS, batch_fill=11)


def test_idle_polling_is_about_130_thousand_a_month() -> None:
    assert idle_polls_per_month() == 129_600
    assert idle_polls_per_month(3) == 388_800


# One message: its delay, size, whether its destination is FIFO, the month it was sent in
# (of six), and the shares of its life in that month and the ones after.
MESSAGE = st.tuples(
    st.integers(0, 10**8),
    st.integers(0, 1_048_576),
    st.sampled_from([0, 1]),
    st.integers(0, 2),
    st.lists(st.integers(0, 100), min_size=1, max_size=4),
)


@given(st.lists(MESSAGE, min_size=1, max_size=8), st.sampled_from([10_020, 2**62]))
def test_every_models_requests_by_usage_month_are_never_negative_and_add_up(
    messages: list[tuple[int, int, int, int, list[int]]], park_after: int
) -> None:
    """As the cost job weights them: quantities at send (`AT_SEND`) in the month a message
    was sent, the others by the share of its life in each month (a delay of 0: all in the
    month it was sent). A FIFO destination's Scheduler what-if showed negative standard
    requests in the months after the send (its chunks counted at send, its staged chunks
    over the life)."""
    months: list[dict[str, float]] = [{f.name: 0.0 for f in fields(Quantities)} for _ in range(6)]
    whole = {f.name: 0.0 for f in fields(Quantities)}
    for delay, size, fifo, sent, shares in messages:
        q = quantities(delay, size, ops=OPS, park_after=park_after, fifo_destination=fifo)
        if delay == 0 or not any(shares):
            shares = [1]
        for i, share in enumerate(shares):
            life = share / sum(shares)
            for name, value in vars(q).items():
                at_send = name in (*AT_SEND, "messages")
                months[sent + i][name] += value * ((i == 0) if at_send else life)
        for name, value in vars(q).items():
            whole[name] += value
    by_month = [vars(Requests.of(Quantities(**m))) for m in months]
    total: dict[str, Any] = vars(Requests.of(Quantities(**whole)))
    for month in by_month:
        assert not {k: v for k, v in month.items() if v < -1e-6}
    for name, value in total.items():
        assert math.isclose(sum(m[name] for m in by_month), value, rel_tol=1e-9, abs_tol=1e-6)


@given(st.integers(0, 10**8), st.integers(0, 1_048_576), st.sampled_from([0, 1]))
def test_a_fifo_destinations_standard_requests_are_its_staging_queues(
    delay: int, size: int, fifo: int
) -> None:
    """The estimate books them to the delay-queue component, as the bill books the staging
    queue's lines: all of them, for either route, and none of a standard destination's."""
    for park_after in (10_020, 2**62):
        q = quantities(delay, size, ops=OPS, park_after=park_after, fifo_destination=fifo)
        r = Requests.of(q)
        assert r.batched_staging == pytest.approx(fifo * r.batched_standard)
        assert r.batched_staging == pytest.approx(fifo * r.parked_standard)
