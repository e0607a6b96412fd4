"""The pipeline value: what a runtime receives to run.

:meth:`StreamExecutionEnvironment.pipeline() <lowwater.api.environment.StreamExecutionEnvironment.pipeline>`
builds it (as Flink's environment builds a ``StreamGraph``), and a runtime's ``execute``
receives it; no runtime needs the environment. The graph is walked once, when the value
is made: :meth:`Pipeline.walk`, :attr:`Pipeline.sources` and :meth:`Pipeline.fingerprint`
read that walk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from lowwater.core.errors import ConfigurationError
from lowwater.core.time_characteristic import TimeCharacteristic
from lowwater.graph.sinks import Sink, check_distinct_targets, check_takes_output
from lowwater.graph.transformations import (
    AssignTransformation,
    SideOutputTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    WindowTransformation,
)

__all__ = ["HasPipeline", "Pipeline", "PipelineLike", "as_pipeline", "describe_output"]


@dataclass(frozen=True, eq=False)
class Pipeline:
    """Every pipeline that ends in a sink, with the job's time settings. Immutable.

    ``transformations`` is the graph walked from the sinks (each transformation once, a sink
    before its inputs, inputs in order); make one with :meth:`of`, which walks it.
    """

    sinks: tuple[SinkTransformation, ...]
    time_characteristic: TimeCharacteristic
    auto_watermark_interval_ms: int
    transformations: tuple[Transformation, ...]

    @classmethod
    def of(
        cls, sinks: tuple[SinkTransformation, ...] | list[SinkTransformation],
        time_characteristic: TimeCharacteristic = TimeCharacteristic.EVENT_TIME,
        auto_watermark_interval_ms: int = 200,
    ) -> Pipeline:
        check_distinct_targets([(describe_output(t), t.sink) for t in sinks])
        for t in sinks:  # a window's late output has the late elements, never a window result
            late = isinstance(t.input, SideOutputTransformation) and isinstance(t.input.input, WindowTransformation) \
                and t.input.tag == t.input.input.late_tag
            check_takes_output(describe_output(t), t.sink, window_results=not late)
        return cls(tuple(sinks), time_characteristic, auto_watermark_interval_ms, _walk(sinks))

    def check_dead_letter_sink(self, sink: Sink | None) -> None:
        """Refuse a dead-letter sink that keeps its batches where one of the pipeline's sinks does
        (:func:`~lowwater.graph.sinks.check_distinct_targets`)."""
        if sink is not None:
            check_takes_output("the dead letters", sink, window_results=False)
            check_distinct_targets([*((describe_output(t), t.sink) for t in self.sinks), ("the dead letters", sink)])

    def walk(self) -> tuple[Transformation, ...]:
        """Every transformation that reaches a sink, each once (no new walk: see the class)."""
        return self.transformations

    @property
    def sources(self) -> tuple[SourceTransformation, ...]:
        """The graph's roots, in the order a compiled job numbers them (its lanes)."""
        return tuple(t for t in self.transformations if isinstance(t, SourceTransformation))

    def source_labels(self) -> dict[int, str]:
        """By source transformation id, the name a dead letter or late element carries (``source``)
        when the job reads several sources, for its partition and offset alone do not say whose they
        are: the source's name, or ``name#k`` (``k`` its place in :attr:`sources`) for a name two sources
        share (``from_source``'s default, ``"source"``, unless named). Empty for a job with one source."""
        sources = self.sources
        if len(sources) < 2:
            return {}
        names = [t.name for t in sources]
        return {t.id: t.name if names.count(t.name) == 1 else f"{t.name}#{k}" for k, t in enumerate(sources)}

    def fingerprint(self) -> dict[str, Any]:
        """What makes a pipeline's state meaningful: its operators, in order, and their settings.

        A checkpoint is bound to it; state made by one pipeline is refused by another.
        """
        parts: dict[str, Any] = {"time_characteristic": self.time_characteristic.value}
        identities: dict[str, str] = {}
        types: dict[str, dict[str, str]] = {}
        strategies: dict[str, dict[str, str]] = {}
        made = sorted(self.transformations, key=lambda t: t.id)  # numbered in the order they were made
        for i, t in enumerate(made):
            desc: list[str] = [type(t).__name__]
            strategy = t.strategy if isinstance(t, SourceTransformation | AssignTransformation) else None
            settings = strategy.settings() if strategy is not None else None
            if settings:
                strategies[f"{i:03d}"] = settings
            if isinstance(t, SourceTransformation):
                desc += [type(t.source).__name__, repr(t.strategy)]
                fields = getattr(t.source, "fields", None)
                if callable(fields):
                    desc.append(",".join(fields()))
                identity = getattr(t.source, "identity", None)
                if callable(identity) and identity():
                    identities[f"{i:03d}"] = identity()
                declared = getattr(t.source, "value_fields", None)
                typed = getattr(t.source, "field_types", None)
                if not declared and callable(typed):  # a DataFrameSource: its DataFrame's types
                    declared = typed()
                if isinstance(declared, list | tuple) and declared:
                    types[f"{i:03d}"] = {str(n): "".join(str(ty).upper().split()) for n, ty in declared}
            elif isinstance(t, AssignTransformation):
                desc.append(repr(t.strategy))
            elif isinstance(t, WindowTransformation):
                desc += [_describe(t.assigner), _describe(t.trigger), str(t.allowed_lateness_ms),
                         getattr(t.key_selector, "field_name", "function"),
                         _describe(getattr(t.contents, "function", t.contents)), _describe(t.window_function)]
            elif isinstance(t, SinkTransformation):
                desc.append(type(t.sink).__name__)
            parts[f"{i:03d}"] = " | ".join(desc)
        position = {t.id: i for i, t in enumerate(made)}
        if len(self.sources) > 1:  # the order Spark numbers them in, and their offsets in its checkpoint
            parts[SOURCE_ORDER_KEY] = [f"{position[t.id]:03d} {t.name}" for t in self.sources]
        # the order the general path compiles and restores its operators in (the walk from the sinks)
        parts[WALK_ORDER_KEY] = [f"{position[t.id]:03d}" for t in self.transformations]
        if identities:  # a key of its own: a checkpoint from before it is resumed (CheckpointStore.claim)
            parts[SOURCES_KEY] = identities
        if types:  # the same
            parts[FIELD_TYPES_KEY] = types
        if strategies:  # the same
            parts[STRATEGY_SETTINGS_KEY] = strategies
        return parts


