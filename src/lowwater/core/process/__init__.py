"""Keyed process functions, their keyed state and timers, and the operator that runs them."""

from lowwater.core.process.functions import (
    Collector,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    ProcessContext,
    RuntimeContext,
    TimeDomain,
    TimerService,
)
from lowwater.core.process.operator import Emitted, KeyedProcessOperator, SideEmitted
from lowwater.core.process.state import (
    InMemoryKeyedStateBackend,
    KeyedStateBackend,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    StateDescriptor,
    ValueState,
    ValueStateDescriptor,
)

__all__ = [
    "Collector",
    "Emitted",
    "InMemoryKeyedStateBackend",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedProcessOperator",
    "KeyedStateBackend",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "ProcessContext",
    "RuntimeContext",
    "SideEmitted",
    "StateDescriptor",
    "TimeDomain",
    "TimerService",
    "ValueState",
    "ValueStateDescriptor",
]
