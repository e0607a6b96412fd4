"""The global window assigner: one window for everything, fired only by a custom trigger."""

from __future__ import annotations

from typing import Any

from lowwater.core.windows.assigner import WindowAssigner
from lowwater.core.windows.trigger import Trigger
from lowwater.core.windows.triggers.never import NeverTrigger
from lowwater.core.windows.window import GlobalWindow

__all__ = ["GlobalWindows"]

_THE_WINDOW = GlobalWindow()


class GlobalWindows(WindowAssigner[GlobalWindow]):
    """All elements of a key in one :class:`GlobalWindow`; the default trigger never fires."""

    @staticmethod
    def create() -> GlobalWindows:
        return GlobalWindows()

    def assign_windows(self, element: Any, timestamp: int, ctx: Any) -> list[GlobalWindow]:
        return [_THE_WINDOW]

    def default_trigger(self) -> Trigger[Any]:
        return NeverTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "GlobalWindows()"
