"""Windows: assigners, triggers, functions and the window operator."""

from lowwater.core.windows.aggregations import (
    BUILTIN_AGGREGATES,
    Avg,
    BuiltinAggregate,
    Count,
    Max,
    Min,
    Sum,
    builtin_aggregate,
)
from lowwater.core.windows.assigner import MergingWindowAssigner, WindowAssigner
from lowwater.core.windows.contents import (
    AggregatingContents,
    ListContents,
    ReducingContents,
    WindowContents,
)
from lowwater.core.windows.events import LateElement, SideOutput, WindowFired, WindowResult
from lowwater.core.windows.functions import (
    AggregateFunction,
    ProcessWindowFunction,
    ReduceFunction,
    WindowContext,
)
from lowwater.core.windows.global_windows import GlobalWindows
from lowwater.core.windows.operator import WindowOperator
from lowwater.core.windows.session import EventTimeSessionWindows, ProcessingTimeSessionWindows
from lowwater.core.windows.sliding import SlidingEventTimeWindows, SlidingProcessingTimeWindows
from lowwater.core.windows.trigger import (
    ReducingStateDescriptor,
    Trigger,
    TriggerContext,
    TriggerResult,
)
from lowwater.core.windows.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
)
from lowwater.core.windows.tumbling import TumblingEventTimeWindows, TumblingProcessingTimeWindows
from lowwater.core.windows.window import GlobalWindow, TimeWindow, Window, window_start_with_offset

__all__ = [
    "BUILTIN_AGGREGATES",
    "AggregateFunction",
    "AggregatingContents",
    "Avg",
    "BuiltinAggregate",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "Count",
    "CountTrigger",
    "EventTimeSessionWindows",
    "EventTimeTrigger",
    "GlobalWindow",
    "GlobalWindows",
    "LateElement",
    "ListContents",
    "Max",
    "MergingWindowAssigner",
    "Min",
    "NeverTrigger",
    "ProcessWindowFunction",
    "ProcessingTimeSessionWindows",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "ReduceFunction",
    "ReducingContents",
    "ReducingStateDescriptor",
    "SideOutput",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "Sum",
    "TimeWindow",
    "Trigger",
    "TriggerContext",
    "TriggerResult",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "Window",
    "WindowAssigner",
    "WindowContents",
    "WindowContext",
    "WindowFired",
    "WindowOperator",
    "WindowResult",
    "builtin_aggregate",
    "window_start_with_offset",
]
