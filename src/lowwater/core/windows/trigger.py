"""Triggers decide when a window fires (Flink's ``Trigger`` and ``TriggerResult``)."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from lowwater.core.windows.window import Window

__all__ = [
    "OnMergeContext",
    "ReducingState",
    "ReducingStateDescriptor",
    "Trigger",
    "TriggerContext",
    "TriggerResult",
]

W = TypeVar("W", bound=Window)
V = TypeVar("V")


class TriggerResult(enum.Enum):
    """What a trigger asks of the window operator."""

    CONTINUE = (False, False)
    FIRE = (True, False)
    PURGE = (False, True)
    FIRE_AND_PURGE = (True, True)

    @property
    def is_fire(self) -> bool:
        return self.value[0]

    @property
    def is_purge(self) -> bool:
        return self.value[1]


@dataclass(frozen=True)
class ReducingStateDescriptor(Generic[V]):
    """Names a per-(key, window) trigger state that folds values with ``reduce``."""

    name: str
    reduce: Callable[[V, V], V]


class ReducingState(Protocol[V]):
    def get(self) -> V | None: ...

    def add(self, value: V) -> None: ...

    def clear(self) -> None: ...


class TriggerContext(Protocol):
    """What a trigger may do for the current key and window."""

    def current_processing_time(self) -> int: ...

    def current_watermark(self) -> int: ...

    def register_event_time_timer(self, time: int) -> None: ...

    def register_processing_time_timer(self, time: int) -> None: ...

    def delete_event_time_timer(self, time: int) -> None: ...

    def delete_processing_time_timer(self, time: int) -> None: ...

    def get_current_processing_time(self) -> int:
        """PyFlink's name for :meth:`current_processing_time`."""

    def get_current_watermark(self) -> int:
        """PyFlink's name for :meth:`current_watermark`."""

    def get_partitioned_state(self, descriptor: Any) -> Any:
        """The state for this key and window: a :class:`ReducingState` for a
        :class:`ReducingStateDescriptor`, PyFlink's ``ValueState`` (``value``, ``update``,
        ``clear``) for a ``ValueStateDescriptor``, its ``ListState`` (``get``, ``add``, ``add_all``,
        ``update``, ``clear``) for a ``ListStateDescriptor``. Only reducing state merges
        (:meth:`OnMergeContext.merge_partitioned_state`)."""


class OnMergeContext(TriggerContext, Protocol):
    def merge_partitioned_state(self, descriptor: ReducingStateDescriptor[Any]) -> None: ...


class Trigger(ABC, Generic[W]):
    """Decides, per key and window, when to fire and when to purge.

    Subclass it for a user-defined trigger. A trigger keeps its state through the
    context (timers, and reducing, value or list state), never on ``self``.
    """

    @abstractmethod
    def on_element(self, element: Any, timestamp: int, window: W, ctx: TriggerContext) -> TriggerResult:
        ...

    @abstractmethod
    def on_processing_time(self, time: int, window: W, ctx: TriggerContext) -> TriggerResult:
        ...

    @abstractmethod
    def on_event_time(self, time: int, window: W, ctx: TriggerContext) -> TriggerResult:
        ...

    def can_merge(self) -> bool:
        return False

    def on_merge(self, window: W, ctx: OnMergeContext) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support merging windows")

    @abstractmethod
    def clear(self, window: W, ctx: TriggerContext) -> None:
        ...
