"""The pipeline API: environment, streams, sources, sinks."""

from lowwater.api.datastream import (
    ConnectedStreams,
    DataStream,
    KeyedStream,
    SingleOutputStream,
    WindowedStream,
)
from lowwater.api.environment import StreamExecutionEnvironment
from lowwater.core.process import (
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    RuntimeContext,
    TimeDomain,
    ValueStateDescriptor,
)
from lowwater.graph.sinks import CollectSink, ForeachBatchSink, FunctionSink, PrintSink, Sink
from lowwater.graph.sources import (
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
from lowwater.graph.transformations import OutputTag

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
