"""The default processing-time trigger."""

from __future__ import annotations

from typing import Any

from lowwater.core.windows.trigger import OnMergeContext, Trigger, TriggerContext, TriggerResult
from lowwater.core.windows.window import Window

__all__ = ["ProcessingTimeTrigger"]


class ProcessingTimeTrigger(Trigger[Window]):
    """Fires when the processing-time clock passes ``window.max_timestamp()``."""

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        if window.max_timestamp() > ctx.current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())

    @staticmethod
    def create() -> ProcessingTimeTrigger:
        """PyFlink's (and Flink's) factory: ``.trigger(ProcessingTimeTrigger.create())``."""
        return ProcessingTimeTrigger()

    def __repr__(self) -> str:
        return "ProcessingTimeTrigger()"
