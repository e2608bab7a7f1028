"""The cost report's options, defined once. `sqsdelay cost-report` (cli/costs.py) and the
spark-submit entry (`cost/run.py`) both build their flags from `REPORT_OPTIONS`, and both turn
what was given into a `ReportRequest` (what `run_report` is asked for) with
`report_arguments`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqsdelay.core import quotas
from sqsdelay.cost.fold import TOP_DESTINATIONS
from sqsdelay.cost.inputs import FORMATS
from sqsdelay.errors import InvalidInput

if TYPE_CHECKING:
    from sqsdelay.cost.operating_cost import Running
    from sqsdelay.cost.pricing import Pricing
    from sqsdelay.cost.whatif import WhatIf


@dataclass(frozen=True)
class ReportRequest:
    """What a report is of, how it is priced and where it goes: the options below as given
    (`report_arguments`), and what the caller adds (the cycle, the registry's and
    Scheduler's names in the bill, a folder for dated copies)."""

    output: str
    pricing: Pricing
    inputs: Sequence[str] = ()
    what_if: WhatIf | None = None
    batch_fill: int = quotas.MAX_BATCH_ENTRIES
    cycle_seconds: int = 900
    input_format: str = "auto"
    bills: Sequence[str] = ()
    bill_format: str = "auto"
    since: datetime | None = None
    until: datetime | None = None
    free_tier: frozenset[str] = frozenset()
    running: Running | None = None
    top: int = TOP_DESTINATIONS
    registry_table: str | None = None
    schedule_group: str | None = None
    snapshots: str | None = None


@dataclass(frozen=True)
class ReportOption:
    name: str  # the keyword, as `run_report`'s caller names it
    help: str
    kind: type = str
    default: Any = None
    many: bool = False  # given several times (the CLI), or with several values (spark-submit)
    flag: str | None = None  # when it is not --name
    choices: tuple[str, ...] = ()  # checked by spark-submit's parser (the CLI checks later)
    least: int | None = None

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")


REPORT_OPTIONS = (
    ReportOption("input", "event log (JSON lines), CSV or Parquet; repeatable", many=True),
    ReportOption("what_if", "generate a workload from a spec", Path),
    ReportOption("pricing", "price file (YAML)", Path),
    ReportOption("batch_fill", "messages per batch call, 1..10", int, quotas.MAX_BATCH_ENTRIES),
    ReportOption(
        "input_format",
        "auto (by suffix), json, logfmt, csv, parquet, cwl-subscription; .gz is read",
        default="auto",
        flag="--format",
        choices=("auto", *FORMATS),
    ),
    ReportOption(
        "bill", "AWS Data Exports bill: CUR 2.0 or FOCUS 1.2 (Parquet or CSV/gzip)", many=True
    ),
    ReportOption(
        "bill_format",
        "auto (by suffix), parquet, csv",
        default="auto",
        choices=("auto", "parquet", "csv"),
    ),
    ReportOption("since", "only events at or after this time (UTC)", datetime),
    ReportOption("until", "only events before this time (UTC)", datetime),
    ReportOption(
        "free_tier",
        "apply the account's free tier: sqs, scheduler (default none)",
        many=True,
        choices=("sqs", "scheduler"),
    ),
    ReportOption("currency", "report currency, other than the price list's"),
    ReportOption("exchange_rate", "units of --currency per unit of the price list's", float),
    ReportOption(
        "running", "how sqsdelay runs (YAML: worker, task size, KMS...), for its cost", Path
    ),
    ReportOption(
        "top_destinations",
        f"destinations named in the tables, the rest summed (default {TOP_DESTINATIONS})",
        int,
        least=1,
    ),
)


def report_arguments(given: dict[str, Any]) -> dict[str, Any]:
    """`ReportRequest`'s fields from the options as given (None or [] when not)."""
    from sqsdelay.cost.operating_cost import load_running
    from sqsdelay.cost.pricing import load_pricing
    from sqsdelay.cost.whatif import load_what_if

    if given["input"] and given["what_if"]:
        raise InvalidInput("give --input or --what-if, not both")
    if not 1 <= given["batch_fill"] <= 10:
        raise InvalidInput("--batch-fill must be 1..10")
    pricing = load_pricing(given["pricing"]).converted(given["currency"], given["exchange_rate"])
    return {
        "inputs": given["input"] or [],
        "pricing": pricing,
        "batch_fill": given["batch_fill"],
        "what_if": load_what_if(given["what_if"]) if given["what_if"] else None,
        "input_format": given["input_format"],
        "bills": given["bill"] or [],
        "bill_format": given["bill_format"],
        "since": given["since"],
        "until": given["until"],
        "free_tier": frozenset(given["free_tier"] or []),
        "running": load_running(given["running"]),
        "top": given["top_destinations"] or TOP_DESTINATIONS,
    }
