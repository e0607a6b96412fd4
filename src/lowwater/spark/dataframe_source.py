"""Any streaming DataFrame as a lowwater source; the Kafka source schema is one such DataFrame."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lowwater.core.errors import ConfigurationError, LowwaterError, article
from lowwater.graph.sources import SourceBatch
from lowwater.spark.kafka_value import jvm_reader
from lowwater.spark.source_base import SparkSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SHAPED_DATA_LOSS_WARNING", "SPARK_KAFKA_OPTIONS", "ColumnLike", "DataFrameSource", "KafkaShapedSource",
           "check_topic_numbering", "data_loss_warning", "kafka_value_fields", "skips_deleted_records",
           "topic_partition_number", "unknown_kafka_option"]


ColumnLike = Any  # a column name (str) or a pyspark Column
"""How DataFrameSource takes a column: by name, or as a Column expression."""

_TIME_TYPES = ("TimestampType", "TimestampNTZType", "DateType")
_INTEGRAL_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType")


#: the options of Spark's Kafka source (``KafkaSourceProvider``, Spark 4.2; Spark compares them
#: without regard to case), besides ``kafka.*`` (the consumer's own settings) and the ones
#: KafkaSource's parameters set
SPARK_KAFKA_OPTIONS = (
    "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "minPartitions",
    "maxRecordsPerPartition", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "kafkaConsumer.pollTimeoutMs",
    "groupIdPrefix", "includeHeaders", "startingOffsetsByTimestamp", "startingTimestamp",
    "startingOffsetsByTimestampStrategy", "endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp")

#: what a Kafka reader is told to read from, and where: KafkaSource's parameters set them, a
#: user's own reader (:class:`KafkaShapedSource`) sets them itself
_READ_OPTIONS = ("subscribe", "subscribePattern", "assign", "startingOffsets")


def unknown_kafka_option(key: str) -> str | None:
    """What is wrong with the option ``key`` of a Kafka reader, said after the key ("is not an
    option of ...", with a did-you-mean), when Spark's Kafka source does not have it
    (:data:`SPARK_KAFKA_OPTIONS`, ``kafka.*``); None when it does. Spark ignores an option it does
    not know, without a word."""
    import difflib

    known = {o.lower(): o for o in (*SPARK_KAFKA_OPTIONS, *_READ_OPTIONS)}
    low = key.lower()
    if low.startswith("kafka.") or low in known:
        return None
    close = difflib.get_close_matches(low, list(known), n=1, cutoff=0.75)
    hint = f"; did you mean {known[close[0]]!r}?" if close else ""
    return (f"is not an option of Spark's Kafka source{hint} (Spark ignores an option it does not know; "
            f"its options: kafka.* for the consumer, and {', '.join(SPARK_KAFKA_OPTIONS)})")


def data_loss_warning(what: str) -> str:
    """What ``what``, told to read Kafka with ``failOnDataLoss=false``, warns of."""
    return (f"{what} with failOnDataLoss=false: Spark skips, with a line in its log and nothing else, the "
            "records Kafka deleted before this job read them (by retention, or with a topic deleted and made "
            "again). lowwater accounts for every record it reads, and cannot count records it never read: its "
            "totals will not show them. Leave failOnDataLoss at true to have the query stop instead.")


SHAPED_DATA_LOSS_WARNING = data_loss_warning("KafkaShapedSource over a Kafka reader")
"""Said when a :class:`KafkaShapedSource` is made over Spark's Kafka reader given ``failOnDataLoss=false``."""

PARTITION_MAX = 2**31 - 1
"""The largest partition number (Spark's INT): lowwater's partitions are 0 to this."""


def _event_time_ms(col: Any, type_name: str) -> Any:
    """A column's value in epoch milliseconds: TIMESTAMP at ms precision (floored), TIMESTAMP_NTZ
    the same read as UTC, DATE at midnight UTC, integral numbers as they are."""
    from pyspark.sql import functions as F

    if type_name == "TimestampType":
        return F.unix_millis(col)
    if type_name == "TimestampNTZType":
        # a wall-clock time with no zone is UTC, as in the log's fields: its date and time of day,
        # never a cast to TIMESTAMP (timestamp_diff's), which reads it in the session's zone and
        # moves a time that zone skips (a daylight-saving gap) an hour later
        second = F.floor(F.date_part(F.lit("SECOND"), col) * 1000).cast("long")  # micros floored
        return (F.unix_date(col.cast("date")).cast("long") * F.lit(86_400_000) + F.hour(col).cast("long") * 3_600_000
                + F.minute(col).cast("long") * 60_000 + second)
    if type_name == "DateType":
        return F.unix_date(col).cast("long") * F.lit(86_400_000)
    return col.cast("long")


class DataFrameSource(SparkSource):
    """Any streaming DataFrame as a lowwater source, typed, with no re-encoding.

    Parameters
    ----------
    df:
        A streaming DataFrame. Every column whose name does not start with ``_`` is a field
        of the element (a ``TIMESTAMP``, ``TIMESTAMP_NTZ`` or ``DATE`` column arrives as epoch
        milliseconds, like every time in lowwater).
    partition:
        The lowwater partition of a row (a column name or a Column expression, an integer
        from 0 to 2**31 - 1); ``None``: one partition, 0. A row whose partition is null,
        negative or larger fails the query with a message that names the column, the value
        and the row's offset (a partition is where a row came from, not data to dead-letter).
    offset:
        The row's position in its partition (name or Column), the arrival order the executor
        and general paths step rows in, and the position a dead letter names; ``None``: no
        order within a batch's partition is promised.
    timestamp:
        The source timestamp (name or Column): a ``TIMESTAMP`` (at millisecond precision,
        floored), a ``TIMESTAMP_NTZ`` (the same, its wall-clock time read as UTC, as the log
        reads a date-time without a zone), a ``DATE`` (midnight UTC) or an integral number of
        epoch milliseconds. A strategy without an assigner takes it as event time, like a Kafka
        record timestamp.
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
        self._sql_types = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
        self._fields = list(df.columns)
        """The fields, kept apart from ``df``: a source pickled to an executor (stage A of the keyed
        path in Python) has no DataFrame (:meth:`__getstate__`), and reads its fields there."""
        for what, col, allowed in (("partition", partition, _INTEGRAL_TYPES), ("offset", offset, _INTEGRAL_TYPES),
                                   ("timestamp", timestamp, _INTEGRAL_TYPES + _TIME_TYPES)):
            if col is not None and self._type_of(col, what) not in allowed:
                raise ConfigurationError(what, f"{col!r} is a {self._type_of(col, what)}; it must be one of "
                                         f"{', '.join(allowed)}")
        if partition is not None and self._is_kafka_partition(partition):
            several = _several_kafka_topics(df)
            if several is not None:
                raise ConfigurationError(
                    "partition", f"is Spark's Kafka `partition` column, and the DataFrame reads {several}: each "
                    "topic numbers its partitions from 0, so partition 0 of every topic would share one watermark, "
                    "and the records of a topic that lags would be late. Number each topic's partitions apart, "
                    "e.g. partition=F.col('partition') + F.when(F.col('topic') == 'second-topic', 1000)"
                    ".otherwise(0), or read the topics with KafkaShapedSource(df, fields, topics=[...])")

    def _is_kafka_partition(self, col: ColumnLike) -> bool:
        """Whether ``col`` is the DataFrame's ``partition`` column as it is, not an expression over it
        (a user's own numbering of several topics)."""
        if isinstance(col, str):
            return col == "partition"
        try:
            return self.df.select(col).columns == ["partition"] and "partition" in self._types
        except Exception:  # a Column this DataFrame cannot select: _type_of said so above
            return False

    def check_before_run(self) -> None:
        """A batch DataFrame cannot feed a streaming query: Spark says so only once the query
        starts, as "Union between streaming and batch DataFrames/Datasets is not supported" with
        the plan dumped after it."""
        if not self.df.isStreaming:
            raise ConfigurationError("df", "is a batch DataFrame; a source needs a streaming one "
                                     "(spark.readStream...; to run over files once, read them with readStream "
                                     "and run with trigger='available_now')")

    def __getstate__(self) -> dict[str, Any]:
        """Without the DataFrame and Column objects (they live in the driver's JVM): a source
        is pickled with the state of the general path, which never reads it again."""
        return {k: (v if isinstance(v, str | int | list | dict | type(None)) else repr(v))
                for k, v in self.__dict__.items()}

    def _column(self, col: ColumnLike) -> Any:
        from pyspark.sql import functions as F

        return F.col(f"`{col.replace('`', '``')}`") if isinstance(col, str) else col

    def _type_of(self, col: ColumnLike, what: str = "df") -> str:
        """The type of ``col``; a name that is no column is an error of the parameter ``what``."""
        if isinstance(col, str):
            if col not in self._types:
                raise ConfigurationError(what, f"no column {col!r} in df; its columns are {', '.join(self.df.columns)}")
            return self._types[col]
        return type(self.df.select(col).schema.fields[0].dataType).__name__

    def partitions(self) -> list[int]:
        return []

    def _checked_partition(self) -> Any:
        """The partition column as an INT; a row whose value is null, negative or past INT's range
        fails the query with a message naming the column, the value and the row's offset. A
        partition is where the row came from, not data: such a value is a mapping to fix (map
        nulls to a partition with ``F.coalesce``, or filter those rows out), and it cannot be
        the partition of a watermark, nor counted under one."""
        from pyspark.sql import functions as F

        raw = self._column(self.partition)
        offset = F.lit("unknown") if self.offset is None else F.coalesce(
            self._column(self.offset).cast("string"), F.lit("null"))
        error = F.raise_error(F.concat(
            F.lit(f"DataFrameSource: the partition {self.partition!r} of a row is "),
            F.coalesce(raw.cast("string"), F.lit("null")), F.lit(" (its offset: "), offset,
            F.lit(f"); a partition must be an integer from 0 to {PARTITION_MAX}: map such rows to a partition "
                  "(F.coalesce) or filter them out of the DataFrame")))
        return F.when(raw.isNotNull() & (raw >= 0) & (raw <= PARTITION_MAX), raw.cast("int")).otherwise(error)

    def batches(self) -> Iterator[SourceBatch]:
        raise LowwaterError(f"a {type(self).__name__} runs on the spark runtime only")

    def fields(self) -> list[str]:
        return list(self._fields)

    def field_types(self) -> list[tuple[str, str]]:
        """Each column of the DataFrame and its Spark SQL type: a checkpoint is bound to them
        (:meth:`~lowwater.graph.pipeline.Pipeline.fingerprint`). A field's type changed between
        restarts (``amount BIGINT`` read as ``DOUBLE``) was taken, and the windows the first run
        had left open lost what it had put in them, without a word (a user probe, session 54)."""
        return list(self._sql_types)

    def spark_stream(self, spark: SparkSession) -> DataFrame:
        return self.df.select(*self._standard_columns())

    def _standard_columns(self) -> list[Any]:
        """``_partition, _offset, _source_ts, _seq`` and the fields, as columns of ``self.df``."""
        from pyspark.sql import functions as F

        none = F.lit(None).cast("long")
        ts = none if self.timestamp is None else _event_time_ms(self._column(self.timestamp),
                                                                 self._type_of(self.timestamp))
        columns = [
            (F.lit(0) if self.partition is None else self._checked_partition()).alias("_partition"),
            (none if self.offset is None else self._column(self.offset).cast("long")).alias("_offset"),
            ts.alias("_source_ts"), none.alias("_seq"),
        ]
        for name in self.fields():
            col, kind = self._column(name), self._types[name]
            columns.append((_event_time_ms(col, kind) if kind in _TIME_TYPES else col).alias(name))
        return columns


class KafkaShapedSource(DataFrameSource):
    """Any streaming DataFrame with Spark's Kafka source schema.

    ``topic, partition, offset, timestamp, key, value`` (``value`` binary or string JSON)
    map to the standard columns: each ``(topic, partition)`` is one lowwater partition
    (numbered in ``topics`` order: ``index * partitions_per_topic + partition``; named
    ``topic-partition`` in the metrics where there are several topics), the
    Kafka record timestamp is the source timestamp an assigner receives as
    ``previous_element_timestamp``, and ``value`` is read as one JSON object with
    ``value_fields`` (``[("user", "STRING"), ("amount", "BIGINT"), ...]``), by the rules of
    the partitioned log (:mod:`lowwater.io.fields`): ``STRING`` takes a string, the integer
    types an integer in their range, ``DOUBLE``/``FLOAT`` a finite number, ``BOOLEAN``
    ``true``/``false``, ``TIMESTAMP`` and ``DATE`` a date-time or date string (without a
    zone it is UTC; it arrives as epoch milliseconds); an absent or ``null`` field is
    ``None``. Other declared types are refused when the source is made.

    A record that is not one such object is a dead letter, counted, with its reason in the
    ``_corrupt`` column (null for a good record; its fields are null): a null value (a
    tombstone), a value that is not UTF-8, empty, not JSON (``NaN``, single quotes, a key
    given twice), more than one JSON value (``{...} {...}``, trailing text), a JSON value
    that is not an object, or a field whose value is not its declared type (``field 'at':
    5000 is not a TIMESTAMP``: an epoch number is not read as seconds, nor a number or an
    object as text). The check runs on the JVM: in one parse by lowwater's reader
    (:mod:`lowwater.spark.kafka_value`, ``jars/spark/lowwater-jvm.jar``), or, in a session
    without that jar, in Spark SQL, with the same results at about a third of the speed. It is a
    :class:`DataFrameSource` over the parsed value's fields.

    With ``topics``, a record of a topic not listed, or whose partition is
    ``partitions_per_topic`` or more, fails the query with a message naming its topic, partition
    and offset: numbered on, it would be another topic's partition, and two partitions'
    records would share one watermark without a word. Without ``topics`` the DataFrame must
    read one topic: its partitions are numbered by the Kafka partition alone. A DataFrame read
    with Spark's Kafka source that subscribes to several topics (``subscribe`` with a list,
    ``subscribePattern``, or ``assign`` over several) is refused without ``topics``, naming
    what it reads.

    A DataFrame read with Spark's Kafka source given ``failOnDataLoss=false`` makes the source
    warn (:data:`SHAPED_DATA_LOSS_WARNING`): Spark then skips the records Kafka deleted before
    they were read, and lowwater, which never reads them, cannot count them. So does an option
    of that reader that Spark's Kafka source does not have (a misspelt ``maxOffsetPerTrigger``,
    which Spark ignores without a word), with a did-you-mean.
    """

    #: whether making one warns of a Kafka reader's ``failOnDataLoss=false`` and of options Spark's
    #: Kafka source does not have (KafkaSource checks its own options when it is made, before there
    #: is a reader)
    _checks_reader_options = True

    def __init__(self, df: DataFrame, value_fields: Sequence[tuple[str, str]], topics: Sequence[str] | None = None,
                 partitions_per_topic: int = 1 << 20) -> None:
        from pyspark.sql import functions as F

        missing = {"topic", "partition", "offset", "timestamp", "value"} - set(df.columns)
        if missing:
            raise ConfigurationError("df", f"is not Kafka-shaped: missing column(s) {sorted(missing)}")
        readers = _kafka_reader_options(df)
        if self._checks_reader_options and any(skips_deleted_records(o) for o in readers):
            warnings.warn(SHAPED_DATA_LOSS_WARNING, RuntimeWarning, stacklevel=2)
        if self._checks_reader_options:
            for key in sorted({str(k) for o in readers for k in _option_keys(o)}):
                unknown = unknown_kafka_option(key)
                if unknown is not None:
                    warnings.warn(f"{type(self).__name__}: its DataFrame's Kafka reader was given {key!r}, which "
                                  f"{unknown}",
                                  RuntimeWarning, stacklevel=2)
        if not topics:
            several = _several_kafka_topics(df)
            if several is not None:
                raise ConfigurationError(
                    "topics", f"the DataFrame reads {several} with Spark's Kafka source, and without topics the "
                              "partitions are numbered by the Kafka partition alone: partition 0 of every topic "
                              "would share one watermark. Pass topics=[...] listing every topic it reads")
        declared = kafka_value_fields(value_fields)
        # what the reader reads, which its checkpoint keeps (read_identity)
        self._subscription = ", ".join(sorted(
            f"{k}={v}" for o in readers for k in _SUBSCRIPTION_OPTIONS if (v := o.get(k)) is not None))
        self.kafka_df = df
        self.value_fields = list(value_fields)
        self.topics = list(topics) if topics else None
        self.partitions_per_topic = partitions_per_topic
        part = F.col("partition") if self.topics is None else self._numbered(self.topics, partitions_per_topic)
        schema = ", ".join(f"`{n.replace('`', '``')}` {t}" for n, t in declared)
        binary = type(df.schema["value"].dataType).__name__ == "BinaryType"
        text = F.col("value").cast("string")
        reader = jvm_reader(df.sparkSession, declared)
        where = F.concat_ws("-", F.col("topic"), F.col("partition").cast("string"))  # a dead letter's _file
        columns = (part.cast("int").alias("_p"), F.col("offset").cast("long").alias("_o"),
                   F.col("timestamp").alias("_t"))
        names = [n for n, _ in declared]
        if reader is not None:
            # the JVM reader (kafka_value), where its jar is on the class path: one parse a record,
            # the fields read, (bad, v0, v1, ...); the Spark SQL checks word the reason of the
            # records it finds bad, and run for those alone
            read = df.select("*", reader(F.col("value").cast("binary")).alias("_j"))
            found_bad = F.col("_j.bad").isNotNull()
            record = F.struct(F.col("value").alias("_raw"), text.alias("_s"), F.col("_j").alias("_j"))
            checked = read.select(*columns, "_j", F.when(found_bad, _reason_of_bad(record, declared, binary, schema))
                                  .alias("_c"), F.when(found_bad, F.make_valid_utf8(text)).alias("_r"),
                                  F.when(found_bad, where).alias("_f"))
            values = [F.col("_j").getField(f"v{i}") for i in range(len(names))]
        else:
            read = df.select(*columns, where.alias("_tp"), F.col("value").alias("_raw"), text.alias("_s"))
            # the value parsed twice: its fields as from_json reads them, and as a VARIANT (see _corrupt_code)
            parsed = read.select("*", F.from_json(F.col("_s"), schema, {"timeZone": "UTC"}).alias("_v"),
                                 F.try_parse_json(F.concat(F.lit("["), F.col("_s"), F.lit("]"))).alias("_w"))
            # each field's JSON value and its kind, once a record (the checks and reasons refer to them)
            found = parsed.select("*", *[_field_value(n).alias(f"_f{i}") for i, (n, _) in enumerate(declared)])
            kinds = found.select("*", *[F.schema_of_variant(F.col(f"_f{i}")).alias(f"_k{i}")
                                        for i in range(len(declared))])
            coded = kinds.select("*", _corrupt_code(declared, binary).alias("_code"))
            # the reason of a bad record, inside a lambda: Spark evaluates it without generating code, so
            # the code generated for every record stays small enough for the JVM to compile (it does not
            # compile a method past 8,000 bytes of bytecode; inline, this source ran 1.5x slower)
            reason = F.element_at(F.transform(F.array(F.col("_code")), lambda _: _corrupt_reason(declared)), 1)
            bad = F.col("_code").isNotNull()
            held = F.make_valid_utf8(F.col("_s"))  # a dead letter's value as text, its record
            checked = coded.select("_p", "_o", "_t", "_v", F.when(bad, reason).alias("_c"),
                                   F.when(bad, held).alias("_r"), F.when(bad, F.col("_tp")).alias("_f"))
            values = [F.col("_v").getField(n) for n in names]
        flat = checked.select(*[F.when(F.col("_c").isNull(), v).alias(f"v_{i}") for i, v in enumerate(values)],
                              F.col("_p").alias("p_"), F.col("_o").alias("o_"), F.col("_t").alias("t_"),
                              F.col("_c").alias("c_"), F.col("_r").alias("r_"), F.col("_f").alias("f_"))
        self._names = names
        super().__init__(flat.select(*[F.col(f"v_{i}").alias(n) for i, n in enumerate(names)],
                                     "p_", "o_", "t_", "c_", "r_", "f_"), partition="p_", offset="o_", timestamp="t_")

    def spark_stream(self, spark: SparkSession) -> DataFrame:
        """The standard columns, the fields, ``_corrupt`` (why the record is a dead letter, or null),
        ``_raw``: a dead letter's value as text (invalid UTF-8 replaced), its ``record``, for Kafka's
        retention may delete the original (null for a good record and for a tombstone), and
        ``_file``: where that record is kept, its ``topic-partition`` (``views-1``), as a log's
        letter names its segment file (the ``partition`` column is lowwater's number, ``1001``, where
        the source reads several topics)."""
        from pyspark.sql import functions as F

        return self.df.select(*self._standard_columns(), F.col("c_").alias("_corrupt"), F.col("r_").alias("_raw"),
                              F.col("f_").alias("_file"))

    def identity(self) -> str:
        """The topics in order, which number the partitions (``index * partitions_per_topic +
        partition``): a checkpoint of ``[A, B]`` resumed with ``[B, A]`` would feed B's records to A's
        watermarks, and one of other topics would resume at offsets of topics it does not read."""
        if not self.topics:
            return ""
        return f"topics {json.dumps(self.topics)}, each partition {self.partitions_per_topic} apart"

    def read_identity(self) -> dict[str, str]:
        """What the DataFrame's Kafka reader reads (``subscribe=orders``), from its plan: the checkpoint
        keeps it (:meth:`StateStore.bind_sources`). A reader changed to other topics between runs
        resumed at the old topics' offsets: Spark said data may have been lost, or, with
        ``failOnDataLoss=false``, the new topics' records went into the old ones' watermarks and
        open windows. Nothing where the plan cannot be looked at (Spark Connect)."""
        subscription = getattr(self, "_subscription", "")
        return {_READS: subscription} if subscription else {}

    def identity_changed(self, recorded: Mapping[str, str], now: Mapping[str, str]) -> str | None:
        """:meth:`read_identity` changed since the checkpoint recorded it, said for a person."""
        before, after = recorded.get(_READS), now.get(_READS)
        if before is None or after is None or before == after:
            return None
        return (f"the KafkaShapedSource's Kafka reader reads {after}, where this checkpoint's read {before}: the "
                "checkpoint's offsets, watermarks and open windows are those topics'. Hint: run the new reader on "
                "a new checkpoint, or give this one the reader that made it")

    def partition_name(self, partition: int) -> str:
        """``topic-partition``, as Kafka itself names a partition, where the source reads several
        topics (``views-0`` for 1,048,576 with ``topics=["clicks", "views"]``), so that the metrics
        and ``lowwater status`` name the topic; the Kafka partition number where it reads one. (A
        ``:`` stays the mark of another source: ``kafka:views-0`` in a job of several.)"""
        if not self.topics:
            return str(partition)
        index, kafka_partition = divmod(partition, self.partitions_per_topic)
        if not 0 <= index < len(self.topics):
            return str(partition)
        return f"{self.topics[index]}-{kafka_partition}" if len(self.topics) > 1 else str(kafka_partition)

    @staticmethod
    def _numbered(topics: list[str], per_topic: int) -> Any:
        """``(topic, partition)`` as a lowwater partition, ``index * per_topic + partition``; a
        record of another topic, or whose partition does not fit under ``per_topic``, fails the
        query naming it (CASE evaluates its branches lazily)."""
        from pyspark.sql import functions as F

        check_topic_numbering(topics, per_topic)
        # one flat lookup (a CASE per topic nests as deep as there are topics: 2,048 overflowed the JVM's stack)
        index = F.array_position(F.array(*[F.lit(t) for t in topics]), F.col("topic")) - 1  # -1: not listed
        p = F.col("partition").cast("long")
        where = F.concat(F.lit("topic "), F.coalesce(F.col("topic"), F.lit("null")), F.lit(", partition "),
                         F.coalesce(p.cast("string"), F.lit("null")), F.lit(", offset "),
                         F.coalesce(F.col("offset").cast("string"), F.lit("null")))
        unknown = F.raise_error(F.concat(
            F.lit("KafkaShapedSource: a record of "), where,
            F.lit(f", and that topic is not in topics {topics}: list every topic the DataFrame reads")))
        past = F.raise_error(F.concat(
            F.lit("KafkaShapedSource: a record of "), where,
            F.lit(f", and partitions are numbered {per_topic} to a topic (partitions_per_topic): a larger "
                  "number would be another topic's partition")))
        return (F.when(index.isNull() | (index < 0), unknown)
                .when(p.isNotNull() & ((p < 0) | (p >= per_topic)), past)
                .otherwise(index * F.lit(per_topic) + p))

    def fields(self) -> list[str]:
        return list(self._names)


_KAFKA_FIELD_TYPES = ("BIGINT", "INT", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT", "STRING", "BOOLEAN", "TIMESTAMP",
                      "DATE", "DECIMAL(p,s)")
_INT_FIELD_TYPES = ("BIGINT", "INT", "SMALLINT", "TINYINT")
_SNIPPET_CHARS = 120
"""As much of a bad value as a reason quotes (the partitioned log's reader quotes as much)."""

_Columns = Callable[[str], Any]
"""How the checks below find the columns they read (``_s``, ``_w``, ``_f0``...): the DataFrame's
columns by name (:func:`_by_name`), or the fields of a lambda's struct (:func:`_reason_of_bad`)."""


def _by_name(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col(name)


def _let(value: Any, body: Callable[[Any], Any]) -> Any:
    """``body(value)``, ``value`` computed once: a lambda over a one-element array. Spark evaluates
    a lambda without generating code, and inside a ``CASE WHEN`` branch only for the rows that
    take it."""
    from pyspark.sql import functions as F

    return F.element_at(F.transform(F.array(value), body), 1)


def _extended(record: Any, names: Sequence[str], new: dict[str, Any]) -> Any:
    """The struct ``record`` (of fields ``names``) with the fields ``new`` added."""
    from pyspark.sql import functions as F

    return F.struct(*[record[n].alias(n) for n in names], *[c.alias(n) for n, c in new.items()])


def _reason_of_bad(record: Any, fields: Sequence[tuple[str, str]], binary: bool, schema: str) -> Any:
    """Why a record the JVM reader found bad is a dead letter, worded by the Spark SQL checks
    (:func:`_corrupt_code`, :func:`_corrupt_reason`; ``invalid value (...)``, the reader's own
    reason, where they find nothing). ``record`` is ``struct(_raw, _s, _j)``: the value, as text,
    and the reader's struct. The checks' columns are computed here, each once, inside lambdas
    (:func:`_let`), and not in the source's projection: there, null for every good record, they
    were still evaluated for each, about 6.5% of a batch's CPU in the 1k-key Kafka benchmark
    (docs/performance.md, session 51)."""
    from pyspark.sql import functions as F

    names = ["_raw", "_s", "_j"]
    parsed = {"_v": F.from_json(record["_s"], schema, {"timeZone": "UTC"}),
              "_w": F.try_parse_json(F.concat(F.lit("["), record["_s"], F.lit("]")))}
    values = [f"_f{i}" for i in range(len(fields))]
    kinds = [f"_k{i}" for i in range(len(fields))]

    def with_values(r: Any) -> Any:
        found = {f"_f{i}": _field_value(n, r.getField) for i, (n, _) in enumerate(fields)}
        return _let(_extended(r, [*names, *parsed], found), with_kinds)

    def with_kinds(r: Any) -> Any:
        kinded = {k: F.schema_of_variant(r[v]) for v, k in zip(values, kinds, strict=True)}
        return _let(_extended(r, [*names, *parsed, *values], kinded), with_code)

    def with_code(r: Any) -> Any:
        code = {"_code": F.coalesce(_corrupt_code(fields, binary, r.getField), F.lit(_JVM))}
        return _let(_extended(r, [*names, *parsed, *values, *kinds], code),
                    lambda coded: _corrupt_reason(fields, True, coded.getField))

    return _let(_extended(record, names, parsed), with_values)


def kafka_value_fields(value_fields: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """``value_fields`` with canonical type names (:func:`lowwater.io.fields.parse_fields`):
    the types whose JSON the partitioned log reads, and no other."""
    from lowwater.io.fields import is_decimal, parse_fields

    for item in value_fields:
        if isinstance(item, tuple | list) and len(item) == 2:
            t = str(item[1]).strip().upper()
            if t not in _KAFKA_FIELD_TYPES and t not in ("LONG", "INTEGER", "SHORT", "BYTE", "REAL", "BOOL") \
                    and not is_decimal(t):
                raise ConfigurationError(
                    "value_fields", f"field {item[0]!r} has type {item[1]!r}; a Kafka value's fields are one of "
                    f"{', '.join(_KAFKA_FIELD_TYPES)}, read as the partitioned log reads them")
    return parse_fields(value_fields)


def _quoted(text: Any, chars: int) -> Any:
    """``'<text>'``, cut at ``chars`` characters with ``...`` (as the log's ``repr`` of a snippet)."""
    from pyspark.sql import functions as F

    more = F.when(F.length(text) > chars, F.lit("...")).otherwise(F.lit(""))
    return F.concat(F.lit("'"), F.substring(text, 1, chars), more, F.lit("'"))


def _field_value(name: str, col: _Columns = _by_name) -> Any:
    """Field ``name`` of the value parsed in ``_w`` (at ``$[0]``), as a VARIANT; null when absent."""
    from pyspark.sql import functions as F

    if '"' not in name:
        return F.try_variant_get(col("_w"), f'$[0]["{name}"]', "variant")
    if "'" not in name:
        return F.try_variant_get(col("_w"), f"$[0]['{name}']", "variant")
    # a name with both quote characters: through a map of the object's fields
    return F.try_variant_get(col("_w"), "$[0]", "map<string,variant>").getItem(name)


def _field_ok(i: int, name: str, declared: str, col: _Columns = _by_name) -> Any:
    """Whether field ``name`` (``_f<i>``, of kind ``_k<i>``: ``schema_of_variant``; ``_v`` the
    from_json struct) is absent, ``null`` or a ``declared`` value, as
    :func:`lowwater.io.fields.read_value` decides."""
    from pyspark.sql import functions as F

    from lowwater.io.fields import DATE_TEXT, TIMESTAMP_TEXT, decimal_type

    value, kind = col(f"_f{i}"), col(f"_k{i}")
    if declared == "BIGINT":
        ok = kind == "BIGINT"
    elif declared in _INT_FIELD_TYPES:
        bits = {"INT": 31, "SMALLINT": 15, "TINYINT": 7}[declared]
        ok = (kind == "BIGINT") & F.try_variant_get(value, "$", "bigint").between(-(2**bits), 2**bits - 1)
    elif declared in ("DOUBLE", "FLOAT"):
        # a BIGINT or DECIMAL (at most 38 digits) is finite and within FLOAT's range; a DOUBLE may
        # not be (1e400 is Infinity), and NaN compares greater than every number
        most = 1.7976931348623157e308 if declared == "DOUBLE" else 3.4028234663852886e38
        ok = (F.when(kind == "DOUBLE", F.abs(F.try_variant_get(value, "$", "double")) <= F.lit(most))
              .otherwise(kind == "BIGINT") | kind.startswith("DECIMAL"))
    elif declared in ("STRING", "BOOLEAN"):
        ok = kind == declared
    elif declared.startswith("DECIMAL("):
        # as lowwater.io.fields reads it: an integer, or a number of at most s places (the variant
        # drops trailing zeros: 10.50 is a DECIMAL(3,1)), with at most p - s integer digits. The
        # variant holds exponent notation (1e3) as a DOUBLE: then the number the DECIMAL holds must
        # be that DOUBLE (from_json reads the value itself from the text, exactly, and gives a null
        # for what it cannot: -1e-999999999 underflows the DOUBLE to -0.0, which alone would pass)
        places = decimal_type(declared)
        assert places is not None
        held = F.try_variant_get(value, "$", declared.lower())
        scale = F.regexp_extract(kind, r"^DECIMAL\(\d+,(\d+)\)$", 1)
        ok = held.isNotNull() & col("_v").getField(name).isNotNull() & (  # from_json read it too
            (kind == "BIGINT") | (kind.startswith("DECIMAL") & (scale.cast("int") <= F.lit(places[1])))
            | ((kind == "DOUBLE") & (held.cast("double") == F.try_variant_get(value, "$", "double"))))
    else:  # TIMESTAMP, DATE: a string of the form the log reads that from_json reads (a number is not seconds)
        text = TIMESTAMP_TEXT if declared == "TIMESTAMP" else DATE_TEXT  # from_json alone read "5000" as a year
        ok = ((kind == "STRING") & F.try_variant_get(value, "$", "string").rlike(f"^(?:{text})$")
              & col("_v").getField(name).isNotNull())
    return kind.isNull() | (kind == "VOID") | F.coalesce(ok, F.lit(False))


def _start(col: _Columns) -> Any:
    """The value (``_s``) without JSON's leading whitespace."""
    from pyspark.sql import functions as F

    return F.ltrim(col("_s"), F.lit(" \t\n\r"))


# _corrupt_code's codes below the first field's
_TOMBSTONE, _NOT_UTF8, _NOT_ONE_VALUE, _NOT_AN_OBJECT, _JVM, _FIELD = 1, 2, 3, 4, 5, 6


def _corrupt_code(fields: Sequence[tuple[str, str]], binary: bool, col: _Columns = _by_name) -> Any:
    """Which check a Kafka record fails first (null: none; ``_FIELD + i``: field ``i``), over
    ``_raw`` (the value), ``_s`` (as a string), ``_w`` (``[<value>]`` parsed) and each field's
    ``_f<i>`` and ``_k<i>``: the partitioned log's reading of a record's ``value`` object, in
    Spark SQL. A small expression for every record; :func:`_corrupt_reason` words the few bad ones.

    Spark's parser reads one JSON value and ignores what follows it: ``{..} {..}`` parses as the
    first object. Parsed inside ``[...]``, the rest is inside the array, and then invalid JSON
    (no comma) or a second element (``$[1]``), unless the value closes the array itself
    (``{..}],[..``). That takes a ``]`` at the value's top level, and then the value also breaks
    ``{"a":<value>}`` (a ``]`` where ``}`` was due, or a comma before a value instead of a key),
    which a valid value does not: that second parse is only made for values with a ``]``."""
    from pyspark.sql import functions as F

    raw, text, parsed = col("_raw"), col("_s"), col("_w")
    one = (parsed.isNotNull() & F.try_variant_get(parsed, "$[1]", "variant").isNull()
           & F.when(F.instr(text, "]") == 0, F.lit(True)).otherwise(
               F.try_parse_json(F.concat(F.lit('{"a":'), text, F.lit("}"))).isNotNull()))
    code = F.when(raw.isNull(), F.lit(_TOMBSTONE))
    if binary:
        code = code.when(~F.is_valid_utf8(raw), F.lit(_NOT_UTF8))
    code = code.when(~one, F.lit(_NOT_ONE_VALUE))
    code = code.when(~F.startswith(_start(col), F.lit("{")), F.lit(_NOT_AN_OBJECT))
    for i, (name, declared) in enumerate(fields):
        code = code.when(~_field_ok(i, name, declared, col), F.lit(_FIELD + i))
    return code


def _corrupt_reason(fields: Sequence[tuple[str, str]], jvm: bool = False, col: _Columns = _by_name) -> Any:
    """The reason for ``_code`` (:func:`_corrupt_code`), worded as the partitioned log words it
    (``field 'x': 5 is not a STRING``); null for a good record. ``jvm``: the JVM reader's struct
    is ``_j``, and its reason words a record only it found bad."""
    from pyspark.sql import functions as F

    code, text = col("_code"), col("_s")
    first = F.substring(_start(col), 1, 1)
    kind = (F.when(first == "[", "array").when(first == '"', "string").when(first.isin("t", "f"), "boolean")
            .when(first == "n", "null").otherwise("number"))
    reason = (F.when(code.isNull(), F.lit(None).cast("string"))
              .when(code == _TOMBSTONE, F.lit("value is null (a tombstone), not a JSON object"))
              .when(code == _NOT_UTF8, F.concat(F.lit("value is not UTF-8: "), _quoted(
                  F.make_valid_utf8(col("_raw")).cast("string"), _SNIPPET_CHARS)))
              .when(code == _NOT_ONE_VALUE, F.concat(
                  F.when(F.try_parse_json(text).isNotNull(), F.lit("invalid JSON (more after the first value): "))
                  .otherwise(F.lit("invalid JSON (a syntax error, or a key given twice): ")),
                  _quoted(text, _SNIPPET_CHARS)))
              .when(code == _NOT_AN_OBJECT, F.when(_start(col) == "", F.lit("empty value")).otherwise(F.concat(
                  F.lit("value is a JSON "), kind, F.lit(", not an object: "), _quoted(text, _SNIPPET_CHARS)))))
    if jvm:
        reason = reason.when(code == _JVM, F.concat(F.lit("invalid value ("), col("_j").getField("bad"), F.lit("): "),
                                                    _quoted(text, _SNIPPET_CHARS)))
    if not fields:
        return reason
    # field i: one expression over the i-th of each, not one per field
    i = code - F.lit(_FIELD - 1)  # element_at counts from 1
    value = F.element_at(F.array(*[col(f"_f{j}") for j in range(len(fields))]), i)
    kinds = F.element_at(F.array(*[col(f"_k{j}") for j in range(len(fields))]), i)
    name = F.element_at(F.array(*[F.lit(repr(n)) for n, _ in fields]), i)
    declared = F.element_at(F.array(*[F.lit(f"{article(t)} {t}") for _, t in fields]), i)  # "an INT"
    integral = F.element_at(F.array(*[F.lit(t in _INT_FIELD_TYPES) for _, t in fields]), i)
    # a number as Spark holds it (1e400: Infinity), and which number when an integer was due: 1.0
    # is held as DECIMAL(1,0), shown 1, and 2**63 as DECIMAL(19,0)
    number = F.try_variant_get(value, "$", "string")
    number = F.when(integral & (kinds != "BIGINT"), F.concat(number, F.lit(" (read as "), kinds, F.lit(")"))
                    ).otherwise(number)
    shown = F.when(kinds.isin("BIGINT", "DOUBLE") | kinds.startswith("DECIMAL"), number).otherwise(F.to_json(value))
    shown = F.when(F.length(shown) > 60, F.concat(F.substring(shown, 1, 60), F.lit("..."))).otherwise(shown)
    return reason.otherwise(F.concat(F.lit("field "), name, F.lit(": "), shown, F.lit(" is not "), declared))


_SUBSCRIPTION_OPTIONS = ("subscribe", "subscribePattern", "assign")
"""The options of Spark's Kafka source that say what it reads."""
_READS = "kafka reader"


def _kafka_reader_options(df: DataFrame) -> list[Any]:
    """The options (Spark's case-insensitive map) of each Kafka source in ``df``'s plan; none for a
    plan that cannot be looked at (Spark Connect)."""
    try:
        leaves = df._jdf.queryExecution().analyzed().collectLeaves()
    except Exception:  # Spark Connect (no _jdf), or another Spark's plan API
        return []
    found = []
    it = leaves.iterator()
    while it.hasNext():
        leaf = it.next()
        if leaf.getClass().getSimpleName() == "StreamingRelationV2" and str(leaf.sourceName()).lower() == "kafka":
            found.append(leaf.extraOptions())
    return found


def _option_keys(options: Any) -> list[Any]:
    """The keys of a Kafka reader's options: a mapping, or Spark's case-insensitive map (its keys
    lower case)."""
    if isinstance(options, dict):
        return list(options)
    try:
        return list(options.keySet())
    except Exception:  # another Spark's map
        return []


def skips_deleted_records(options: Any) -> bool:
    """Whether Kafka reader ``options`` (a mapping, or Spark's case-insensitive map) say
    ``failOnDataLoss=false``, whatever the case of the key and the value."""
    if isinstance(options, dict):
        said = [v for k, v in options.items() if str(k).lower() == "failondataloss"]
    else:
        said = [options.get("failOnDataLoss")]
    return any(v is not None and str(v).strip().lower() == "false" for v in said)


def _several_kafka_topics(df: DataFrame) -> str | None:
    """What ``df`` reads, said as the option that says it (``subscribe=a,b``), when its plan's
    Kafka sources may read more than one topic; else None (one topic, no Kafka source, or a plan
    that cannot be looked at: Spark Connect)."""
    topics: set[str] = set()
    said: list[str] = []
    for opts in _kafka_reader_options(df):
        pattern, subscribe, assign = opts.get("subscribePattern"), opts.get("subscribe"), opts.get("assign")
        if pattern is not None:
            return f"the topics matching subscribePattern={pattern}"
        if subscribe is not None:
            named = {t.strip() for t in str(subscribe).split(",") if t.strip()}
            said.append(f"subscribe={subscribe}")
        elif assign is not None:
            try:
                named = set(json.loads(str(assign)))
            except ValueError:
                continue  # Spark refuses it when the query starts
            said.append(f"assign={assign}")
        else:
            continue
        topics |= named
    return f"{len(topics)} topics ({', '.join(said)})" if len(topics) > 1 else None


def check_topic_numbering(topics: Sequence[str], per_topic: int) -> None:
    """Refuse ``topics`` whose numbering (``index * per_topic + partition``) cannot be a partition
    number: duplicates, a ``per_topic`` below 1, or more topics than fit under :data:`PARTITION_MAX`."""
    if len(set(topics)) != len(topics):
        raise ConfigurationError("topics", f"names a topic twice: {list(topics)}")
    if per_topic < 1:
        raise ConfigurationError("partitions_per_topic", f"must be at least 1, got {per_topic}")
    most = (PARTITION_MAX + 1) // per_topic
    if len(topics) > most:
        raise ConfigurationError("topics", f"{len(topics)} topics of {per_topic} partitions each "
                                           f"(partitions_per_topic) number past {PARTITION_MAX}: "
                                           f"at most {most} topics in one source")


def topic_partition_number(index: int, topic: str, partition: int, per_topic: int) -> int:
    """The lowwater partition of ``partition`` of ``topic``, the ``index``-th topic, as the
    source's rows number it; a partition that does not fit under ``per_topic`` is refused."""
    if not 0 <= partition < per_topic:
        raise ConfigurationError("topics", f"topic {topic!r} has partition {partition}, and partitions are numbered "
                                           f"{per_topic} to a topic: a larger number would be another topic's")
    return index * per_topic + partition
