"""Session windows: ``[ts, ts + gap)`` per element, merged when they overlap or touch."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from lowwater.core.errors import ConfigurationError
from lowwater.core.time import DurationLike, to_millis
from lowwater.core.windows.assigner import MergingWindowAssigner, WindowAssignerContext
from lowwater.core.windows.trigger import Trigger
from lowwater.core.windows.triggers.event_time import EventTimeTrigger
from lowwater.core.windows.triggers.processing_time import ProcessingTimeTrigger
from lowwater.core.windows.window import TimeWindow

__all__ = ["EventTimeSessionWindows", "ProcessingTimeSessionWindows", "merge_time_windows"]


def merge_time_windows(
    windows: Collection[TimeWindow], callback: Callable[[Collection[TimeWindow], TimeWindow], None]
) -> None:
    """Sort by start, sweep, and report every group of two or more intersecting windows."""
    groups: list[tuple[TimeWindow, set[TimeWindow]]] = []
    for candidate in sorted(windows, key=lambda w: w.start):
        if groups and groups[-1][0].intersects(candidate):
            cover, members = groups[-1]
            groups[-1] = (cover.cover(candidate), members | {candidate})
        else:
            groups.append((candidate, {candidate}))
    for cover, members in groups:
        if len(members) > 1:
            callback(members, cover)


def _gap(gap: DurationLike) -> int:
    gap_ms = to_millis(gap, name="gap")
    if gap_ms <= 0:
        raise ConfigurationError("gap", f"session gap must be > 0 ms, got {gap_ms}")
    return gap_ms


class EventTimeSessionWindows(MergingWindowAssigner[TimeWindow]):
    """Each element opens ``[ts, ts + gap)``; overlapping or touching sessions merge."""

    def __init__(self, gap_ms: int) -> None:
        self.gap_ms = _gap(gap_ms)

    @staticmethod
    def with_gap(gap: DurationLike) -> EventTimeSessionWindows:
        return EventTimeSessionWindows(_gap(gap))

    def assign_windows(self, element: Any, timestamp: int, ctx: Any) -> list[TimeWindow]:
        return [TimeWindow(timestamp, timestamp + self.gap_ms)]

    def merge_windows(
        self, windows: Collection[TimeWindow], callback: Callable[[Collection[TimeWindow], TimeWindow], None]
    ) -> None:
        merge_time_windows(windows, callback)

    def default_trigger(self) -> Trigger[Any]:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"EventTimeSessionWindows(gap {self.gap_ms} ms)"


class ProcessingTimeSessionWindows(MergingWindowAssigner[TimeWindow]):
    """Sessions by the operator's processing-time clock."""

    def __init__(self, gap_ms: int) -> None:
        self.gap_ms = _gap(gap_ms)

    @staticmethod
    def with_gap(gap: DurationLike) -> ProcessingTimeSessionWindows:
        return ProcessingTimeSessionWindows(_gap(gap))

    def assign_windows(self, element: Any, timestamp: int, ctx: WindowAssignerContext) -> list[TimeWindow]:
        now = ctx.current_processing_time()
        return [TimeWindow(now, now + self.gap_ms)]

    def merge_windows(
        self, windows: Collection[TimeWindow], callback: Callable[[Collection[TimeWindow], TimeWindow], None]
    ) -> None:
        merge_time_windows(windows, callback)

    def default_trigger(self) -> Trigger[Any]:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"ProcessingTimeSessionWindows(gap {self.gap_ms} ms)"
