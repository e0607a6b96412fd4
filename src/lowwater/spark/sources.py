"""Sources the Spark engine reads as streaming DataFrames.

Every source yields the same columns, so the engine needs to know nothing else:

============== ======= ==========================================================
``_partition``  int     the source partition (a Kafka ``(topic, partition)``, a log dir)
``_offset``     long    the record's position in its partition
``_source_ts``  long    the source timestamp in epoch ms (Kafka's record timestamp), or null
``_seq``        long    the arrival order within the micro-batch, or null for (partition, offset)
*fields*        any     the element's fields, as top-level columns
============== ======= ==========================================================

An element (what user functions see) is the dict of the field columns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lowwater.api.sources import Source, SourceBatch, SourceRecord
from lowwater.core.errors import ConfigurationError, LowwaterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lowwater.io import PartitionedLogReader
    from lowwater.io.log_batches import LogBatching

__all__ = [
    "STANDARD_COLUMNS", "BatchFilesSource", "DataFrameSource", "KafkaShapedSource", "PartitionedLogSource",
    "SparkSource",
]

STANDARD_COLUMNS = ("_partition", "_offset", "_source_ts", "_seq")


class _Default:
    """The type of a parameter's default that depends on other parameters."""

    def __repr__(self) -> str:
        return "<default>"


_DEFAULT = _Default()


class SparkSource(Source):
    """A source the Spark engine can read: ``spark_stream`` returns the standard columns."""

    def spark_stream(self, spark: SparkSession) -> DataFrame:
        raise NotImplementedError

    def fields(self) -> list[str]:
        """The element's field names."""
        raise NotImplementedError

    def check_before_run(self) -> None:
        """Raise :class:`ConfigurationError` for what would fail the run or every record.

        The engine calls it before Spark starts; by default there is nothing to check."""


