"""Values that change from micro-batch to micro-batch, in Spark expressions, without new code.

Spark's whole-stage code generation writes an integer literal into the Java source it generates
(``123L``), and caches compiled classes by their source. A plan that compares with this batch's
watermark or stamps this batch's id is therefore new source every batch: Janino compiles it,
and the JIT compiles its hot methods again. Measured on the keyed path (100k rows per batch,
``benchmarks/sessions.py``'s job): 4 new classes per batch, and 2.6–3.2 s of C2 compiler
threads' CPU in every steady-state batch, more than all task threads together.

A decimal literal is not written into the source: the generated class gets it as a reference
(``references[i]``), so the source, and the compiled class, stay the same from batch to batch.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["batch_value"]

DECIMAL = "DECIMAL(20,0)"
"""Every 64-bit integer, and the same type for every value (so the same code)."""


def batch_value(value: int) -> Column:
    """``value``, a 64-bit integer, as a ``DECIMAL(20,0)`` literal: compare a ``BIGINT`` column with it
    (Spark widens the column), and the generated code does not depend on ``value``. Do not cast it to
    ``BIGINT``: the optimizer folds that cast into a ``BIGINT`` literal, which is written into the code."""
    from pyspark.sql import functions as F

    return F.lit(Decimal(int(value))).cast(DECIMAL)


def batch_sql(value: int) -> str:
    """:func:`batch_value` as SQL text, for ``where``/``selectExpr`` strings."""
    return f"CAST({int(value)}BD AS {DECIMAL})"
