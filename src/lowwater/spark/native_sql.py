"""The native path's SQL text: pure functions of the aggregate and the batch's schema.

``schema`` is the dict :meth:`lowwater.spark.native.NativeProcessor._schema` keeps in the
state: ``{"key": <type>, "value": <type>, "fields": [[name, type], ...]}`` (Spark's simple
type strings). Nothing here touches a DataFrame; the few helpers that build a ``Column``
import pyspark when called.

Each built-in aggregate (:data:`lowwater.core.windows.BUILTIN_AGGREGATES`) runs as one or two
*accumulator* columns per (key, window start) and batch: a partial over the batch's
in-window elements, merged over the batches of a window with a SQL aggregate, and turned
into the result value with ``n`` (the element count). :data:`AGGREGATE_SQL` holds them, keyed
by the aggregate's class: an aggregate without an entry fails when the processor is built
(:func:`sql_of`), not in the middle of a stream.

An integer ``sum`` wraps around like Java's ``long`` (Flink's ``SumAggregator``): its high
and low 32 bits are summed apart, which cannot overflow, and the total is wrapped modulo
``2**64`` with shifts and a mask (:data:`WRAP`), which need no decimal arithmetic. A ``DECIMAL(p,s)``
sum is exact, in ``DECIMAL(38,s)`` (Spark's own ``sum`` widens by 10 digits); it was a DOUBLE
cast back to ``DECIMAL(p,s)``, which failed the query (ANSI) once a total passed ``p`` digits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from lowwater.core.errors import PipelineError
from lowwater.core.windows import BUILTIN_AGGREGATES, Avg, BuiltinAggregate, Count, Max, Min, Sum

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, WindowSpec

__all__ = [
    "AGGREGATE_SQL", "INTEGRAL", "LATE_COLUMNS", "RESULT_COLUMNS", "WRAP", "Accumulator", "AggregateSql", "base_types",
    "dead_ddl", "late_ddl", "late_names", "literal", "merge_exprs", "partial_aggregates", "partial_columns",
    "partial_ddl", "python_repr_sql", "quote", "result_ddl", "running_accumulators", "schema_json", "sql_of",
    "value_expr", "window_sql",
]

INTEGRAL = ("bigint", "int", "smallint", "tinyint")
WRAP = "(shiftleft({hi} + shiftright({lo}, 32), 32) | ({lo} & 4294967295))"
"""A signed 64-bit total from the sums of its high (``hi``, signed) and low (``lo``, of
unsigned 32-bit parts, so never negative) 32 bits: ``hi * 2**32 + lo`` is ``(hi + (lo >> 32))
* 2**32 + (lo & 0xFFFFFFFF)``, and the shift to the left wraps modulo ``2**64`` as Java's
``long`` does, where ANSI SQL's ``*`` and ``+`` would raise. Neither sum nears ``2**63``
before ``2**31`` elements. The decimal ``pmod`` it replaced took 0.5 microseconds a row."""

RESULT_COLUMNS = ("key", "window_start", "window_end", "value", "fire_index", "window", "_o1", "_o2", "_o3", "_o4")
"""The window results' columns; ``_o1`` to ``_o4`` only order the collected rows."""


def quote(name: str) -> str:
    """A column name as a SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def literal(text: str) -> str:
    """A string as a SQL literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# -- the aggregates ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Accumulator:
    """One accumulator column of an aggregate."""

    name: str
    """The column (``acc``, ``acc_hi``, ``acc_lo``); merged columns and base columns prefix it."""
    type: str
    """Its SQL type."""
    partial: str
    """The batch's partial per (key, window start): an aggregate over ``_v``, the element's value,
    null unless the element is in a window (so the aggregate needs no condition of its own)."""
    merge: Literal["sum", "min", "max"]
    """How partials (and a running aggregate over late elements) combine."""
    element: str | None
    """One late element's contribution (SQL over its value ``v``); ``None``: no accumulator (count)."""


@dataclass(frozen=True)
class AggregateSql:
    """A built-in aggregate in SQL, for one value type."""

    accumulators: tuple[Accumulator, ...]
    value_type: str
    """The result's SQL type."""
    value: str
    """The result from merged accumulators: ``{acc}`` (the accumulator prefix) and ``{n}``."""


