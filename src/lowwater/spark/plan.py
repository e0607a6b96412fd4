"""Which Spark execution path a pipeline can take.

*Native*: the common shape, run with Spark column expressions and one aggregation per
micro-batch, as fast as Spark's own windowed aggregation::

    source (+ built-in strategy, timestamp from a field or the source)
      -> key_by(field) -> tumbling/sliding event-time windows, default trigger
      -> built-in aggregate of a field (sum, count, min, max, avg)
      -> sinks, and sinks on the late side output

*General*: anything else (sessions, custom triggers, process functions, Python maps,
user generators, classic assigners). The micro-batch's rows are brought to the driver in
arrival order and stepped through the reference runtime's operators, so the results
are the specification's by construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lowwater.core.errors import PipelineError, shown
from lowwater.core.time_characteristic import TimeCharacteristic
from lowwater.core.watermarks import FieldTimestampAssigner, RecordTimestampAssigner, WatermarkStrategy
from lowwater.core.windows import (
    AggregatingContents,
    BuiltinAggregate,
    Count,
    EventTimeTrigger,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from lowwater.graph import PipelineLike, as_pipeline
from lowwater.graph.transformations import (
    AssignTransformation,
    OutputTag,
    SideOutputTransformation,
    SourceTransformation,
    Transformation,
    UnionTransformation,
    WindowTransformation,
)
from lowwater.spark.sources import SparkSource

__all__ = ["NativePlan", "find_source", "fingerprint", "native_plan"]


@dataclass(frozen=True)
class NativePlan:
    source: SparkSource
    strategy: WatermarkStrategy[Any]
    timestamp_field: str | None
    """The element field holding event time; ``None`` means the source timestamp."""
    key_field: str
    size_ms: int
    slide_ms: int
    offset_ms: int
    allowed_lateness_ms: int
    aggregate: str
    value_field: str | None
    sink_outputs: tuple[str, ...]
    """Per sink of the pipeline, in its order: ``"result"`` (the window's output) or ``"late"``."""
    window_name: str
    late_tag: OutputTag | None
    executor_watermarks: bool = False
    """Timestamps and watermarks need Python per row: run them on the executors per partition."""


def walk(pipeline: PipelineLike) -> list[Transformation]:
    """Every transformation that reaches a sink, each once (:meth:`Pipeline.walk`)."""
    return list(as_pipeline(pipeline).walk())


def fingerprint(pipeline: PipelineLike) -> dict[str, Any]:
    """:meth:`Pipeline.fingerprint`: what a checkpoint is bound to."""
    return as_pipeline(pipeline).fingerprint()


def find_source(pipeline: PipelineLike) -> SparkSource:
    sources = as_pipeline(pipeline).sources
    if len(sources) != 1:
        raise PipelineError(f"the spark runtime runs pipelines with exactly one source; this one has {len(sources)}")
    return _spark_source(sources[0])


def _spark_source(t: SourceTransformation) -> SparkSource:
    src = t.source
    if not isinstance(src, SparkSource):
        raise PipelineError(
            f"{type(src).__name__} cannot be read by Spark; use a lowwater.spark.sources source "
            "(PartitionedLogSource, KafkaShapedSource, BatchFilesSource)"
        )
    return src


def native_plan(pipeline: PipelineLike) -> tuple[NativePlan | None, str]:
    """The native plan, or ``None`` and the reason the general path is needed."""
    p = as_pipeline(pipeline)
    if p.time_characteristic is not TimeCharacteristic.EVENT_TIME:
        return None, "not event time"
    ts = p.walk()
    windows = [t for t in ts if isinstance(t, WindowTransformation)]
    if len(windows) != 1:
        return None, "not exactly one window operator"
    w = windows[0]
    sink_outputs: list[str] = []
    for s in p.sinks:
        if s.input is w:
            sink_outputs.append("result")
        elif isinstance(s.input, SideOutputTransformation) and s.input.input is w and s.input.tag == w.late_tag:
            sink_outputs.append("late")
        else:
            return None, f"sink {s.name!r} is not on the window's output or its late side output"
    up = w.input
    strategy = None
    if isinstance(up, AssignTransformation):
        strategy, up = up.strategy, up.input
    if isinstance(up, UnionTransformation):  # a user probe found it called an operator (session 62)
        return None, "several sources are unioned into the window (the keyed path runs a union)"
    if not isinstance(up, SourceTransformation):
        return None, f"an operator ({up.name!r}) between the source and the window"
    strategy = strategy or up.strategy
    if strategy is None:
        return None, "no watermark strategy"
    executor = strategy.builtin not in ("bounded_out_of_orderness", "time_lag", "no_watermarks")
    ts_field: str | None = None
    proto = strategy.assigner_prototype
    if strategy.legacy_assigner is not None and strategy.assigner_factory is None:
        executor = True
    elif strategy.assigner_factory is None or isinstance(proto, RecordTimestampAssigner):
        ts_field = None
    elif isinstance(proto, FieldTimestampAssigner):
        ts_field = proto.field
    else:
        executor = True
    key_field = getattr(w.key_selector, "field_name", None)
    if key_field is None:
        return None, "key selector is a Python function"
    a = w.assigner
    if isinstance(a, TumblingEventTimeWindows):
        size, slide, offset = a.size_ms, a.size_ms, a.offset_ms
    elif isinstance(a, SlidingEventTimeWindows):
        size, slide, offset = a.size_ms, a.slide_ms, a.offset_ms
    else:
        return None, f"window assigner {a!r}"
    if w.trigger is not None and not isinstance(w.trigger, EventTimeTrigger):
        return None, f"trigger {shown(w.trigger)}"
    if w.window_function is not None:
        return None, "window function"
    if not isinstance(w.contents, AggregatingContents) or not isinstance(w.contents.function, BuiltinAggregate):
        return None, "not a built-in aggregate"
    agg = w.contents.function
    if agg.field is None and not isinstance(agg, Count):
        return None, "aggregate of a Python function"
    return NativePlan(
        _spark_source(up), strategy, ts_field, key_field, size, slide, offset, w.allowed_lateness_ms,
        agg.name, agg.field, tuple(sink_outputs), w.name, w.late_tag, executor,
    ), "native, watermarks on the executors" if executor else "native"
