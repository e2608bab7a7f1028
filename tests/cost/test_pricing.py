"""The price list (cost/pricing.py): a bad file is a clear error, the list says where, when
and from where, another currency needs a rate, the parking break-even it implies; and the
formulas' old names, moved to cost/request_counts.py, still import from it with a warning."""

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from sqsdelay.cost import pricing, request_counts
from sqsdelay.cost.pricing import load_pricing
from sqsdelay.errors import ConfigError

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


@pytest.mark.parametrize("name", sorted(pricing.MOVED))
def test_a_formulas_old_name_still_imports_from_pricing_and_warns_where_it_went(
    name: str,
) -> None:
    with pytest.warns(DeprecationWarning) as caught:
        old = getattr(pricing, name)
    assert old is getattr(request_counts, name)
    (warning,) = caught
    assert f"sqsdelay.cost.pricing.{name} is deprecated" in str(warning.message)
    assert f"use sqsdelay.cost.request_counts.{name}" in str(warning.message)
    assert warning.filename == __file__  # it points at the caller's line


def test_the_old_from_import_form_warns_too_and_the_price_list_does_not() -> None:
    with pytest.warns(DeprecationWarning, match=r"pricing\.quantities is deprecated"):
        from sqsdelay.cost.pricing import quantities
    assert quantities is request_counts.quantities
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from sqsdelay.cost.pricing import Pricing, park_break_even_seconds  # noqa: F401
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        pricing.nothing  # noqa: B018