def _sum(value: str) -> AggregateSql:
    if value in INTEGRAL:  # wraps like Java's long
        return AggregateSql((
            Accumulator("acc_hi", "BIGINT", "sum(shiftright(CAST(_v AS BIGINT), 32))", "sum",
                        "shiftright(CAST(v AS BIGINT), 32)"),
            Accumulator("acc_lo", "BIGINT", "sum(CAST(_v AS BIGINT) & 4294967295)", "sum",
                        "CAST(v AS BIGINT) & 4294967295"),
        ), "bigint", WRAP.format(hi="{acc}_hi", lo="{acc}_lo"))
    if value.startswith("decimal("):  # exact, as Python's Decimal sums on the reference runtime
        total = f"DECIMAL(38,{value[:-1].split(',')[1]})"
        return AggregateSql((Accumulator("acc", total, f"sum(CAST(_v AS {total}))", "sum", f"CAST(v AS {total})"),),
                            total.lower(), f"CAST({{acc}} AS {total})")
    value_type = "double" if value in ("float", "double") else value
    return AggregateSql((_double_acc(),), value_type, f"CAST({{acc}} AS {value_type})")


def _double_acc() -> Accumulator:
    return Accumulator("acc", "DOUBLE", "sum(CAST(_v AS DOUBLE))", "sum", "CAST(v AS DOUBLE)")


def _count(_: str) -> AggregateSql:
    return AggregateSql((Accumulator("acc", "BIGINT", "CAST(NULL AS BIGINT)", "sum", None),), "bigint",
                        "CAST({n} AS BIGINT)")


def _avg(value: str) -> AggregateSql:
    if value.startswith("decimal("):  # the exact sum, as a DOUBLE, divided: Avg.get_result's float
        return AggregateSql(_sum(value).accumulators, "double", "CAST({acc} AS DOUBLE) / {n}")
    if value in INTEGRAL:
        # the exact sum, as a DOUBLE, divided, as Avg.get_result divides a sum of ints: until session
        # 65 a sum of DOUBLEs, which lost the last bits past 2**53 (2**53 + 1 and 1 averaged to
        # 2**52, the other paths 2**52 + 1: a user probe). In a column of its own, acc_x: a
        # checkpoint's partials of before hold their DOUBLE sum in acc (null in the new ones, and
        # acc_x null in the old), so a window open across the upgrade adds both
        return AggregateSql((
            Accumulator("acc", "DOUBLE", "CAST(NULL AS DOUBLE)", "sum", "0D"),
            Accumulator("acc_x", "DECIMAL(38,0)", "sum(CAST(_v AS DECIMAL(38,0)))", "sum", "CAST(v AS DECIMAL(38,0))"),
        ), "double", "(coalesce(CAST({acc}_x AS DOUBLE), 0D) + coalesce({acc}, 0D)) / {n}")
    return AggregateSql((_double_acc(),), "double", "{acc} / {n}")


def _extremum(kind: Literal["min", "max"]) -> Callable[[str], AggregateSql]:
    def of(value: str) -> AggregateSql:
        acc = Accumulator("acc", value, f"{kind}(_v)", kind, "v")
        return AggregateSql((acc,), value, f"CAST({{acc}} AS {value})")

    return of


AGGREGATE_SQL: dict[type[BuiltinAggregate], Callable[[str], AggregateSql]] = {
    Sum: _sum, Count: _count, Min: _extremum("min"), Max: _extremum("max"), Avg: _avg,
}
"""Each built-in aggregate's SQL, given the value's SQL type."""


def sql_of(aggregate: str) -> Callable[[str], AggregateSql]:
    """The SQL of the built-in aggregate called ``aggregate``, given the value's SQL type.

    Raises :class:`PipelineError` for an aggregate with no entry in :data:`AGGREGATE_SQL`."""
    cls = BUILTIN_AGGREGATES.get(aggregate)
    of = AGGREGATE_SQL.get(cls) if cls is not None else None
    if of is None:
        raise PipelineError(f"the built-in aggregate {aggregate!r} has no SQL on the native Spark path: "
                            "add it to lowwater.spark.native_sql.AGGREGATE_SQL")
    return of


