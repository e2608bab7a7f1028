"""A Spark DataFrame's rows on the driver as pandas, with as little memory as they need.

`DataFrame.toPandas()` converts Spark's Arrow batches column by column into Series and then
concatenates them into a frame: three copies of the data at once. On the 10M-row report's
grouped rows (128k rows, 31 columns, 42 MiB as pandas) that took the driver from 149 to
303 MiB while the JVM still held its heap, the report's peak (docs/benchmarks.md).
Arrow's own conversion, releasing each column as it goes, needs one copy and the batches.

The same frame as `toPandas()` for the column types the report collects (numbers, strings,
booleans, dates, timestamps), nulls included; timestamps come as naive UTC whatever the
session's time zone. Any other type, and a Spark without `DataFrame.toArrow` (before 4.0,
such as EMR's 3.5), take `toPandas()`.
"""

from __future__ import annotations

from typing import Any

# Spark types whose Arrow column converts to what toPandas gives (pyspark.sql.types names).
_PLAIN = frozenset(
    {
        "BooleanType",
        "ByteType",
        "ShortType",
        "IntegerType",
        "LongType",
        "FloatType",
        "DoubleType",
        "StringType",
        "DateType",
        "TimestampType",
        "TimestampNTZType",
    }
)


def to_pandas(df: Any) -> Any:
    """The rows of `df` as a pandas DataFrame (see the module's doc)."""
    if not hasattr(df, "toArrow") or any(
        type(f.dataType).__name__ not in _PLAIN for f in df.schema.fields
    ):
        return df.toPandas()
    table = df.toArrow()
    # self_destruct frees each Arrow column once converted; split_blocks keeps a block per
    # column rather than copying them into one (pandas consolidates lazily, if ever).
    frame = table.to_pandas(
        date_as_object=True,  # datetime.date, as toPandas gives
        coerce_temporal_nanoseconds=True,
        self_destruct=True,
        split_blocks=True,
    )
    del table
    for name in frame.columns:
        if getattr(frame[name].dtype, "tz", None) is not None:
            frame[name] = frame[name].dt.tz_convert(None)  # naive, in UTC
    return frame
