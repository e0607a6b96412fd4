"""Fire every ``max_count`` elements."""

from __future__ import annotations

import operator
from typing import Any

from lowwater.core.errors import ConfigurationError
from lowwater.core.windows.trigger import (
    OnMergeContext,
    ReducingStateDescriptor,
    Trigger,
    TriggerContext,
    TriggerResult,
)
from lowwater.core.windows.window import Window

__all__ = ["CountTrigger"]


class CountTrigger(Trigger[Window]):
    """Fires when a window's element count reaches ``max_count``, then counts afresh."""

    def __init__(self, max_count: int) -> None:
        if max_count <= 0:
            raise ConfigurationError("max_count", f"must be > 0, got {max_count}")
        self.max_count = max_count
        self.state = ReducingStateDescriptor[int]("count", operator.add)

    @staticmethod
    def of(max_count: int) -> CountTrigger:
        return CountTrigger(max_count)

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        count = ctx.get_partitioned_state(self.state)
        count.add(1)
        if (count.get() or 0) >= self.max_count:
            count.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.state)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.get_partitioned_state(self.state).clear()

    def __repr__(self) -> str:
        return f"CountTrigger({self.max_count})"
