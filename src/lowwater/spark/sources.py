"""Sources the Spark engine reads as streaming DataFrames.

Every source yields the same columns, so the engine needs to know nothing else:

============== ======= ==========================================================
``_partition``  int     the source partition (a Kafka ``(topic, partition)``, a log dir)
``_offset``     long    the record's position in its partition, or null
``_source_ts``  long    the source timestamp in epoch ms (Kafka's record timestamp), or null
``_seq``        long    the arrival order within the micro-batch, or null for (partition, offset)
*fields*        any     the element's fields, as top-level columns
============== ======= ==========================================================

An element (what user functions see) is the dict of the field columns. The base class
is in :mod:`lowwater.spark.source_base`, the DataFrame and Kafka-shaped sources in
:mod:`lowwater.spark.dataframe_source`; this module re-exports them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lowwater.core.errors import ConfigurationError
from lowwater.graph.sources import SourceBatch, SourceRecord
from lowwater.io.batch_files import BatchFileError, batch_files, read_batch_file
from lowwater.metrics.dead_letters import exact_json
from lowwater.spark.dataframe_source import DataFrameSource, KafkaShapedSource
from lowwater.spark.source_base import STANDARD_COLUMNS, SparkSource
from lowwater.util.files import atomic_write

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lowwater.io import PartitionedLogReader
    from lowwater.io.log_batches import LogBatching

__all__ = [
    "STANDARD_COLUMNS", "BatchFileError", "BatchFilesSource", "DataFrameSource", "KafkaShapedSource",
    "PartitionedLogSource", "SparkSource",
]


class _Default:
    """The type of a parameter's default that depends on other parameters."""

    def __repr__(self) -> str:
        return "<default>"


_DEFAULT = _Default()


