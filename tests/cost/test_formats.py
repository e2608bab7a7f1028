"""Which format a cost input is in, the event log's and the bill's by one rule: a file's by
its name, a local folder's by the data files in it. No Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqsdelay.cost.bill import bill_format, data_files
from sqsdelay.cost.inputs import detect_format
from sqsdelay.errors import InvalidInput


def test_a_name_says_its_format_whatever_its_case_and_compression() -> None:
    assert detect_format(["EVENTS.JSONL.GZ", "b.log", "s3://x/c.ndjson"]) == "json"
    assert detect_format(["part-0.snappy.parquet"]) == "parquet"
    assert bill_format(["BILL.CSV", "cur.csv.gz"]) == "csv"


def test_an_input_folder_is_told_by_its_data_files_as_the_bills_is(tmp_path: Path) -> None:
    """`--input DIR` on a folder of Parquet files (as Spark writes them, beside `_SUCCESS`
    and checksums) is Parquet, as `--bill DIR` is; it needed --format."""
    folder = tmp_path / "events" / "date=2026-01-01"
    folder.mkdir(parents=True)
    for name in ("part-00000.snappy.parquet", "_SUCCESS", ".part-00000.snappy.parquet.crc"):
        (folder / name).write_bytes(b"")
    assert detect_format([str(tmp_path / "events")]) == "parquet"
    assert bill_format([str(tmp_path / "events")]) == "parquet"
    (folder / "more.jsonl.gz").write_bytes(b"")
    with pytest.raises(InvalidInput, match=r"holds files of several formats \(json, parquet\)"):
        detect_format([str(tmp_path / "events")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInput, match=r"holds no \.parquet or \.pq or .* files.*--format"):
        detect_format([str(tmp_path / "empty")])


def test_what_no_name_or_folder_tells_needs_the_option_or_is_the_bills_default() -> None:
    for path in ("s3://bucket/events/", "sqsdelay-events-1-2026-02-01"):
        with pytest.raises(InvalidInput, match=r"cannot tell the format .* give --format json"):
            detect_format([path])
    assert bill_format(["s3://bucket/exports/sqs-cur2/", "cur_export"]) == "parquet"
    with pytest.raises(InvalidInput, match=r"the inputs mix formats \(csv, json\)"):
        detect_format(["a.csv", "b.json"])
    with pytest.raises(InvalidInput, match=r"the bills mix formats \(csv, parquet\)"):
        bill_format(["a.csv", "b.parquet"])


def test_the_bill_folders_filter_admits_the_files_named_outright() -> None:
    """Spark applies `pathGlobFilter` to a file named outright too: without its own name in
    the filter, `cur_export` or `bill.gz` would be read as nothing. Names are matched
    literally; a glob's are not admitted (`exports/*` would admit every file below)."""
    assert data_files("csv", ["/b/bill.gz", "s3://x/exports/", "/b/a,b", "/b/*"]) == (
        r"{*.{csv,csv.gz},bill.gz,exports,a\,b}"
    )
