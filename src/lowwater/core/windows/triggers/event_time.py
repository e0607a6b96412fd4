"""The default event-time trigger."""

from __future__ import annotations

from typing import Any

from lowwater.core.windows.trigger import OnMergeContext, Trigger, TriggerContext, TriggerResult
from lowwater.core.windows.window import Window

__all__ = ["EventTimeTrigger"]


class EventTimeTrigger(Trigger[Window]):
    """Fires once ``watermark >= window.max_timestamp()``.

    An element for a window the watermark has already passed (within allowed lateness)
    fires it at once.
    """

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        if window.max_timestamp() <= ctx.current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        if window.max_timestamp() > ctx.current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    @staticmethod
    def create() -> EventTimeTrigger:
        """PyFlink's (and Flink's) factory: ``.trigger(EventTimeTrigger.create())``."""
        return EventTimeTrigger()

    def __repr__(self) -> str:
        return "EventTimeTrigger()"
