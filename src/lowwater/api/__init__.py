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
from lowwater.core.process import (
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    RuntimeContext,
    TimeDomain,
    ValueStateDescriptor,
)

__all__ = [
    "CollectSink",
    "CollectionSource",
    "ConnectedStreams",
    "DataStream",
    "ForeachBatchSink",
    "FunctionSink",
    "FunctionSource",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStream",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "OutputTag",
    "PrintSink",
    "RuntimeContext",
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
    "TimeDomain",
    "ValueStateDescriptor",
    "WindowedStream",
]
