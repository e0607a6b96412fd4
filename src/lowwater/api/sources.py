"""Sources: moved to :mod:`lowwater.graph.sources`; re-exported here so that imports keep working."""

from lowwater.graph.sources import (
    CollectionSource,
    FunctionSource,
    Source,
    SourceBatch,
    SourceContext,
    SourceFunction,
    SourceIdle,
    SourceItem,
    SourceRecord,
    SourceWatermark,
)

__all__ = [
    "CollectionSource",
    "FunctionSource",
    "Source",
    "SourceBatch",
    "SourceContext",
    "SourceFunction",
    "SourceIdle",
    "SourceItem",
    "SourceRecord",
    "SourceWatermark",
]
