"""The Spark engine's sink contract: a micro-batch's output as a DataFrame, Spark's ``foreachBatch`` shape.

A :class:`DataFrameSink` receives ``write(df, batch_id)`` once per micro-batch and output
(window results, the late side output, dead letters). ``df`` is a Spark DataFrame computed
on the executors; the sink writes it with Spark (``df.write...``), so no row passes through
the driver. The contract, as for Spark's ``foreachBatch``:

* **Idempotent per batch id.** After a crash Spark replays the batch it had not committed
  with the same ``batch_id`` and the same rows; the sink must then *replace* what it wrote
  for that id (write to a path or transaction keyed by ``batch_id``), never append twice.
* **Every batch is delivered**, also an empty one (``df`` with no rows): a sink that keeps
  one directory per batch writes an empty one, so a reader sees that the batch happened.
  The exceptions: a sink whose :attr:`DataFrameSink.empty_batches` is False is not called
  for a batch whose output the engine knows is empty (no window fired, no element late or
  dead-lettered), which then runs no Spark job for it; and the keyed and general paths, whose
  outputs' schemas are inferred from their rows, deliver no batch without rows for an output
  before its first row (once an output has columns, its empty batches come with them).
* ``df`` may be read more than once (it is not cached for the sink); an expensive sink can
  ``df.persist()`` and ``unpersist()`` itself.
* ``open()`` is called once before the first ``write``, ``close()`` when the job stops.

The columns of each output (``lowwater.spark.native``): window results have ``key``,
``window_start``, ``window_end`` (epoch ms, BIGINT), ``value`` (the aggregate's own type),
``fire_index`` (INT) and ``window`` (``struct<start: TIMESTAMP, end: TIMESTAMP>``, as
Spark's ``window()`` gives it); the late output has the source's fields, ``partition``,
``offset`` and ``rejected_windows`` (``array<struct<start: BIGINT, end: BIGINT>>``), each named
with the prefix ``source_`` (repeated while taken) where the element has a field of that name,
which keeps its own (a union of several sources, on the keyed path, adds ``source``, the source's
name, before ``partition``, named by the same rule); dead
letters have ``reason``, ``partition``, ``offset``, ``file`` and ``record`` (the source
fields as a JSON string). On the keyed path (any window or process function, per key on the
executors) each output value becomes a JSON object on the executors (a window result's fields;
a dict as it is; anything else as ``value``) and Spark reads them with its JSON schema
inference: window results get the same columns (``fire_index`` BIGINT, and ``window`` beside
``window_start``/``window_end``), a window's late output the same columns as on the native path
(the element's fields, then ``partition``, ``offset`` and
``rejected_windows``), other outputs the fields of their values, in the order the values name them
(Spark's inference would sort them by name). An output's columns keep their
types from batch to batch and across restarts: a batch may add a column (a field is no column
while it has been null in every row), and a batch whose values would change a column's type
fails with :class:`~lowwater.core.errors.OutputSchemaError`, naming the field; a batch without rows gets an
empty DataFrame of those columns (none before the output's first rows). A row-list sink on the late
output gets the elements alone, as Flink's side output gives them, on every path.

The reference runtime keeps row-list sinks (:class:`lowwater.graph.sinks.Sink`); on Spark a
row-list sink still works, by collecting the batch's rows to the driver for it (that is
the user's choice, proportional to the output). A :class:`DataFrameSink` also implements
``write_batch(batch_id, rows)`` where it can, so one pipeline runs on both runtimes; there a late
element reaches it with the late output's columns (:meth:`DataFrameSink.write_records`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lowwater.graph.sinks import Sink
from lowwater.spark.json_rows import to_dict

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lowwater.runtime.records import Record

__all__ = ["DataFrameSink", "ForeachDataFrameSink", "checked_empty_batches", "to_dict"]


class DataFrameSink(Sink):
    """A sink the Spark engine hands DataFrames: ``write(df, batch_id)``, idempotent per batch id."""

    reads_every_row: bool = False
    """True when the first Spark action :meth:`write` runs over ``df`` reads every row of it (a
    plain ``df.write``, not ``df.limit(n).collect()`` first). The native path then counts the
    window results as the sink writes them (``observe``), instead of caching and counting them
    in a job of their own; a write that runs no action (a replay Delta skips) is counted apart.
    Leave it False for a sink that may read part of ``df`` first: the count would be short."""

    empty_batches: bool = True
    """False: the engine does not call :meth:`write` for a batch whose output it knows is empty
    (on the native path, a batch where no window fires, for the results; one with no late or
    dead-lettered element, for those outputs). It knows that on the driver without a Spark job,
    where a sink would have to run one to find out (``df.isEmpty()``), and an empty write is a
    job of its own: 40-60 ms a batch on ``local[2]``, and for a table sink an empty commit. Leave
    it True for a sink that must see every batch id (a directory per batch, a log of batches)."""

    def write(self, df: DataFrame, batch_id: int) -> None:
        raise NotImplementedError

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        """Rows from the reference runtime: as a small DataFrame, written by :meth:`write`, its
        columns typed as the Spark engine types them and kept from batch to batch by this sink
        (:func:`~lowwater.spark.json_rows.settled_rows`); a batch without rows is not written."""
        self._write_settled(batch_id, list(rows))

    def write_records(self, batch_id: int, records: Sequence[Record]) -> None:
        """The reference runtime's batch for this sink (its ``SinkNode`` calls this where a row
        sink gets ``write_batch``): the values, and for the late side output's elements
        (:class:`~lowwater.runtime.records.LateRecord`) also where each came from and the windows that
        rejected it, the columns the Spark paths' late output has (``partition``, ``offset``,
        ``rejected_windows``; ``source`` with several sources). They had the element's fields alone."""
        from lowwater.runtime.records import LateRecord
        from lowwater.spark.json_rows import late_document, late_row

        late = [r for r in records if isinstance(r, LateRecord)]
        if not late or len(late) != len(records):
            self.write_batch(batch_id, [r.value for r in records])
            return
        documents = [late_document(r.value, r.partition, r.offset, r.rejected, r.source) for r in late]
        if self.late_frames or type(self).write_batch is DataFrameSink.write_batch:
            self._write_settled(batch_id, documents, late=True)
        else:  # a sink that writes rows its own way: one flat row each
            self.write_batch(batch_id, [late_row(d) for d in documents])

    late_frames: bool = False
    """The reference runtime's late elements reach :meth:`write` as a frame of the Spark paths'
    late columns (:meth:`write_records`), also where the sink has a ``write_batch`` of its own."""

    def _write_settled(self, batch_id: int, rows: list[Any], late: bool = False) -> None:
        from pyspark.sql import SparkSession

        from lowwater.spark.json_rows import JsonFrames, settled_rows

        if not rows:
            return
        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        frames: JsonFrames = self.__dict__.setdefault("_lw_frames", JsonFrames())
        df, schema = settled_rows(spark, rows, frames, self.__dict__.get("_lw_kept"), f"{self!r}", batch_id,
                                  late=late)
        self.__dict__["_lw_kept"] = schema
        assert df is not None
        self.write(df, batch_id)


