"""What the window operator produces: typed events, never calls to sinks."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from lowwater.core.windows.window import Window

__all__ = ["RESULT_FIELDS", "FireCause", "LateElement", "SideOutput", "WindowFired", "WindowResult"]

FireCause = Literal["watermark", "element", "processing_time", "end_of_input"]


@dataclass(frozen=True)
class WindowResult:
    """The default output of ``aggregate`` and ``reduce``: one row per firing."""

    key: Any
    window_start: int
    window_end: int
    value: Any
    fire_index: int = 0


RESULT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(WindowResult))
"""A window result's fields, in order: the columns of the results on every path."""


@dataclass(frozen=True)
class WindowFired:
    """A window fired. ``outputs`` are what the window function emitted."""

    key: Hashable
    window: Window
    outputs: tuple[Any, ...]
    fire_index: int
    watermark: int
    cause: FireCause
    element_count: int | None = None


@dataclass(frozen=True)
class LateElement:
    """An element late for all of its windows (``max_ts + allowed_lateness <= watermark``)."""

    key: Hashable
    element: Any
    timestamp: int
    watermark: int
    windows: tuple[Window, ...] = ()
    """The windows that rejected it: those it was assigned (after merging, for merging windows)."""


@dataclass(frozen=True)
class SideOutput:
    """A value a process function sent to a side output."""

    tag: Any
    value: Any = field(default=None)
