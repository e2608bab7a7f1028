"""The request-count formulas (`cost/request_counts.py`) as Spark SQL text, built in Python.

The same `quantities` that evaluate one message (`PythonOps`) build the job's columns. Built
as PySpark `Column`s, every `+`, `*` and `F.when` is a round trip to the JVM (py4j): about
4,000 for one aggregate. Built as SQL text, the aggregation is one `spark.sql` call, parsed
and planned once on the JVM's side.
"""

from __future__ import annotations

from typing import Any


class Sql:
    """A SQL expression, parenthesized whenever it is combined, so that the Python
    expression's precedence is the SQL's."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Sql({self.text!r})"

    def _op(self, op: str, other: Any, swap: bool = False) -> Sql:
        a, b = (literal(other), self.text) if swap else (self.text, literal(other))
        return Sql(f"({a} {op} {b})")

    def __add__(self, other: Any) -> Sql:
        return self._op("+", other)

    def __radd__(self, other: Any) -> Sql:
        return self._op("+", other, swap=True)

    def __sub__(self, other: Any) -> Sql:
        return self._op("-", other)

    def __rsub__(self, other: Any) -> Sql:
        return self._op("-", other, swap=True)

    def __mul__(self, other: Any) -> Sql:
        return self._op("*", other)

    def __rmul__(self, other: Any) -> Sql:
        return self._op("*", other, swap=True)

    def __truediv__(self, other: Any) -> Sql:
        return self._op("/", other)

    def __rtruediv__(self, other: Any) -> Sql:
        return self._op("/", other, swap=True)

    def __gt__(self, other: Any) -> Sql:
        return self._op(">", other)

    def __lt__(self, other: Any) -> Sql:
        return self._op("<", other)


def literal(value: Any) -> str:
    """SQL text for an expression, a number or a string. A float is a DOUBLE literal
    (`0.5D`): a bare `0.5` is a DECIMAL in Spark SQL and would change the sums' types."""
    if isinstance(value, Sql):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value!r}D"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise TypeError(f"no SQL literal for {type(value).__name__}")


class SqlOps:
    """The formulas' operations (`request_counts.Ops`) as SQL text."""

    def ceil(self, x: Any) -> Sql:
        return Sql(f"ceil({literal(x)})")

    def maximum(self, a: Any, b: Any) -> Sql:
        return Sql(f"greatest({literal(a)}, {literal(b)})")

    def where(self, cond: Any, a: Any, b: Any) -> Sql:
        return Sql(f"CASE WHEN {literal(cond)} THEN {literal(a)} ELSE {literal(b)} END")
