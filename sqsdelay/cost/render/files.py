"""The report's files: a CSV per table, summary.json, report.html, report.xlsx and the
FOCUS rows, money rounded the one way; and Spark's own (`write_csv`, `publish`), whose rows
never pass through the driver.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqsdelay.cost import focus as focus_rows
from sqsdelay.cost.money import round_money
from sqsdelay.cost.render.html import render_html, view
from sqsdelay.cost.render.text import COUNT, MONEY, TEXT
from sqsdelay.cost.summary import Report


def write_xlsx(report: Report, path: Path) -> Path:
    """One sheet per table, with number formats and a totals row. Streamed a row at a time
    (openpyxl's write-only mode): cell by cell, 30,000 rows took 26 s."""
    from openpyxl import Workbook

    formats = {COUNT: "#,##0", MONEY: "#,##0.00##"}
    book = Workbook(write_only=True)
    for name, table in report.tables.items():
        kinds = {column: kind for column, _, kind in view(report, name) if kind != TEXT}
        df = rounded(table)  # the totals row adds up what the sheet shows
        number_formats = [formats[kinds[c]] if c in kinds else None for c in df.columns]
        _write_sheet(book.create_sheet(name), df, number_formats)
    book.save(path)
    return path


def _write_sheet(sheet: Any, df: Any, number_formats: list[str | None]) -> None:
    """The index and the columns with their headings, then the totals of the formatted
    columns; a column's format on its values and its total."""
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.styles import Alignment, Border, Font, Side

    thin = Side(style="thin")
    # The headings and the index as pandas' to_excel styled them (the sheets were its).
    heading = {
        "font": Font(bold=True),
        "border": Border(left=thin, right=thin, top=thin, bottom=thin),
        "alignment": Alignment(horizontal="center", vertical="top"),
    }

    def cell(value: Any, **style: Any) -> Any:
        made = WriteOnlyCell(sheet, value=value)
        for key, setting in style.items():
            setattr(made, key, setting)
        return made

    def formatted(value: Any, number_format: str | None) -> Any:
        return value if number_format is None else cell(value, number_format=number_format)

    sheet.column_dimensions["A"].width = 24
    label = df.index.name
    sheet.append(
        [None if label is None else cell(label, **heading), *(cell(c, **heading) for c in df)]
    )
    columns = [df[c].tolist() for c in df.columns]
    for i, index in enumerate(df.index.tolist()):
        values = (_excel_value(column[i]) for column in columns)
        sheet.append(
            [
                cell(index, **heading),
                *(formatted(v, f) for v, f in zip(values, number_formats, strict=True)),
            ]
        )
    totals = (
        None if f is None else formatted(round_money(float(df[c].sum())), f)
        for c, f in zip(df.columns, number_formats, strict=True)
    )
    sheet.append(["total", *totals])


def _excel_value(value: Any) -> Any:
    """A value as pandas' to_excel writes it: an empty cell for NaN, "inf" for infinity."""
    if isinstance(value, float):
        if value != value:
            return None
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
    return value


def rounded(df: Any) -> Any:
    """Money columns (`*_cost`, `*_usd`) rounded by `round_money`, for the files."""
    out = df.copy()
    for column in out.columns:
        if str(column).endswith(("_cost", "_usd")):
            out[column] = out[column].map(lambda x: round_money(float(x)))
    return out


def write(report: Report, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, df in report.tables.items():
        path = out_dir / f"{name}.csv"
        rounded(df).to_csv(path)
        written.append(path)
    summary = out_dir / "summary.json"
    summary.write_text(json.dumps({**report.summary, "assumptions": report.assumptions}, indent=2))
    page = out_dir / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    book = write_xlsx(report, out_dir / "report.xlsx")
    written += [summary, page, book]
    if report.focus is not None:  # next to a FOCUS export of the bill
        focus = out_dir / focus_rows.FILE
        report.focus.to_csv(focus, index=False)
        written.append(focus)
    return written


def write_csv(spark: Any, df: Any, target: str, name: str, order: Sequence[str] = ()) -> None:
    """`df` as one CSV file `<target>/<name>`, sorted by `order`, written by Spark (a path or
    a Hadoop URI): the rows never pass through the driver."""
    jvm = spark._jvm
    path_cls = jvm.org.apache.hadoop.fs.Path
    base = target.rstrip("/") if "://" in target else Path(target).resolve().as_uri()
    parts = f"{base}/_{name}.parts"
    df.coalesce(1).sortWithinPartitions(*order).write.mode("overwrite").option(
        "header", True
    ).option("escape", '"').csv(parts)
    fs = path_cls(parts).getFileSystem(spark._jsc.hadoopConfiguration())
    (part,) = fs.globStatus(path_cls(parts + "/part-*"))
    dest = path_cls(f"{base}/{name}")
    fs.delete(dest, False)
    fs.rename(part.getPath(), dest)
    fs.delete(path_cls(parts), True)


def publish(spark: Any, local_dir: str, target: str) -> None:
    """Copy the report from the driver's disk to `target` when it is a Hadoop URI (s3a://,
    hdfs://, file://), e.g. on a cluster whose driver disk is ephemeral."""
    jvm = spark._jvm
    path_cls = jvm.org.apache.hadoop.fs.Path
    dest = path_cls(target)
    fs = dest.getFileSystem(spark._jsc.hadoopConfiguration())
    fs.mkdirs(dest)
    for name in sorted(os.listdir(local_dir)):
        fs.copyFromLocalFile(
            False,
            True,
            path_cls(os.path.join(local_dir, name)),
            path_cls(target.rstrip("/") + "/" + name),
        )
