"""A Spark DataFrame's rows on the driver as pandas, with as little memory as they need.

`DataFrame.toPandas()` converts Spark's Arrow batches column by column into Series and then
concatenates them into a frame: the data held three times over at once. On the 10M-row
report's grouped rows (128k rows, 31 columns, 42 MiB as pandas) that took the driver from
149 to 303 MiB while the JVM still held its heap, the report's peak (docs/benchmarks.md,
ninth pass). Arrow's own conversion into a block per column needs the batches and one copy.

On the Arrow path the frame is `toPandas()`'s for the column types the report collects
(numbers, strings, booleans, dates, timestamps), nulls included, except that timestamps come
as naive UTC whatever the session's time zone (`toPandas()` gives the session's local time;
the report's own sessions are in UTC). Numeric columns may be read-only views of Arrow's
memory: copy a frame before writing into it in place. Any other column type, repeated column
names, a Spark without `DataFrame.toArrow` (before 4.0, such as EMR's 3.5) and a pyarrow
without what this needs take `toPandas()`.
"""

from __future__ import annotations

from importlib import metadata
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
    fields = df.schema.fields
    plain = all(type(f.dataType).__name__ in _PLAIN for f in fields)
    unique = len({f.name for f in fields}) == len(fields)
    if not (plain and unique and hasattr(df, "toArrow") and _arrow_converts()):
        return df.toPandas()
    table = df.toArrow()
    frame = table.to_pandas(
        date_as_object=True,  # datetime.date, as toPandas gives
        coerce_temporal_nanoseconds=True,  # datetime64[ns], as toPandas gives
        split_blocks=True,  # a block per column, not one more copy to consolidate them
        self_destruct=True,  # frees a column once converted, where its buffers are its own
    )
    del table
    for name in frame.columns:
        if getattr(frame[name].dtype, "tz", None) is not None:
            frame[name] = frame[name].dt.tz_convert(None)  # naive, in UTC
    return frame


def _arrow_converts() -> bool:
    """pyarrow is installed (Spark 4 can collect without it) and knows
    `coerce_temporal_nanoseconds` (pyarrow 13)."""
    try:
        return int(metadata.version("pyarrow").split(".")[0]) >= 13
    except metadata.PackageNotFoundError:
        return False
