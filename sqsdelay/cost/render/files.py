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
    """One sheet per table, with number formats and a totals row (openpyxl)."""
    import pandas as pd

    formats = {COUNT: "#,##0", MONEY: "#,##0.00##"}
    with pd.ExcelWriter(path, engine="openpyxl") as writer:
        for name, table in report.tables.items():
            df = rounded(table)  # the totals row adds up what the sheet shows
            df.to_excel(writer, sheet_name=name)
            sheet = writer.sheets[name]
            columns = list(df.columns)
            total_row = len(df) + 2
            sheet.cell(row=total_row, column=1, value="total")
            for column, _, kind in view(report, name):
                col = columns.index(column) + 2
                if kind == TEXT:
                    continue
                total = float(df[column].sum())
                sheet.cell(row=total_row, column=col, value=round_money(total))
                for row in range(2, total_row + 1):
                    sheet.cell(row=row, column=col).number_format = formats[kind]
            sheet.column_dimensions["A"].width = 24
    return path


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
