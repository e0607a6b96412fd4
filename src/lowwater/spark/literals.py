"""Values that change from micro-batch to micro-batch, in Spark plans, without new generated code.

Spark's whole-stage code generation writes an integer literal into the Java source it generates
(``1700000037894L``) and caches compiled classes by their source. A plan that compares with this
batch's watermark is therefore new source every batch: Janino compiles it (twice on two cores:
each task that misses the cache compiles), and the batch's hot loop starts in the interpreter
again before the JIT compiles it anew. Measured on the native path (100k rows per batch,
``benchmarks/scale.py``'s job, ``local[2]``): a 1,313-line class compiled every batch, and a
steady batch took 2.5–3.8 s with the watermark in the code against 1.1–1.9 s with a constant
in its place.

A decimal literal does not help (Spark unwraps ``CAST(bigint AS DECIMAL) <= 123BD`` back to
``bigint <= 123L``), and neither does a one-row projection (the optimizer propagates foldable
aliases through a join). What does: the values as **data**, an inline table (a ``LocalRelation``
after analysis) broadcast to every task and cross-joined, one row. The generated code reads
them from the joined row, so its source is the same every batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["bigint_sql", "with_batch_values"]


def with_batch_values(df: DataFrame, values: dict[str, int]) -> DataFrame:
    """``df`` with one ``BIGINT`` column per ``values`` item (name -> this batch's value), the same in
    every row, whose value is not written into the generated code (module docstring)."""
    from pyspark.sql import functions as F

    names = ", ".join(values)
    row = ", ".join(bigint_sql(v) for v in values.values())
    params = df.sparkSession.sql(f"SELECT * FROM VALUES ({row}) AS _lowwater_batch({names})")
    return df.crossJoin(F.broadcast(params))


def bigint_sql(v: int) -> str:
    """A BIGINT literal as SQL text: the text of the smallest (-9223372036854775808) alone would be a DECIMAL."""
    return f"CAST('{int(v)}' AS BIGINT)"
