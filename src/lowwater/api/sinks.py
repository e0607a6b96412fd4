"""Sinks: moved to :mod:`lowwater.graph.sinks`; re-exported here so that imports keep working."""

from lowwater.graph.sinks import (
    CollectSink,
    ForeachBatchSink,
    FunctionSink,
    PrintSink,
    Sink,
)

__all__ = [
    "CollectSink",
    "ForeachBatchSink",
    "FunctionSink",
    "PrintSink",
    "Sink",
]
