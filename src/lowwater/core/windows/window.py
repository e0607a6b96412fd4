"""Windows: ``TimeWindow [start, end)`` and the single ``GlobalWindow``."""

from __future__ import annotations

from dataclasses import dataclass

from lowwater.core.time import MAX_TIMESTAMP

__all__ = ["GlobalWindow", "TimeWindow", "Window", "window_start_with_offset"]


class Window:
    """A bucket of elements. ``max_timestamp()`` is the largest timestamp it holds."""

    def max_timestamp(self) -> int:
        raise NotImplementedError

    def __call__(self) -> Window:
        """The window itself: PyFlink's ``context.window()`` is a method, lowwater's
        ``context.window`` the window; both spellings work (the first failed at the first firing,
        "'TimeWindow' object is not callable")."""
        return self


@dataclass(frozen=True, order=True)
class TimeWindow(Window):
    """The interval ``[start, end)``; ``max_timestamp = end - 1``."""

    start: int
    end: int

    def max_timestamp(self) -> int:
        return self.end - 1

    def intersects(self, other: TimeWindow) -> bool:
        """True when the windows overlap or touch (``[0,5)`` and ``[5,9)`` do)."""
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        """The smallest window containing both."""
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    def __repr__(self) -> str:
        return f"TimeWindow[{self.start}, {self.end})"


@dataclass(frozen=True)
class GlobalWindow(Window):
    """The one window that holds everything; it never ends."""

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP

    def __repr__(self) -> str:
        return "GlobalWindow"


def window_start_with_offset(timestamp: int, offset: int, size: int) -> int:
    """The start of the window of ``size`` containing ``timestamp``.

    ``start = ts - ((ts - offset) mod size)`` with a floor modulo, so negative
    timestamps land in ``[N * size + offset, (N + 1) * size + offset)`` too.

    >>> window_start_with_offset(-1, 0, 10)
    -10
    >>> window_start_with_offset(17, 3, 10)
    13
    """
    return timestamp - ((timestamp - offset) % size)