class ForeachDataFrameSink(DataFrameSink):
    """Calls ``fn(df, batch_id)`` once per micro-batch, exactly as Spark's ``foreachBatch`` would.

    On the keyed and general paths, an output's batches before its first row (whose columns are
    not known yet) are not delivered (:class:`DataFrameSink`). ``fn`` must be idempotent per
    ``batch_id`` (a replayed batch calls it again with the same rows). With ``empty_batches=False``
    it is not called for a batch whose output is known to be empty (:attr:`DataFrameSink.empty_batches`).
    """

    def __init__(self, fn: Callable[[DataFrame, int], Any], empty_batches: bool = True) -> None:
        from lowwater.core.errors import ConfigurationError

        if not callable(fn):
            raise ConfigurationError("fn", f"expected a function (df, batch_id), got {fn!r}")
        self.fn = fn
        self.empty_batches = checked_empty_batches(empty_batches)

    def write(self, df: DataFrame, batch_id: int) -> None:
        self.fn(df, batch_id)

    def __repr__(self) -> str:
        return f"ForeachDataFrameSink({getattr(self.fn, '__qualname__', self.fn)!r})"


def checked_empty_batches(value: object) -> bool:
    """A sink's ``empty_batches`` argument, which must be a bool: ``"no"`` would be truthy, and every
    batch would be delivered, silently."""
    from lowwater.core.errors import ConfigurationError

    if not isinstance(value, bool):
        raise ConfigurationError("empty_batches", f"expected True or False, got {value!r}")
    return value
