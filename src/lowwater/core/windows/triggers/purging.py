"""Turn every FIRE of a nested trigger into FIRE_AND_PURGE."""

from __future__ import annotations

from typing import Any

from lowwater.core.windows.trigger import OnMergeContext, Trigger, TriggerContext, TriggerResult
from lowwater.core.windows.window import Window

__all__ = ["PurgingTrigger"]


def _purging(result: TriggerResult) -> TriggerResult:
    return TriggerResult.FIRE_AND_PURGE if result.is_fire else result


class PurgingTrigger(Trigger[Window]):
    """Wraps a trigger; the window's contents are cleared each time it fires."""

    def __init__(self, nested: Trigger[Any]) -> None:
        self.nested = nested

    @staticmethod
    def of(nested: Trigger[Any]) -> PurgingTrigger:
        return PurgingTrigger(nested)

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return _purging(self.nested.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return _purging(self.nested.on_event_time(time, window, ctx))

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return _purging(self.nested.on_processing_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self.nested.can_merge()

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        self.nested.on_merge(window, ctx)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        self.nested.clear(window, ctx)

    def __repr__(self) -> str:
        return f"PurgingTrigger({self.nested!r})"
