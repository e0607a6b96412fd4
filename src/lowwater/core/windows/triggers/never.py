"""The global window's default trigger: never fires."""

from __future__ import annotations

from typing import Any

from lowwater.core.windows.trigger import OnMergeContext, Trigger, TriggerContext, TriggerResult
from lowwater.core.windows.window import Window

__all__ = ["NeverTrigger"]


class NeverTrigger(Trigger[Window]):
    """Always CONTINUE; give ``GlobalWindows`` a real trigger with ``.trigger(...)``."""

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        pass

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        pass
