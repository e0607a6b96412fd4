"""The general path: the reference runtime's operators, stepped once per Spark micro-batch.

The batch's rows come to the driver in arrival order (``_seq``, else partition and
offset) and pass through a :class:`~lowwater.runtime.job.CompiledJob`; its state is
versioned by batch id like the native path's. Any pipeline runs here: sessions, custom
triggers, keyed process functions with state and timers, Python maps and filters, user
generators, classic assigners, several sources (union, connect). It is exact by
construction and as fast as the driver can step records.

Several sources are read by one query: :func:`read_sources` unites their streaming
DataFrames, each row tagged with its source's position (``_source``). Every (source,
partition) is its own lane with its own generator, exactly as on the reference runtime.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lowwater.core.clock import ManualClock
from lowwater.core.errors import ConfigurationError, PipelineError
from lowwater.graph import PipelineLike, as_pipeline
from lowwater.graph.pipeline import describe_output
from lowwater.graph.sinks import Sink
from lowwater.graph.sources import SourceBatch, SourceRecord
from lowwater.graph.transformations import (
    AssignTransformation,
    SideOutputTransformation,
    SourceTransformation,
    Transformation,
    UnionTransformation,
    WindowTransformation,
)
from lowwater.runtime.job import CompiledJob
from lowwater.runtime.records import LateRecord, Record
from lowwater.spark.json_rows import JsonFrames, element_seed, late_document, settled_rows
from lowwater.spark.keyed import window_result_seed
from lowwater.spark.native import unparsed_dead_letter
from lowwater.spark.outputs import Output
from lowwater.spark.sinks.base import DataFrameSink
from lowwater.spark.sources import SparkSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["GeneralProcessor", "find_sources", "read_sources"]

SOURCE_COLUMN = "_source"


def find_sources(pipeline: PipelineLike) -> list[SparkSource]:
    """The pipeline's sources, in the order the compiled job numbers them (its lanes)."""
    sources = [t.source for t in as_pipeline(pipeline).sources]
    if not sources:
        raise PipelineError("the pipeline has no source; start it with env.from_source(...)")
    for src in sources:
        if not isinstance(src, SparkSource):
            raise PipelineError(
                f"{type(src).__name__} cannot be read by Spark; use a lowwater.spark.sources source "
                "(PartitionedLogSource, KafkaShapedSource, BatchFilesSource)"
            )
    return sources  # type: ignore[return-value]


def read_sources(spark: SparkSession, sources: list[SparkSource], names: list[str] | None = None) -> DataFrame:
    """One streaming DataFrame: a single source as it is, several united by name with a
    ``_source`` column (the source's position); fields one source lacks are null. Sources that
    give one field two kinds of type are refused (:func:`_check_united_types`), ``names`` naming them."""
    if len(sources) == 1:
        return sources[0].spark_stream(spark)
    from pyspark.sql import functions as F

    streams = [src.spark_stream(spark).withColumn(SOURCE_COLUMN, F.lit(i)) for i, src in enumerate(sources)]
    _check_united_types(streams, names or [f"source #{i}" for i in range(len(sources))])
    united = streams[0]
    for df in streams[1:]:
        united = united.unionByName(df, allowMissingColumns=True)
    return united


_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")


def _check_united_types(streams: list[DataFrame], names: list[str]) -> None:
    """Refuse sources whose DataFrames give one column two kinds of type (a STRING and a BIGINT
    ``user``): united into one DataFrame, the column has one type, and Spark's coercion casts the
    other source's values to it, so ``"1"`` and ``1`` became one key and ``"x"`` failed the query
    with ``CAST_INVALID_INPUT``, naming neither. Numbers of different widths unite as numbers."""
    seen: dict[str, tuple[str, str]] = {}
    for name, df in zip(names, streams, strict=True):
        for column, kind in df.dtypes:
            if column.startswith("_"):
                continue
            first = seen.setdefault(column, (name, kind))
            if first[1] != kind and not (first[1].startswith(_NUMERIC) and kind.startswith(_NUMERIC)):
                raise ConfigurationError(
                    "fields", f"the sources {first[0]!r} and {name!r} give the field {column!r} two types, "
                    f"{first[1].upper()} and {kind.upper()}: Spark reads several sources as one DataFrame, whose "
                    f"column has one type, and would cast one source's values to the other's (the text '1' and "
                    f"the number 1 one key; a text that is no number fails the query). Hint: declare one type "
                    f"in both, or give the field another name in one of them")