class BatchFilesSource(SparkSource):
    """Micro-batches written as JSON-lines files, one file per batch, read in order.

    Each line is ``{"partition": p, "offset": o, "seq": i, "timestamp": ms|null, "value": {...}}``.
    Every micro-batch is the next file in name order (``batch-00000000.jsonl``, ...; on Spark in
    modification-time order, which :meth:`write` sets to the name order); an empty file is an
    empty micro-batch. The scenario runner and tests use it to cut Spark's
    micro-batches exactly where a transcript does.

    Both runtimes read a file with one function (:func:`~lowwater.io.batch_files.read_batch_data`;
    on Spark in ``mapInArrow`` over Spark's binary file source, :mod:`lowwater.spark.batch_files_stream`),
    so they see the same
    elements: ``value_fields`` are read by the rules of :mod:`lowwater.io.fields` (``STRING``
    takes a string, ``BIGINT`` an integer in its range, a ``DECIMAL`` exactly, ``TIMESTAMP`` an
    ISO-8601 string as epoch ms, ...), and a record whose value is not an object or has a field
    of another type is a dead letter with the reason. A line that is not a record of the format
    (not JSON, no integer ``partition``) fails the run with :class:`BatchFileError`, naming the
    file and line: no partition can count it.
    """

    def __init__(self, directory: str | os.PathLike[str], value_fields: Sequence[tuple[str, str]],
                 partitions: Sequence[int], processing_times_ms: Sequence[int] | None = None) -> None:
        from lowwater.io.fields import parse_fields

        self.directory = Path(directory)
        self.value_fields = list(value_fields)
        self.declared_fields = parse_fields(value_fields)
        self._partitions = list(partitions)
        self._processing_times = list(processing_times_ms) if processing_times_ms is not None else None

    @staticmethod
    def write(directory: str | os.PathLike[str], batches: Sequence[Sequence[dict[str, Any]]],
              partition_of: str = "partition") -> None:
        """Write ``batches`` of element dicts as batch files (offsets per partition, seq per batch); a
        ``Decimal`` is a JSON number with exactly its digits, as a ``DECIMAL`` field reads it."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        offsets: dict[int, int] = {}
        for i, batch in enumerate(batches):
            path = d / f"batch-{i:08d}.jsonl"
            lines = []
            for seq, e in enumerate(batch):
                p = int(e.get(partition_of, 0) or 0)
                off = offsets.get(p, 0)
                offsets[p] = off + 1
                lines.append(exact_json({"partition": p, "offset": off, "seq": seq, "timestamp": None, "value": e},
                                        allow_nan=False))
                lines.append("\n")
            atomic_write(path, "".join(lines), fsync=False)
            os.utime(path, (1_000_000 + i, 1_000_000 + i))  # Spark takes new files in mtime order

    def partitions(self) -> list[int]:
        return list(self._partitions)

    def processing_times(self) -> list[int] | None:
        """The clock at the end of each batch, as given: both runtimes read it (a ``SparkRuntime``
        without a ``clock`` of its own, where it took the system clock)."""
        return None if self._processing_times is None else list(self._processing_times)

    def fields(self) -> list[str]:
        return [name for name, _ in self.value_fields]

    @staticmethod
    def infer_fields(batches: Sequence[Sequence[dict[str, Any]]]) -> list[tuple[str, str]]:
        """Spark types for the fields of element dicts (str, int, float, bool)."""
        kinds: dict[str, set[type]] = {}
        for b in batches:
            for e in b:
                for k, v in e.items():
                    if v is not None:
                        kinds.setdefault(k, set()).add(type(v))
        out = []
        for name, ts in kinds.items():
            if ts <= {bool}:
                t = "BOOLEAN"
            elif ts <= {int}:
                t = "BIGINT"
            elif ts <= {int, float}:
                t = "DOUBLE"
            else:
                t = "STRING"
            out.append((name, t))
        return out

    def batches(self) -> Iterator[SourceBatch]:
        for i, path in enumerate(batch_files(self.directory)):
            read = read_batch_file(path, self.declared_fields)
            seqs = [seq for _, seq in read]
            pt = self._processing_times[i] if self._processing_times is not None else None
            # each line's seq is its place in the batch across sources, the order Spark's paths
            # take (seq, source, partition, offset): without it the reference runtime fed one
            # source's batch after the other's, and a two-input operator saw another order
            arrival = tuple(q for q in seqs if q is not None) if all(isinstance(q, int) for q in seqs) else None
            yield SourceBatch(tuple(r for r, _ in read), pt, arrival)

    def spark_stream(self, spark: SparkSession) -> DataFrame:
        from lowwater.spark.batch_files_stream import batch_files_stream

        return batch_files_stream(spark, str(self.directory), self.declared_fields)


class PartitionedLogSource(SparkSource):
    """The embedded default: a :mod:`lowwater.io.log` directory.

    Both runtimes read the log the same way, through :class:`~lowwater.io.PartitionedLogReader`
    (on Spark inside a Python streaming data source, :mod:`lowwater.spark.log_stream`):

    * the files of the layout only; the directory names a record's partition; a record's
      offset is its position;
    * every line is one record: a line that is not one good record (not UTF-8, not JSON,
      not an object, a wrong envelope field, a value that is not its declared type) is a
      dead letter with the reason, at its partition and offset;
    * the same micro-batches (:class:`~lowwater.io.log_batches.LogBatching`): per partition
      at most ``records_per_batch`` records and ``segments_per_batch`` segments. On Spark
      the batch ends are Spark's own offsets, so a restart replays the same batches.

    Parameters
    ----------
    root:
        The log directory.
    value_fields:
        The element's fields and their types, e.g. ``[("user", "STRING"), ("ts", "BIGINT")]``;
        see :mod:`lowwater.io.fields` for what each type reads (``TIMESTAMP`` and ``DATE``
        become epoch milliseconds).
    records_per_batch:
        At most this many records per partition per micro-batch (``None``: no limit). The
        default is 1000 unless ``segments_per_batch`` is given.
    segments_per_batch:
        At most this many segments per partition per micro-batch (``None``: no limit).
    max_files_per_trigger:
        Deprecated: the former Spark-only limit. Read as ``segments_per_batch`` =
        ``max(1, max_files_per_trigger // partitions)``, with the partitions the log has
        when the run starts.
    """

    def __init__(self, root: str | os.PathLike[str], value_fields: Sequence[tuple[str, str]],
                 max_files_per_trigger: int | None = None, records_per_batch: int | _Default | None = _DEFAULT,
                 segments_per_batch: int | None = None) -> None:
        from lowwater.io.fields import parse_fields
        from lowwater.io.log.directory import log_root

        self.root = log_root(root)
        self.declared_fields = parse_fields(value_fields)
        self.value_fields = [(n, t) for n, t in self.declared_fields]
        self.max_files_per_trigger = max_files_per_trigger
        limited = segments_per_batch is not None or max_files_per_trigger is not None
        self.records_per_batch = (None if limited else 1000) if isinstance(records_per_batch, _Default) \
            else records_per_batch
        self.segments_per_batch = segments_per_batch

    def batching(self) -> LogBatching:
        """This source's micro-batch (the same on both runtimes)."""
        from lowwater.io.log_batches import LogBatching

        segments = self.segments_per_batch
        if segments is None and self.max_files_per_trigger is not None:
            segments = max(1, self.max_files_per_trigger // max(1, len(self.partitions())))
        return LogBatching(self.records_per_batch, segments)

    def _reader(self) -> PartitionedLogReader:
        from lowwater.io import PartitionedLogReader

        return PartitionedLogReader(self.root)

    def partitions(self) -> list[int]:
        return self._reader().partitions()

    def fields(self) -> list[str]:
        return [name for name, _ in self.value_fields]

    def batches(self) -> Iterator[SourceBatch]:
        from lowwater.io.fields import FieldError, has_decimals, read_element

        reader = self._reader()
        exact = has_decimals(self.declared_fields)  # a DECIMAL field reads numbers' texts
        batching = self.batching()
        available = reader.end_offsets()
        pos: dict[int, int] = {}
        while True:
            end = batching.next_end(reader, pos, available)
            if all(end[p] <= pos.get(p, 0) for p in end):
                return
            items = []
            for r in reader.read({p: pos.get(p, 0) for p in end}, end, exact_numbers=exact):
                error = r.error
                if r.value is not None:
                    try:
                        items.append(SourceRecord(read_element(r.value, self.declared_fields), r.partition,
                                                  r.offset, r.timestamp))
                        continue
                    except FieldError as e:
                        error = str(e)
                items.append(SourceRecord(None, r.partition, r.offset, r.timestamp, error=error))
            pos = dict(end)
            yield SourceBatch(tuple(items))

    def check_before_run(self, sample: int = 200) -> None:
        """The log exists, and every declared field reads as its type in at least one of the
        first ``sample`` records of each partition that have it (else a wrong declaration
        would make every record a dead letter)."""
        from lowwater.io.fields import FieldError, has_decimals, read_value

        reader = self._reader()
        records = reader.read({p: 0 for p in reader.partitions()}, max_records_per_partition=sample,
                              exact_numbers=has_decimals(self.declared_fields))
        for name, declared in self.declared_fields:
            present = [r.value[name] for r in records if r.value is not None and r.value.get(name) is not None]
            errors = []
            for v in present:
                try:
                    read_value(v, declared)
                    break
                except FieldError as e:
                    errors.append(str(e))
            else:
                if present:
                    raise ConfigurationError(
                        "value_fields", f"field {name!r} is declared {declared}, but none of the "
                        f"{len(present)} values in the first records of {self.root} reads as one "
                        f"({errors[0]}). Declare the type the data has; see lowwater.io.fields for "
                        "what each type reads")

    def identity(self) -> str:
        """The log's directory: a checkpoint resumed on another log would start at the offsets it
        reached in the first, and never read the new log's records before them."""
        return f"log {os.path.abspath(self.root)}"

    def spark_stream(self, spark: SparkSession) -> DataFrame:
        from lowwater.spark.log_stream import log_stream

        self._reader()  # the root must be a log: say so before Spark starts
        return log_stream(spark, str(self.root), self.declared_fields, self.batching())