def partial_aggregates(agg: AggregateSql, count: bool = True) -> list[str]:
    """The per-(key, window) partial, over the rows of one (key, window start): every one is an
    element in that window (``cnt``), whatever its class, which is the window start's and
    which the driver decides (no literal of the watermark in the plan: spark/literals.py).
    Without ``count``, no ``cnt``: the aggregation counts the elements otherwise (tumbling
    windows, where each element is one row: :func:`partial_columns`)."""
    return [*(f"{a.partial} AS {a.name}" for a in agg.accumulators), *(["count(1) AS cnt"] if count else [])]


def partial_columns(agg: AggregateSql, count: str = "cnt") -> list[str]:
    """The columns of a partial as written to the window store; ``count`` is the column that
    holds its element count."""
    return [*(a.name for a in agg.accumulators), f"{count} AS n"]


def partial_ddl(agg: AggregateSql, schema: dict[str, Any]) -> str:
    """The window store's partials."""
    accs = ", ".join(f"{a.name} {a.type}" for a in agg.accumulators)
    return f"key {schema['key']}, {accs}, n BIGINT"


def merge_exprs(agg: AggregateSql, prefix: str = "", late: bool = False) -> list[str]:
    """The partials of a (key, window start) merged, the columns named with ``prefix``; with
    ``late``, also ``nl``, the elements that came late but allowed (a column the window store's
    read adds, :meth:`lowwater.spark.window_store.WindowStore.read`)."""
    accs = [f"{a.merge}({a.name}) AS {prefix}{a.name}" for a in agg.accumulators]
    return [*accs, f"sum(n) AS {prefix}n", *([f"sum(nl) AS {prefix}nl"] if late else [])]


def base_types(agg: AggregateSql) -> list[tuple[str, str]]:
    """The merged columns (prefix ``b_``) and their types, for late fires with no stored contents."""
    return [*((f"b_{a.name}", a.type) for a in agg.accumulators), ("b_n", "BIGINT"), ("b_nl", "BIGINT")]


def value_expr(agg: AggregateSql, acc: str, n: str) -> str:
    """The result value from merged accumulators (``acc`` their prefix) and the count ``n``."""
    return agg.value.format(acc=acc, n=n)


def running_accumulators(agg: AggregateSql, order: WindowSpec) -> dict[str, Column]:
    """The accumulators after each late element: the stored ones (``b_``) and the running
    aggregate of the late elements up to it (``order``)."""
    from pyspark.sql import functions as F

    cols: dict[str, Column] = {}
    for a in agg.accumulators:
        if a.element is None:
            cols[a.name] = F.lit(None).cast("bigint")
        elif a.merge == "sum":
            zero = "0D" if a.type == "DOUBLE" else "0"
            cols[a.name] = F.expr(f"coalesce(b_{a.name}, {zero})") + F.sum(F.expr(a.element)).over(order)
        elif a.merge == "min":
            cols[a.name] = F.least(F.col(f"b_{a.name}"), F.min(F.expr(a.element)).over(order))
        else:
            cols[a.name] = F.greatest(F.col(f"b_{a.name}"), F.max(F.expr(a.element)).over(order))
    return cols


# -- the outputs' types -------------------------------------------------------------------------
def result_ddl(agg: AggregateSql, schema: dict[str, Any]) -> str:
    return (f"key {schema['key']}, window_start BIGINT, window_end BIGINT, value {agg.value_type}, "
            "fire_index INT, window STRUCT<start: TIMESTAMP, end: TIMESTAMP>")


LATE_COLUMNS = ("partition", "offset", "rejected_windows")
"""The late output's own columns, after the element's fields."""


def late_names(fields: Iterable[str]) -> tuple[str, str, str]:
    """The late output's own columns (:data:`LATE_COLUMNS`) beside an element of ``fields``: each
    prefixed with ``source_`` (again, until no field has the name) where the element has a field of
    that name (the same rule on every path: :mod:`lowwater.spark.json_rows` for the keyed path)."""
    names = set(fields)
    part, off, windows = (_free(c, names) for c in LATE_COLUMNS)
    return part, off, windows


