"""The pipeline API: environment, streams, sources, sinks."""

from lowwater.api.datastream import (
    ConnectedStreams,
    DataStream,
    KeyedStream,
    SingleOutputStream,
    WindowedStream,
)
from lowwater.api.environment import StreamExecutionEnvironment
from lowwater.api.sinks import CollectSink, ForeachBatchSink, FunctionSink, PrintSink, Sink
from lowwater.api.sources import (
    CollectionSource,
    FunctionSource,
    Source,
    SourceBatch,
    SourceContext,
    SourceFunction,
    SourceIdle,
    SourceRecord,
    SourceWatermark,
)
from lowwater.api.transformations import OutputTag

__all__ = [
    "CollectSink",
    "CollectionSource",
    "ConnectedStreams",
    "DataStream",
    "ForeachBatchSink",
    "FunctionSink",
    "FunctionSource",
    "KeyedStream",
    "OutputTag",
    "PrintSink",
    "SingleOutputStream",
    "Sink",
    "Source",
    "SourceBatch",
    "SourceContext",
    "SourceFunction",
    "SourceIdle",
    "SourceRecord",
    "SourceWatermark",
    "StreamExecutionEnvironment",
    "WindowedStream",
]