SOURCES_KEY = "sources"
"""The fingerprint's entry for its sources' identities (``SparkSource.identity``, by position), added
in session 36: a checkpoint recorded before it has none, and is compared without it."""

FIELD_TYPES_KEY = "field_types"
"""The fingerprint's entry for the types its sources declare (``value_fields``, or a
``DataFrameSource``'s ``field_types()`` since session 54; by position), added in session 53: a
field's type changed between restarts was taken, and the window store's Parquet then failed the
batch (``PARQUET_COLUMN_DATA_TYPE_MISMATCH``, naming a file under the checkpoint), or a
DataFrameSource's windows lost what the first run had put in them. A checkpoint recorded before
it has none, and is compared without it; a source's entry, only where recorded."""

SOURCE_ORDER_KEY = "source_order"
"""The fingerprint's entry for the order in which a job of several sources reads them (:attr:`Pipeline.sources`,
each as its transformation's position and name), added in session 56. Spark keeps a query's offsets by
the source's place in its plan: ``b.union(a)`` resumed on the checkpoint of ``a.union(b)`` read each
source from the other's offsets, records lost and others read twice, with the accounting balanced (a
user probe). A checkpoint recorded before it has none, and is compared without it."""

STRATEGY_SETTINGS_KEY = "strategy_settings"
"""The fingerprint's entry for what each watermark strategy's assigner and generator hold as data when
built (:meth:`~lowwater.core.watermarks.WatermarkStrategy.settings`: a field assigner's field, a user
generator's bound), added in session 56. A restart carries the old objects' data into the new ones,
so an edited setting was overwritten by the old one (on the general path a timestamp field; on every
path a user generator's bound), without a word (a user probe). A checkpoint recorded before it has
none, and is compared without it."""

WALK_ORDER_KEY = "walk_order"
"""The fingerprint's entry for the order in which the walk from the sinks reaches the transformations
(:attr:`Pipeline.transformations`, each as its position), added in session 56: the general path
compiles its operators in that order and restores each one's state by its place in it. Two
``add_sink`` lines swapped (each sink on its own window) swapped two windows' state, 1 s windows
coming out of the 10 s operator (a user probe). A checkpoint recorded before it has none, and is
compared without it."""

UNRECORDED_BEFORE = (SOURCES_KEY, FIELD_TYPES_KEY, SOURCE_ORDER_KEY, STRATEGY_SETTINGS_KEY, WALK_ORDER_KEY)
"""The fingerprint's entries a checkpoint recorded by older code may lack: compared only where recorded."""


@runtime_checkable
class HasPipeline(Protocol):
    """Anything that builds a :class:`Pipeline`, such as a ``StreamExecutionEnvironment``."""

    def pipeline(self) -> Pipeline: ...


PipelineLike = Pipeline | HasPipeline


def as_pipeline(p: PipelineLike) -> Pipeline:
    """``p`` itself, or the pipeline it builds: a runtime's boundary, so that callers may pass an
    environment (``runtime.execute(env)``) or the value."""
    if isinstance(p, Pipeline):
        return p
    if isinstance(p, HasPipeline):
        return p.pipeline()
    raise ConfigurationError("pipeline", f"expected a Pipeline or a StreamExecutionEnvironment, got {type(p).__name__}")


def describe_output(t: SinkTransformation) -> str:
    """What a sink is on, for a message: ``the side output 'late' of 'window'``, ``the output of 'sum'``."""
    if isinstance(t.input, SideOutputTransformation):
        return f"the side output {t.input.tag.name!r} of {t.input.input.name!r}"
    return f"the output of {t.input.name!r}"


def _walk(sinks: tuple[SinkTransformation, ...] | list[SinkTransformation]) -> tuple[Transformation, ...]:
    seen: dict[int, Transformation] = {}

    def visit(t: Transformation) -> None:
        if t.id not in seen:
            seen[t.id] = t
            for i in t.inputs:
                visit(i)

    for s in sinks:
        visit(s)
    return tuple(seen.values())


def _describe(x: Any) -> str:
    """A description that is the same in every process (no memory addresses)."""
    if x is None:
        return "None"
    own_repr = any("__repr__" in vars(c) for c in type(x).__mro__[:-1])
    if (own_repr and not callable(x)) or hasattr(type(x), "__dataclass_fields__"):
        return repr(x)
    return str(getattr(x, "__qualname__", None) or type(x).__qualname__)
