"""The formulas of cost/pricing.py: the price list, each message's quantities and each
model's requests (what they cost is test_money.py's)."""

import math
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsdelay.cost.pricing import (
    AT_SEND,
    PythonOps,
    Quantities,
    Requests,
    idle_polls_per_month,
    load_pricing,
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


META = "currency: USD\nregion: r\neffective_date: 2026-01-01\nsources: [x]\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sqs_tiers: []", "at least 1 item"),
        ("sqs_tiers: []", "region: Field required"),  # a price list says where and when
        ("sqs_tiers: []", "sources: Field required"),
        (
            f"{META}sqs_tiers:\n - {{up_to_requests: 5, standard_per_million: -1, "
            "fifo_per_million: 1}\nfree_requests_per_month: 0\nbilling_chunk_bytes: 1\n"
            "scheduler_per_million: 1\ndynamodb_write_per_million: 1\n"
            "dynamodb_read_per_million: 1",
            "greater than or equal to 0",
        ),
        (
            f"{META}sqs_tiers:\n - {{up_to_requests: 5, standard_per_million: 1, "
            "fifo_per_million: 1}\nfree_requests_per_month: 0\nbilling_chunk_bytes: 1\n"
            "scheduler_per_million: 1\ndynamodb_write_per_million: 1\n"
            "dynamodb_read_per_million: 1",
            "must) have up_to_requests: null",
        ),
        ("[unclosed", "not valid YAML"),
    ],
)
def test_bad_pricing_files_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="pricing file") as info:
        load_pricing(path)
    assert message in str(info.value)


def test_missing_pricing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read pricing file"):
        load_pricing(tmp_path / "nope.yaml")


def test_the_price_list_says_where_when_and_from_where() -> None:
    p = load_pricing()
    assert p.region == "us-east-1" and p.effective_date.year >= 2026
    assert any("sqs/pricing" in u for u in p.sources)
    assert p.scheduler_free_invocations_per_month == 14_000_000


def test_another_currency_needs_a_rate() -> None:
    p = load_pricing()
    with pytest.raises(ConfigError, match="needs --exchange-rate"):
        p.converted("EUR", None)
    with pytest.raises(ConfigError, match="needs --exchange-rate"):
        p.converted("EUR", float("nan"))
    with pytest.raises(ConfigError, match="needs --currency"):
        p.converted(None, 0.9)
    assert p.converted("USD", None) is p and p.converted(None, None) is p
    eur = p.converted("EUR", 0.9)
    assert eur.currency == "EUR"
    assert eur.fifo_price == pytest.approx(p.fifo_price * 0.9)
    assert eur.scheduler_price == pytest.approx(p.scheduler_price * 0.9)
    assert eur.read_unit_price == pytest.approx(p.read_unit_price * 0.9)
    assert eur.sqs_tiers[-1].standard_per_million == pytest.approx(0.24 * 0.9)


@pytest.mark.parametrize("cycle", [1, 2, 5, 60, 300, 899, 900])
def test_the_settings_threshold_is_the_shipped_price_lists_break_even(cycle: int) -> None:
    """Settings know the threshold without the price list (`core/parking.py`): the figure
    written there must be the one the shipped prices give."""
    from sqsdelay.core.parking import park_after_seconds
    from sqsdelay.cost.pricing import park_break_even_seconds

    assert park_after_seconds(cycle) == park_break_even_seconds(load_pricing(), cycle_seconds=cycle)


def test_settings_find_the_park_threshold_without_loading_the_price_list() -> None:
    code = (
        "import sys; from sqsdelay.settings import Settings; "
        "s = Settings(parking='scheduler', "
        "scheduler_role_arn='arn:aws:iam::123456789012:role/r', max_native_delay_seconds=60); "
        "print(s.park_after(), 'sqsdelay.cost.pricing' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["690", "False"]


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
