"""Punctuated watermarks: a watermark decided per element."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from lowwater.core.watermarks.generator import WatermarkGenerator
from lowwater.core.watermarks.watermark import Watermark, WatermarkOutput

__all__ = ["PunctuatedWatermarks"]

T = TypeVar("T")


class PunctuatedWatermarks(WatermarkGenerator[T], Generic[T]):
    """Calls ``check(element, extracted_timestamp)`` after every element.

    A non-``None`` result is emitted as a watermark (outputs drop one that is not above
    the last). Nothing happens at periodic emits.

    >>> from lowwater.core.watermarks.recording import RecordingOutput
    >>> g = PunctuatedWatermarks(lambda e, ts: ts if e == "marker" else None)
    >>> out = RecordingOutput(); g.on_event("x", 5, out); g.on_event("marker", 7, out)
    >>> out.watermarks
    [7]
    """

    def __init__(self, check: Callable[[T, int], int | None]) -> None:
        self.check = check

    def on_event(self, event: T, event_timestamp: int, output: WatermarkOutput) -> None:
        wm = self.check(event, event_timestamp)
        if wm is not None:
            output.emit_watermark(Watermark(int(wm)))

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        pass