class BatchFilesSource(SparkSource):
    """Micro-batches written as JSON-lines files, one file per batch, read in order.

    Each line is ``{"partition": p, "offset": o, "seq": i, "timestamp": ms|null, "value": {...}}``.
    Spark reads one file per micro-batch (``maxFilesPerTrigger=1``); an empty file is an
    empty micro-batch. The scenario runner and tests use it to cut Spark's micro-batches
    exactly where a transcript does; the reference runtime reads the same files.
    """

    def __init__(self, directory: str | os.PathLike[str], value_fields: Sequence[tuple[str, str]],
                 partitions: Sequence[int], processing_times_ms: Sequence[int] | None = None) -> None:
        self.directory = Path(directory)
        self.value_fields = list(value_fields)
        self._partitions = list(partitions)
        self._processing_times = list(processing_times_ms) if processing_times_ms is not None else None

    @staticmethod
    def write(directory: str | os.PathLike[str], batches: Sequence[Sequence[dict[str, Any]]],
              partition_of: str = "partition") -> None:
        """Write ``batches`` of element dicts as batch files (offsets per partition, seq per batch)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        offsets: dict[int, int] = {}
        for i, batch in enumerate(batches):
            path = d / f"batch-{i:08d}.jsonl"
            tmp = d / f".batch-{i:08d}.jsonl.tmp"
            with open(tmp, "w") as f:
                for seq, e in enumerate(batch):
                    p = int(e.get(partition_of, 0) or 0)
                    off = offsets.get(p, 0)
                    offsets[p] = off + 1
                    f.write(json.dumps({"partition": p, "offset": off, "seq": seq, "timestamp": None, "value": e}))
                    f.write("\n")
            os.replace(tmp, path)
            os.utime(path, (1_000_000 + i, 1_000_000 + i))  # Spark orders new files by mtime

    def partitions(self) -> list[int]:
        return list(self._partitions)

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
        files = sorted(self.directory.glob("batch-*.jsonl"))
        for i, path in enumerate(files):
            items = []
            for line in path.read_text().splitlines():
                r = json.loads(line)
                items.append(SourceRecord(r["value"], r["partition"], r["offset"], r.get("timestamp")))
            pt = self._processing_times[i] if self._processing_times is not None else None
            yield SourceBatch(tuple(items), pt)

    def spark_stream(self, spark: SparkSession) -> DataFrame:
        from pyspark.sql import functions as F

        struct = ", ".join(f"`{n}`: {t}" for n, t in self.value_fields)
        schema = f"partition INT, offset BIGINT, seq BIGINT, timestamp BIGINT, value STRUCT<{struct}>"
        df = (
            spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
            .option("recursiveFileLookup", "true").json(str(self.directory))
        )
        return df.select(
            F.col("partition").cast("int").alias("_partition"), F.col("offset").alias("_offset"),
            F.col("timestamp").alias("_source_ts"), F.col("seq").alias("_seq"), "value.*",
        )


ColumnLike = Any  # a column name (str) or a pyspark Column
"""How DataFrameSource takes a column: by name, or as a Column expression."""

_TIME_TYPES = ("TimestampType", "DateType")
_INTEGRAL_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType")


def _event_time_ms(col: Any, type_name: str) -> Any:
    """A column's value in epoch milliseconds: TIMESTAMP at ms precision (floored), DATE at
    midnight UTC, integral numbers as they are."""
    from pyspark.sql import functions as F

    if type_name == "TimestampType":
        return F.unix_millis(col)
    if type_name == "DateType":
        return F.unix_date(col).cast("long") * F.lit(86_400_000)
    return col.cast("long")


class DataFrameSource(SparkSource):
    """Any streaming DataFrame as a lowwater source, typed, with no re-encoding.

    Parameters
    ----------
    df:
        A streaming DataFrame. Every column whose name does not start with ``_`` is a field
        of the element (a ``TIMESTAMP`` or ``DATE`` column arrives as epoch milliseconds,
        like every time in lowwater).
    partition:
        The lowwater partition of a row (a column name or a Column expression, an integer
        ``>= 0``); ``None``: one partition, 0.
    offset:
        The row's position in its partition (name or Column), the arrival order the executor
        and general paths step rows in, and the position a dead letter names; ``None``: no
        order within a batch's partition is promised.
    timestamp:
        The source timestamp (name or Column): a ``TIMESTAMP`` (at millisecond precision,
        floored), a ``DATE`` (midnight UTC) or an integral number of epoch milliseconds. A
        strategy without an assigner takes it as event time, like a Kafka record timestamp.
        Any other type is a :class:`ConfigurationError` when the source is made.

    Examples
    --------
    ``DataFrameSource(spark.readStream.table("clicks"), partition="p", offset="o",
    timestamp=F.col("event_time"))``
    """

    def __init__(self, df: DataFrame, *, partition: ColumnLike = None, offset: ColumnLike = None,
                 timestamp: ColumnLike = None) -> None:
        hidden = [c for c in df.columns if c.startswith("_")]
        if hidden:
            raise ConfigurationError("df", f"column(s) {hidden} start with '_', which lowwater keeps for its own "
                                     "columns; rename them (withColumnRenamed)")
        self.df = df
        self.partition, self.offset, self.timestamp = partition, offset, timestamp
        self._types = {f.name: type(f.dataType).__name__ for f in df.schema.fields}
        for what, col, allowed in (("partition", partition, _INTEGRAL_TYPES), ("offset", offset, _INTEGRAL_TYPES),
                                   ("timestamp", timestamp, _INTEGRAL_TYPES + _TIME_TYPES)):
            if col is not None and self._type_of(col) not in allowed:
                raise ConfigurationError(what, f"{col!r} is a {self._type_of(col)}; it must be one of "
                                         f"{', '.join(allowed)}")

    def __getstate__(self) -> dict[str, Any]:
        """Without the DataFrame and Column objects (they live in the driver's JVM): a source
        is pickled with the state of the general path, which never reads it again."""
        return {k: (v if isinstance(v, str | int | list | dict | type(None)) else repr(v))
                for k, v in self.__dict__.items()}

    def _column(self, col: ColumnLike) -> Any:
        from pyspark.sql import functions as F

        return F.col(f"`{col.replace('`', '``')}`") if isinstance(col, str) else col

    def _type_of(self, col: ColumnLike) -> str:
        if isinstance(col, str):
            if col not in self._types:
                raise ConfigurationError("df", f"no column {col!r}; the columns are {', '.join(self.df.columns)}")
            return self._types[col]
        return type(self.df.select(col).schema.fields[0].dataType).__name__

    def partitions(self) -> list[int]:
        return []

    def batches(self) -> Iterator[SourceBatch]:
        raise LowwaterError(f"a {type(self).__name__} runs on the spark runtime only")

    def fields(self) -> list[str]:
        return list(self.df.columns)

    def spark_stream(self, spark: SparkSession) -> DataFrame:
        from pyspark.sql import functions as F

        none = F.lit(None).cast("long")
        ts = none if self.timestamp is None else _event_time_ms(self._column(self.timestamp),
                                                                 self._type_of(self.timestamp))
        columns = [
            (F.lit(0) if self.partition is None else self._column(self.partition)).cast("int").alias("_partition"),
            (none if self.offset is None else self._column(self.offset).cast("long")).alias("_offset"),
            ts.alias("_source_ts"), none.alias("_seq"),
        ]
        for name in self.fields():
            col, kind = self._column(name), self._types[name]
            columns.append((_event_time_ms(col, kind) if kind in _TIME_TYPES else col).alias(name))
        return self.df.select(*columns)


class KafkaShapedSource(DataFrameSource):
    """Any streaming DataFrame with Spark's Kafka source schema.

    ``topic, partition, offset, timestamp, key, value`` (``value`` binary or string JSON)
    map to the standard columns: each ``(topic, partition)`` is one lowwater partition
    (numbered in ``topics`` order: ``index * partitions_per_topic + partition``), the
    Kafka record timestamp is the source timestamp an assigner receives as
    ``previous_element_timestamp``, and ``value`` is parsed as JSON with ``value_fields``
    (``[("user", "STRING"), ("amount", "BIGINT"), ...]``; a ``TIMESTAMP`` string without a
    zone is UTC, and arrives as epoch milliseconds, like a ``DATE``).
    A value that does not parse yields null fields; such records are counted and sent to
    the dead-letter output by the engine. It is a :class:`DataFrameSource` over the parsed
    value's fields.
    """

    def __init__(self, df: DataFrame, value_fields: Sequence[tuple[str, str]], topics: Sequence[str] | None = None,
                 partitions_per_topic: int = 1 << 20) -> None:
        from pyspark.sql import functions as F

        missing = {"topic", "partition", "offset", "timestamp", "value"} - set(df.columns)
        if missing:
            raise ConfigurationError("df", f"is not Kafka-shaped: missing column(s) {sorted(missing)}")
        self.kafka_df = df
        self.value_fields = list(value_fields)
        self.topics = list(topics) if topics else None
        self.partitions_per_topic = partitions_per_topic
        if self.topics:
            topic_index = F.lit(0)
            for i, t in enumerate(self.topics):
                topic_index = F.when(F.col("topic") == t, F.lit(i)).otherwise(topic_index)
            part = topic_index * F.lit(self.partitions_per_topic) + F.col("partition")
        else:
            part = F.col("partition")
        schema = ", ".join(f"`{n}` {t}" for n, t in self.value_fields)
        value = F.from_json(F.col("value").cast("string"), schema, {"timeZone": "UTC"})
        parsed = df.select(part.cast("int").alias("_p"), F.col("offset").cast("long").alias("_o"),
                           F.col("timestamp").alias("_t"), value.alias("_v"))
        names = [n for n, _ in self.value_fields]
        flat = parsed.select(*[F.col(f"_v.`{n}`").alias(f"v_{i}") for i, n in enumerate(names)],
                             F.col("_p").alias("p_"), F.col("_o").alias("o_"), F.col("_t").alias("t_"))
        self._names = names
        super().__init__(flat.select(*[F.col(f"v_{i}").alias(n) for i, n in enumerate(names)],
                                     "p_", "o_", "t_"), partition="p_", offset="o_", timestamp="t_")

    def fields(self) -> list[str]:
        return list(self._names)


class PartitionedLogSource(SparkSource):
    """The embedded default: a :mod:`lowwater.io.partitioned_log` directory.

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

        self.root = Path(root)
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
        from lowwater.io.fields import FieldError, read_element

        reader = self._reader()
        batching = self.batching()
        available = reader.end_offsets()
        pos: dict[int, int] = {}
        while True:
            end = batching.next_end(reader, pos, available)
            if all(end[p] <= pos.get(p, 0) for p in end):
                return
            items = []
            for r in reader.read({p: pos.get(p, 0) for p in end}, end):
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
        from lowwater.io.fields import FieldError, read_value

        reader = self._reader()
        records = reader.read({p: 0 for p in reader.partitions()}, max_records_per_partition=sample)
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

    def spark_stream(self, spark: SparkSession) -> DataFrame:
        from lowwater.spark.log_stream import log_stream

        self._reader()  # the root must be a log: say so before Spark starts
        return log_stream(spark, str(self.root), self.declared_fields, self.batching())
