"""A micro-batch's outputs, as a processor hands them to the batch driver: the window
results, the late output and the dead letters, each a DataFrame (for DataFrame sinks)
that is collected into rows at most once (for row-list sinks)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


__all__ = ["BatchOutput", "Output", "dead_letter_output", "empty_frame"]


@dataclass
class Output:
    """One output of a batch: a DataFrame for DataFrame sinks, rows (collected) for row-list sinks."""

    frame: DataFrame | None
    to_rows: Callable[[DataFrame], list[Any]]
    hidden: tuple[str, ...] = ()
    """Columns only for ordering the collected rows."""
    empty: Callable[[], DataFrame | None] = lambda: None
    """The output's empty DataFrame, without the hidden columns, built only when a DataFrame sink
    needs it (no rows this batch)."""

    def dataframe(self) -> DataFrame | None:
        return self.empty() if self.frame is None else self.frame.drop(*self.hidden)

    collected: list[Any] | None = None
    """The rows, once collected (every row-list sink of this output gets the same list)."""

    def rows(self) -> list[Any]:
        if self.collected is None:
            self.collected = [] if self.frame is None else self.to_rows(self.frame)
        return self.collected


@dataclass
class BatchOutput:
    results: Output
    late: Output
    dead: Output
    metrics: dict[str, Any]
    per_sink: list[Output] = field(default_factory=list)
    """Per sink of the pipeline, in its order: ``results`` or ``late`` (the same object)."""


_EMPTY: weakref.WeakKeyDictionary[SparkSession, dict[str, DataFrame]] = weakref.WeakKeyDictionary()


def empty_frame(spark: SparkSession, ddl: str) -> DataFrame:
    """A DataFrame of ``ddl`` with no rows and no partitions: a join or cogroup with it runs no
    task for it, and a sink's write of it (a batch with no output) one task with no rows, as
    Spark gives a write of no partitions one empty partition. ``createDataFrame([],
    ddl)`` makes a Python RDD with one empty partition per core, which every action runs through
    Python workers: measured here 67 ms per empty write on a quiet machine, 0.5 s on a loaded one.
    A file write of it still leaves its directory (Spark writes one empty file for the schema).

    One per session and ``ddl``, made once (it took 25–30 ms of the driver's time, each batch
    with nothing to output): a DataFrame is immutable, and this one holds no data.

    It is made in the driver's JVM: PySpark's ``createDataFrame`` makes the session it is
    called on the process's active one, and ``spark`` is a micro-batch's (Spark's clone of the
    query's session), so a run left ``SparkSession.getActiveSession()`` on the clone of its last
    batch instead of the caller's session."""
    made = _EMPTY.setdefault(spark, {})
    if ddl not in made:
        jvm = getattr(spark, "_jvm", None)
        if jvm is None:  # Spark Connect: no driver JVM
            made[ddl] = spark.createDataFrame([], ddl)
        else:
            from pyspark.sql import DataFrame

            schema = jvm.org.apache.spark.sql.types.StructType.fromDDL(ddl)
            made[ddl] = DataFrame(spark._jsparkSession.createDataFrame(spark._jsc.emptyRDD(), schema), spark)
    return made[ddl]


def dead_letter_output(spark: SparkSession, rows: list[dict[str, Any]], sourced: bool = False) -> Output:
    """Dead letters collected as rows (the keyed and general paths) as an :class:`Output` whose
    DataFrame has the native path's columns (:func:`~lowwater.spark.native_sql.dead_ddl`; ``record``
    the element's fields as JSON; for a record that did not parse, a Kafka value's text as it is, or
    null), and with ``sourced`` (the job reads several sources) ``source``, in every batch's frame: a
    batch without dead letters wrote a file or created a table without it, and readers of the
    directory then dropped the later batches' column without a word. Before, a DataFrame sink got
    ``createDataFrame(rows)``, which failed the batch when a column was null in every row."""
    from lowwater.metrics.dead_letters import record_json
    from lowwater.spark.native_sql import dead_ddl

    ddl = dead_ddl({}) + (", source STRING" if sourced else "")

    def record(value: Any) -> str | None:
        if value is None or isinstance(value, str):  # a str: what a source read and could not parse
            return value
        return record_json(value)  # as the native path's to_json writes a struct

    data = [(r.get("reason"), r.get("partition"), r.get("offset"), r.get("file"), record(r.get("record")),
             *([r.get("source")] if sourced else [])) for r in rows]
    return Output(frame=spark.createDataFrame(data, ddl) if data else None, to_rows=lambda _: rows,
                  empty=lambda: spark.createDataFrame([], ddl), collected=rows)
