"""Sliding windows: fixed size, a new window every ``slide``."""

from __future__ import annotations

from typing import Any

from lowwater.core.errors import ConfigurationError
from lowwater.core.time import MIN_TIMESTAMP, DurationLike, to_millis
from lowwater.core.windows.assigner import WindowAssigner, WindowAssignerContext
from lowwater.core.windows.trigger import Trigger
from lowwater.core.windows.triggers.event_time import EventTimeTrigger
from lowwater.core.windows.triggers.processing_time import ProcessingTimeTrigger
from lowwater.core.windows.tumbling import missing_timestamp_error
from lowwater.core.windows.window import TimeWindow, window_start_with_offset

__all__ = ["SlidingEventTimeWindows", "SlidingProcessingTimeWindows", "sliding_windows"]


def _validate(size: DurationLike, slide: DurationLike, offset: DurationLike) -> tuple[int, int, int]:
    size_ms = to_millis(size, name="size")
    slide_ms = to_millis(slide, name="slide")
    offset_ms = to_millis(offset, name="offset")
    if size_ms <= 0:
        raise ConfigurationError("size", f"window size must be > 0 ms, got {size_ms}")
    if slide_ms <= 0:
        raise ConfigurationError("slide", f"must be > 0 ms, got {slide_ms}")
    if slide_ms > size_ms:
        raise ConfigurationError(
            "slide",
            f"slide ({slide_ms} ms) is larger than the size ({size_ms} ms): elements between "
            "windows would be dropped; use a slide <= size",
        )
    if abs(offset_ms) >= slide_ms:
        raise ConfigurationError("offset", f"must satisfy abs(offset) < slide ({slide_ms} ms), got {offset_ms}")
    return size_ms, slide_ms, offset_ms


def sliding_windows(timestamp: int, size_ms: int, slide_ms: int, offset_ms: int) -> list[TimeWindow]:
    """Every ``[start, start + size)`` with ``start = last_start - k * slide > ts - size``.

    ``last_start = ts - ((ts - offset) mod slide)``; the latest window comes first.

    >>> sliding_windows(7, 10, 5, 0)
    [TimeWindow[5, 15), TimeWindow[0, 10)]
    """
    windows = []
    start = window_start_with_offset(timestamp, offset_ms, slide_ms)
    while start > timestamp - size_ms:
        windows.append(TimeWindow(start, start + size_ms))
        start -= slide_ms
    return windows


class SlidingEventTimeWindows(WindowAssigner[TimeWindow]):
    """Windows of ``size`` starting every ``slide`` (plus ``offset``) by event time."""

    def __init__(self, size_ms: int, slide_ms: int, offset_ms: int = 0) -> None:
        self.size_ms, self.slide_ms, self.offset_ms = _validate(size_ms, slide_ms, offset_ms)

    @staticmethod
    def of(size: DurationLike, slide: DurationLike, offset: DurationLike = 0) -> SlidingEventTimeWindows:
        return SlidingEventTimeWindows(*_validate(size, slide, offset))

    def assign_windows(self, element: Any, timestamp: int, ctx: Any) -> list[TimeWindow]:
        if timestamp <= MIN_TIMESTAMP:
            raise missing_timestamp_error()
        return sliding_windows(timestamp, self.size_ms, self.slide_ms, self.offset_ms)

    def default_trigger(self) -> Trigger[Any]:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"SlidingEventTimeWindows({self.size_ms} ms, slide {self.slide_ms} ms, offset {self.offset_ms} ms)"


class SlidingProcessingTimeWindows(WindowAssigner[TimeWindow]):
    """Sliding windows by the operator's processing-time clock."""

    def __init__(self, size_ms: int, slide_ms: int, offset_ms: int = 0) -> None:
        self.size_ms, self.slide_ms, self.offset_ms = _validate(size_ms, slide_ms, offset_ms)

    @staticmethod
    def of(size: DurationLike, slide: DurationLike, offset: DurationLike = 0) -> SlidingProcessingTimeWindows:
        return SlidingProcessingTimeWindows(*_validate(size, slide, offset))

    def assign_windows(self, element: Any, timestamp: int, ctx: WindowAssignerContext) -> list[TimeWindow]:
        return sliding_windows(ctx.current_processing_time(), self.size_ms, self.slide_ms, self.offset_ms)

    def default_trigger(self) -> Trigger[Any]:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"SlidingProcessingTimeWindows({self.size_ms} ms, slide {self.slide_ms} ms, offset {self.offset_ms} ms)"
