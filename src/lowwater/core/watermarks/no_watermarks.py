"""A generator that never emits (``WatermarkStrategy.no_watermarks()``)."""

from __future__ import annotations

from typing import Any

from lowwater.core.watermarks.generator import WatermarkGenerator
from lowwater.core.watermarks.watermark import WatermarkOutput

__all__ = ["NoWatermarksGenerator"]


class NoWatermarksGenerator(WatermarkGenerator[Any]):
    """Emits nothing: event-time windows downstream fire only at end of input."""

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        pass

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        pass
