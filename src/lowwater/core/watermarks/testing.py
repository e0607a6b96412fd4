"""Test helpers that ship with the library: outputs that record what was emitted."""

from __future__ import annotations

from lowwater.core.watermarks.watermark import Watermark

__all__ = ["CollectingOutput"]


class CollectingOutput:
    """A :class:`WatermarkOutput` that records every call, for tests and doctests."""

    def __init__(self) -> None:
        self.watermarks: list[int] = []
        self.events: list[str | int] = []
        self.idle = False

    def emit_watermark(self, watermark: Watermark) -> None:
        self.watermarks.append(watermark.timestamp)
        self.events.append(watermark.timestamp)
        self.idle = False

    def mark_idle(self) -> None:
        self.events.append("idle")
        self.idle = True

    def mark_active(self) -> None:
        self.events.append("active")
        self.idle = False
