"""The pricing formulas as SQL text (cost/sql.py): the same numbers as in Python, without a
JVM (DuckDB evaluates the text; its arithmetic and CASE are Spark's for these types)."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from sqsdelay.cost.request_counts import PythonOps, quantities
from sqsdelay.cost.sql import Sql, SqlOps, literal


def test_literals() -> None:
    assert literal(0.5) == "0.5D"  # a DOUBLE: a bare 0.5 is a DECIMAL in Spark SQL
    assert literal(7) == "7" and literal(True) == "true"
    assert literal("it's \\ here") == "'it\\'s \\\\ here'"
    assert str(2 - Sql("x") * 3) == "(2 - (x * 3))"


@settings(max_examples=60, deadline=None)
@given(
    delay=st.integers(0, 400 * 86_400),
    size=st.integers(0, 1_048_576),
    fifo=st.sampled_from([0, 1]),
    park_after=st.sampled_from([3600, 86_400, 2**62]),
)
def test_the_sql_text_computes_what_python_does(
    delay: int, size: int, fifo: int, park_after: int
) -> None:
    options = {"cycle_seconds": 900, "batch_fill": 10, "park_after": park_after}
    expected = quantities(delay, size, ops=PythonOps(), fifo_destination=fifo, **options)
    text = quantities(Sql("d"), Sql("s"), ops=SqlOps(), fifo_destination=Sql("f"), **options)
    names = [n for n in vars(expected) if n != "messages"]
    # DuckDB's greatest, ceil, CASE and arithmetic (`/` divides as a DOUBLE) are Spark's
    # here; the formulas hold no float literal (whose `D` suffix DuckDB would not read).
    select = ", ".join(f"CAST({literal(getattr(text, n))} AS DOUBLE) AS {n}" for n in names)
    rows = duckdb.sql(
        f"SELECT {select} FROM (SELECT {delay}::BIGINT d, {size}::BIGINT s, {fifo} f)"  # noqa: S608
    ).fetchall()
    (row,) = rows
    for name, value in zip(names, row, strict=True):
        assert value == float(getattr(expected, name)), name
