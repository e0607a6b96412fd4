"""The pipeline graph's transformations, now in :mod:`lowwater.graph.transformations` (re-exported)."""

from lowwater.graph.transformations import (
    AssignTransformation,
    CoTransformation,
    KeyedCoProcessTransformation,
    KeyedProcessTransformation,
    OneInputTransformation,
    OutputTag,
    SideOutputTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    UnionTransformation,
    WindowTransformation,
)

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
