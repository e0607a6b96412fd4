"""The window assigner interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from lowwater.core.windows.window import Window

if TYPE_CHECKING:
    from lowwater.core.windows.trigger import Trigger

__all__ = ["MergingWindowAssigner", "WindowAssigner", "WindowAssignerContext"]

W = TypeVar("W", bound=Window)


class WindowAssignerContext(Protocol):
    def current_processing_time(self) -> int: ...


class WindowAssigner(ABC, Generic[W]):
    """Assigns each element zero or more windows."""

    @abstractmethod
    def assign_windows(self, element: Any, timestamp: int, ctx: WindowAssignerContext) -> Sequence[W]:
        ...

    @abstractmethod
    def default_trigger(self) -> Trigger[Any]:
        ...

    @abstractmethod
    def is_event_time(self) -> bool:
        ...


class MergingWindowAssigner(WindowAssigner[W]):
    """An assigner whose windows merge (sessions)."""

    @abstractmethod
    def merge_windows(
        self, windows: Collection[W], callback: Callable[[Collection[W], W], None]
    ) -> None:
        """Call ``callback(to_be_merged, merge_result)`` for each group of windows to merge."""
