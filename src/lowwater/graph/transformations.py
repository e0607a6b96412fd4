"""The pipeline graph: immutable nodes that a runtime compiles and runs."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import WindowAssigner, WindowContents
from lowwater.core.windows.operator import WindowFunction
from lowwater.core.windows.trigger import Trigger
from lowwater.graph.sinks import Sink
from lowwater.graph.sources import Source

__all__ = [
    "AssignTransformation",
    "CoTransformation",
    "KeyedCoProcessTransformation",
    "KeyedProcessTransformation",
    "OneInputTransformation",
    "OutputTag",
    "SideOutputTransformation",
    "SinkTransformation",
    "SourceTransformation",
    "Transformation",
    "UnionTransformation",
    "WindowTransformation",
]

_ids = itertools.count(1)


@dataclass(frozen=True)
class OutputTag:
    """Names a side output, e.g. ``OutputTag("late")`` for late data. ``type_info`` is accepted for
    PyFlink compatibility (``OutputTag("late", Types.ROW(...))``) and not used: a tag is its name."""

    name: str
    type_info: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, eq=False)
class Transformation:
    name: str
    id: int = field(default_factory=lambda: next(_ids), init=False)

    @property
    def inputs(self) -> tuple[Transformation, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class SourceTransformation(Transformation):
    source: Source
    strategy: WatermarkStrategy[Any] | None = None


@dataclass(frozen=True, eq=False)
class OneInputTransformation(Transformation):
    input: Transformation
    kind: str  # map | filter | flat_map
    fn: Callable[[Any], Any]

    @property
    def inputs(self) -> tuple[Transformation, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class AssignTransformation(Transformation):
    """``assign_timestamps_and_watermarks``: per partition; overrides upstream event time."""

    input: Transformation
    strategy: WatermarkStrategy[Any]

    @property
    def inputs(self) -> tuple[Transformation, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class WindowTransformation(Transformation):
    input: Transformation
    key_selector: Callable[[Any], Any]
    assigner: WindowAssigner[Any]
    contents: WindowContents
    trigger: Trigger[Any] | None = None
    allowed_lateness_ms: int = 0
    late_tag: OutputTag | None = None
    window_function: WindowFunction | None = None

    @property
    def inputs(self) -> tuple[Transformation, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class SideOutputTransformation(Transformation):
    input: Transformation
    tag: OutputTag

    @property
    def inputs(self) -> tuple[Transformation, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class UnionTransformation(Transformation):
    members: tuple[Transformation, ...] = ()

    @property
    def inputs(self) -> tuple[Transformation, ...]:
        return self.members


@dataclass(frozen=True, eq=False)
class CoTransformation(Transformation):
    """Two inputs, one function each; the watermark is the minimum of both inputs."""

    first: Transformation
    second: Transformation
    fn1: Callable[[Any], Any]
    fn2: Callable[[Any], Any]
    flat: bool = False

    @property
    def inputs(self) -> tuple[Transformation, ...]:
        return (self.first, self.second)


@dataclass(frozen=True, eq=False)
class SinkTransformation(Transformation):
    input: Transformation
    sink: Sink

    @property
    def inputs(self) -> tuple[Transformation, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class KeyedProcessTransformation(Transformation):
    """``key_by(...).process(fn)``: a ``KeyedProcessFunction`` with keyed state and timers."""

    input: Transformation
    key_selector: Callable[[Any], Any]
    function: Any

    @property
    def inputs(self) -> tuple[Transformation, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class KeyedCoProcessTransformation(Transformation):
    """``connect(...).key_by(k1, k2).process(fn)``: a ``KeyedCoProcessFunction``; its
    watermark is the minimum of both inputs."""

    first: Transformation
    second: Transformation
    key_selector1: Callable[[Any], Any]
    key_selector2: Callable[[Any], Any]
    function: Any

    @property
    def inputs(self) -> tuple[Transformation, ...]:
        return (self.first, self.second)