def late_source_name(fields: Iterable[str]) -> str:
    """The late output's ``source`` column beside an element of ``fields`` (the keyed path's, where
    several sources reach the operator), named by :func:`late_names`' rule."""
    return _free("source", set(fields))


def _free(name: str, names: set[str]) -> str:
    while name in names:
        name = f"source_{name}"
    return name


def late_ddl(schema: dict[str, Any]) -> str:
    part, off, windows = late_names(f for f, _ in schema["fields"])
    cols = [f"{quote(f)} {t}" for f, t in schema["fields"]]
    return ", ".join([*cols, f"{part} INT", f"{off} BIGINT",
                      f"{windows} ARRAY<STRUCT<start: BIGINT, end: BIGINT>>"])


def dead_ddl(_: dict[str, Any]) -> str:
    return "reason STRING, partition INT, offset BIGINT, file STRING, record STRING"


def python_repr_sql(text: str) -> str:
    """SQL for Python's ``repr`` of the string ``text`` (SQL), as the reference runtime and the keyed
    and general paths word a reason with it (``BadRecordError.unparsed``, ``non_numeric``): in single
    quotes, or double ones where the text has a single quote and no double one; the quote and the
    backslash escaped; tab, newline and return as ``\\t``, ``\\n``, ``\\r``; and every other
    character Python does not print (Unicode's other and separator categories, bar the space) as
    ``\\xhh``, ``\\uhhhh`` or ``\\Uhhhhhhhh``. Character by character (a code point each), so only
    for the few rows that need it (dead letters). Java's Unicode tables can be a version behind
    Python's: a character assigned since then is escaped here and printed there."""
    def body(q: int) -> str:
        code = "ascii(c)"  # the code point of the one character
        hexed = (f"CASE WHEN {code} < 256 THEN concat(chr(92), 'x', lpad(lower(hex({code})), 2, '0')) "
                 f"WHEN {code} < 65536 THEN concat(chr(92), 'u', lpad(lower(hex({code})), 4, '0')) "
                 f"ELSE concat(chr(92), 'U', lpad(lower(hex({code})), 8, '0')) END")
        each = (f"CASE WHEN c = chr({q}) OR c = chr(92) THEN concat(chr(92), c) "
                "WHEN c = chr(9) THEN concat(chr(92), 't') WHEN c = chr(10) THEN concat(chr(92), 'n') "
                "WHEN c = chr(13) THEN concat(chr(92), 'r') WHEN c = ' ' THEN c "
                f"WHEN c RLIKE {literal('[' + chr(92) + 'p{C}' + chr(92) + 'p{Z}]')} THEN {hexed} ELSE c END")
        chars = f"regexp_extract_all({text}, '(?s)(.)', 1)"  # code points, not UTF-16 units
        return f"concat(chr({q}), array_join(transform({chars}, c -> {each}), ''), chr({q}))"

    return (f"CASE WHEN instr({text}, chr(39)) > 0 AND instr({text}, chr(34)) = 0 THEN {body(34)} "
            f"ELSE {body(39)} END")


TIMESTAMP_MILLIS = (2**63 - 1) // 1000
"""The largest epoch millisecond a TIMESTAMP (microseconds in 64 bits) holds, and minus it the smallest
taken here: ``timestamp_millis`` of one further out fails the query with ``long overflow``."""


def window_sql(start: str, end: str) -> str:
    """The ``window`` column (Spark's ``window()`` struct), as SQL over epoch-millisecond ``start`` and
    ``end``; a bound no TIMESTAMP holds (a global window's, the 64-bit ends) is null."""
    def bound(ms: str) -> str:
        return f"CASE WHEN {ms} BETWEEN {-TIMESTAMP_MILLIS} AND {TIMESTAMP_MILLIS} THEN timestamp_millis({ms}) END"

    return f"named_struct('start', {bound(start)}, 'end', {bound(end)})"


def schema_json(df: DataFrame) -> str:
    return json.dumps(json.loads(df.schema.json()), sort_keys=True)
