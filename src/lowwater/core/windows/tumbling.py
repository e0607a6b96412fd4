"""Tumbling windows: fixed size, no overlap."""

from __future__ import annotations

from typing import Any

from lowwater.core.errors import ConfigurationError
from lowwater.core.time import MIN_TIMESTAMP, DurationLike, to_millis
from lowwater.core.windows.assigner import WindowAssigner, WindowAssignerContext
from lowwater.core.windows.trigger import Trigger
from lowwater.core.windows.triggers.event_time import EventTimeTrigger
from lowwater.core.windows.triggers.processing_time import ProcessingTimeTrigger
from lowwater.core.windows.window import TimeWindow, window_start_with_offset

__all__ = ["TumblingEventTimeWindows", "TumblingProcessingTimeWindows", "missing_timestamp_error"]


def missing_timestamp_error() -> ConfigurationError:
    return ConfigurationError(
        "timestamp",
        "record has no timestamp (Long.MIN_VALUE). Is the time characteristic set to "
        "processing time, or did you forget to call assign_timestamps_and_watermarks(...)?",
    )


def _validate(size: DurationLike, offset: DurationLike) -> tuple[int, int]:
    size_ms = to_millis(size, name="size")
    offset_ms = to_millis(offset, name="offset")
    if size_ms <= 0:
        raise ConfigurationError("size", f"window size must be > 0 ms, got {size_ms}")
    if abs(offset_ms) >= size_ms:
        raise ConfigurationError("offset", f"must satisfy abs(offset) < size ({size_ms} ms), got {offset_ms}")
    return size_ms, offset_ms


class TumblingEventTimeWindows(WindowAssigner[TimeWindow]):
    """Windows ``[N * size + offset, (N + 1) * size + offset)`` by event time.

    >>> TumblingEventTimeWindows.of("10 s").assign_windows(None, 12_345, None)
    [TimeWindow[10000, 20000)]
    """

    def __init__(self, size_ms: int, offset_ms: int = 0) -> None:
        self.size_ms, self.offset_ms = _validate(size_ms, offset_ms)

    @staticmethod
    def of(size: DurationLike, offset: DurationLike = 0) -> TumblingEventTimeWindows:
        return TumblingEventTimeWindows(*_validate(size, offset))

    def assign_windows(self, element: Any, timestamp: int, ctx: Any) -> list[TimeWindow]:
        if timestamp <= MIN_TIMESTAMP:
            raise missing_timestamp_error()
        start = window_start_with_offset(timestamp, self.offset_ms, self.size_ms)
        return [TimeWindow(start, start + self.size_ms)]

    def default_trigger(self) -> Trigger[Any]:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"TumblingEventTimeWindows({self.size_ms} ms, offset {self.offset_ms} ms)"


class TumblingProcessingTimeWindows(WindowAssigner[TimeWindow]):
    """Tumbling windows by the operator's processing-time clock."""

    def __init__(self, size_ms: int, offset_ms: int = 0) -> None:
        self.size_ms, self.offset_ms = _validate(size_ms, offset_ms)

    @staticmethod
    def of(size: DurationLike, offset: DurationLike = 0) -> TumblingProcessingTimeWindows:
        return TumblingProcessingTimeWindows(*_validate(size, offset))

    def assign_windows(self, element: Any, timestamp: int, ctx: WindowAssignerContext) -> list[TimeWindow]:
        now = ctx.current_processing_time()
        start = window_start_with_offset(now, self.offset_ms, self.size_ms)
        return [TimeWindow(start, start + self.size_ms)]

    def default_trigger(self) -> Trigger[Any]:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"TumblingProcessingTimeWindows({self.size_ms} ms, offset {self.offset_ms} ms)"
