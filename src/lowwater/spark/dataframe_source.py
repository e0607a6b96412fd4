"""Any streaming DataFrame as a lowwater source; the Kafka source schema is one such DataFrame."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from lowwater.core.errors import ConfigurationError, LowwaterError
from lowwater.graph.sources import SourceBatch
from lowwater.spark.source_base import SparkSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["ColumnLike", "DataFrameSource", "KafkaShapedSource", "check_topic_numbering", "topic_partition_number"]


ColumnLike = Any  # a column name (str) or a pyspark Column
"""How DataFrameSource takes a column: by name, or as a Column expression."""

_TIME_TYPES = ("TimestampType", "DateType")
_INTEGRAL_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType")
PARTITION_MAX = 2**31 - 1
"""The largest partition number (Spark's INT): lowwater's partitions are 0 to this."""


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
        from 0 to 2**31 - 1); ``None``: one partition, 0. A row whose partition is null,
        negative or larger fails the query with a message that names the column, the value
        and the row's offset (a partition is where a row came from, not data to dead-letter).
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
        return list(self.df.columns)

    def spark_stream(self, spark: SparkSession) -> DataFrame:
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

    With ``topics``, a record of a topic not listed, or whose partition is
    ``partitions_per_topic`` or more, fails the query with a message naming its topic, partition
    and offset: numbered on, it would be another topic's partition, and two partitions'
    records would share one watermark without a word. Without ``topics`` the DataFrame must
    read one topic: its partitions are numbered by the Kafka partition alone. A DataFrame read
    with Spark's Kafka source that subscribes to several topics (``subscribe`` with a list,
    ``subscribePattern``, or ``assign`` over several) is refused without ``topics``, naming
    what it reads.
    """

    def __init__(self, df: DataFrame, value_fields: Sequence[tuple[str, str]], topics: Sequence[str] | None = None,
                 partitions_per_topic: int = 1 << 20) -> None:
        from pyspark.sql import functions as F

        missing = {"topic", "partition", "offset", "timestamp", "value"} - set(df.columns)
        if missing:
            raise ConfigurationError("df", f"is not Kafka-shaped: missing column(s) {sorted(missing)}")
        if not topics:
            several = _several_kafka_topics(df)
            if several is not None:
                raise ConfigurationError(
                    "topics", f"the DataFrame reads {several} with Spark's Kafka source, and without topics the "
                              "partitions are numbered by the Kafka partition alone: partition 0 of every topic "
                              "would share one watermark. Pass topics=[...] listing every topic it reads")
        self.kafka_df = df
        self.value_fields = list(value_fields)
        self.topics = list(topics) if topics else None
        self.partitions_per_topic = partitions_per_topic
        part = F.col("partition") if self.topics is None else self._numbered(self.topics, partitions_per_topic)
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


def _several_kafka_topics(df: DataFrame) -> str | None:
    """What ``df`` reads, said as the option that says it (``subscribe=a,b``), when its plan's
    Kafka sources may read more than one topic; else None (one topic, no Kafka source, or a plan
    that cannot be looked at: Spark Connect)."""
    import json

    try:
        leaves = df._jdf.queryExecution().analyzed().collectLeaves()
    except Exception:  # Spark Connect (no _jdf), or another Spark's plan API
        return None
    topics: set[str] = set()
    said: list[str] = []
    it = leaves.iterator()
    while it.hasNext():
        leaf = it.next()
        if leaf.getClass().getSimpleName() != "StreamingRelationV2" or str(leaf.sourceName()).lower() != "kafka":
            continue
        opts = leaf.extraOptions()
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