class _Capture(Sink):
    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.records: list[Record] = []

    def write_batch(self, batch_id: int, rows: Any) -> None:
        self.rows = list(rows)

    def write_records(self, batch_id: int, records: list[Record]) -> None:
        self.records = records
        self.rows = [r.value for r in records]


@dataclass
class GeneralOutput:
    per_sink: list[list[Any] | Output]
    """Per sink of the pipeline: its rows, or for a DataFrame sink an :class:`Output` of them."""
    metrics: dict[str, Any]
    delta: Any
    dead: list[dict[str, Any]] = field(default_factory=list)


class GeneralProcessor:
    def __init__(self, pipeline: PipelineLike, sources: SparkSource | list[SparkSource],
                 spark: SparkSession | None = None) -> None:
        self.pipeline = as_pipeline(pipeline)
        self.sources = sources if isinstance(sources, list) else [sources]
        self.spark = spark
        """The session that makes the DataFrame sinks' frames (without one, they get rows)."""
        self.frames = JsonFrames()
        labels = self.pipeline.source_labels()
        self.labels = [labels[t.id] for t in self.pipeline.sources] if labels else []
        """Each source's label in its dead letters (the reference runtime's ``source``), if several."""
        self.schema: StructType | None = None
        """The last batch's columns: the sources' fields' types (:func:`element_seed`)."""
        self.empty_state()  # a pipeline the operators cannot run fails here, before Spark starts

    @property
    def source(self) -> SparkSource:
        return self.sources[0]

    def empty_state(self) -> CompiledJob:
        job = CompiledJob(self.pipeline, ManualClock(0))
        job.detach_sinks()
        job.bound_histories()
        return job

    def rebind(self, loaded: CompiledJob) -> CompiledJob:
        """The loaded state in operators built from the current pipeline (a fixed function takes effect)."""
        job = self.empty_state()
        job.restore_from(loaded)
        job.bound_histories()  # the restored exchanges are the checkpoint's
        return job

    @staticmethod
    def apply_delta(state: CompiledJob, delta: CompiledJob) -> CompiledJob:
        """The state after the delta: the general path's delta is the whole job after its batch."""
        return delta

    @staticmethod
    def totals(job: CompiledJob) -> dict[str, Any]:
        """What the operators report so far (running totals, see :mod:`lowwater.metrics.line`)."""
        return job.metrics(-1, 0, False).flat(job.direct)

    def sinks(self, job: CompiledJob) -> int:
        return len(job.sinks)

    def _batches(self, df: DataFrame, unparsed: list[dict[str, Any]]) -> list[SourceBatch]:
        """The micro-batch's rows per source, in arrival order (``arrival`` across sources)."""
        several = len(self.sources) > 1
        fields = [self.sources[i].fields() for i in range(len(self.sources))]
        columns = list(dict.fromkeys(f for fs in fields for f in fs))
        extra = [c for c in ("_corrupt", "_file", "_raw") if c in df.columns]
        tag = [SOURCE_COLUMN] if several else []
        order = ["_seq", *tag, "_partition", "_offset"]
        rows = df.orderBy(*order).select("_partition", "_offset", "_source_ts", *tag, *columns, *extra).collect()
        nested = {f.name for f in df.schema.fields if f.name in columns and f.dataType.typeName() in
                  ("struct", "array", "map")}  # Rows in them become dicts, as the keyed path's Arrow gives them
        items: list[list[SourceRecord]] = [[] for _ in self.sources]
        arrival: list[list[int]] = [[] for _ in self.sources]
        for pos, r in enumerate(rows):
            if extra and r["_corrupt"] is not None:  # as on the native path
                letter = unparsed_dead_letter(r)
                if several:
                    letter["source"] = self.labels[int(r[SOURCE_COLUMN])]
                unparsed.append(letter)
                continue
            i = int(r[SOURCE_COLUMN]) if several else 0
            items[i].append(SourceRecord({f: _plain(r[f]) if f in nested else r[f] for f in fields[i]},
                                         int(r["_partition"]),
                                         None if r["_offset"] is None else int(r["_offset"]),
                                         None if r["_source_ts"] is None else int(r["_source_ts"])))
            arrival[i].append(pos)
        return [SourceBatch(tuple(it), None, tuple(a) if several else None)
                for it, a in zip(items, arrival, strict=True)]

    def run(self, job: CompiledJob, df: DataFrame | None, batch_id: int, clock_ms: int,
            end_of_input: bool = False) -> GeneralOutput:
        captures = [_Capture() for _ in job.sinks]
        unparsed: list[dict[str, Any]] = []
        job.attach_sinks(captures)
        try:
            if end_of_input:
                m = job.finish(batch_id)
            else:
                if df is not None:
                    self.schema = df.schema
                batches = self._batches(df, unparsed) if df is not None else [SourceBatch() for _ in self.sources]
                m = job.step(batch_id, list(batches), clock_ms)
        finally:
            job.detach_sinks()
        metrics = m.flat(job.direct)
        metrics["rows_in"] += len(unparsed)
        metrics["rows_dead_lettered"] += len(unparsed)
        outputs = [self._output(job, i, c, batch_id) for i, c in enumerate(captures)]
        return GeneralOutput(outputs, metrics, job, dead=[*unparsed, *job.dead.rows])

    def _output(self, job: CompiledJob, i: int, capture: _Capture, batch_id: int) -> list[Any] | Output:
        """Sink ``i``'s payload: its rows, or for a DataFrame sink a DataFrame of them with the
        columns and types the keyed path gives the same output (:func:`settled_rows`, the schema
        kept in the job's state from batch to batch), a late element with its source position and
        the windows that rejected it (and its source's label, with several sources), as the native
        and keyed paths' late outputs have them. Before, the sink got ``createDataFrame(rows)``:
        each batch typed apart, a field null in every row failed the batch, and a late element had
        its fields only."""
        t = self.pipeline.sinks[i]
        rows = capture.rows
        if self.spark is None or not isinstance(t.sink, DataFrameSink):
            return rows
        up = t.input
        late = (isinstance(up, SideOutputTransformation) and isinstance(up.input, WindowTransformation)
                and up.tag == up.input.late_tag)
        values: list[Any] = [late_document(r.value, r.partition, r.offset, r.rejected, r.source)
                             if isinstance(r, LateRecord) else r.value for r in capture.records] if late else rows
        key = f"schema:{i}"
        kept = job.kept.get(key)
        from pyspark.sql.types import StructType

        seed = None
        window = up.inputs[0] if late else up
        fields = _source_fields(window) if self.schema is not None and isinstance(window, WindowTransformation) \
            else None
        if fields is not None and self.schema is not None:  # a window fed straight from its sources
            seed = element_seed(self.schema, fields, timestamps=False) if late else \
                window_result_seed(window, self.schema, timestamps=False)  # typed as the native path's
        df, schema = settled_rows(self.spark, values, self.frames,
                                  None if kept is None else StructType.fromJson(json.loads(kept)),
                                  describe_output(t), batch_id, late=late, late_source=len(self.sources) > 1,
                                  seed=seed)
        if schema is not None:
            job.kept[key] = schema.json()
        return Output(df, lambda _: rows, collected=rows)


def _source_fields(window: Transformation) -> list[str] | None:
    """The fields of the records a window's elements are, where it is fed straight from sources
    (nothing but watermark strategies and unions between); else None."""
    fields: list[str] = []
    todo = [window.inputs[0]]
    while todo:
        up = todo.pop(0)
        if isinstance(up, SourceTransformation) and isinstance(up.source, SparkSource):
            fields += up.source.fields()
        elif isinstance(up, (AssignTransformation, UnionTransformation)):
            todo += up.inputs
        else:
            return None
    return fields


def _plain(value: Any) -> Any:
    """A collected value with each ``Row`` in it (a STRUCT column's) a dict of its fields: the element
    the keyed path's stage A makes of the same column (Arrow's ``to_pylist``), where a ``Row``, a
    tuple, was written to JSON as an array of its values."""
    from pyspark.sql import Row

    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
