"""Window functions: reduce, aggregate and process (with a context)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from lowwater.core.windows.window import Window

__all__ = [
    "AggregateFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "WindowContext",
]

IN = TypeVar("IN")
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")

ReduceFunction = Callable[[Any, Any], Any]
"""``reduce(a, b) -> c``: combines two elements of a window into one of the same type."""


class AggregateFunction(ABC, Generic[IN, ACC, OUT]):
    """Incremental aggregation: ``create_accumulator / add / merge / get_result``.

    ``add`` may update the accumulator in place and return it.
    """

    @abstractmethod
    def create_accumulator(self) -> ACC: ...

    @abstractmethod
    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    @abstractmethod
    def get_result(self, accumulator: ACC) -> OUT: ...

    @abstractmethod
    def merge(self, a: ACC, b: ACC) -> ACC: ...


class WindowContext(Protocol):
    """What a :class:`ProcessWindowFunction` sees when a window fires."""

    @property
    def window(self) -> Window: ...

    def current_watermark(self) -> int: ...

    def current_processing_time(self) -> int: ...

    def output(self, tag: Any, value: Any) -> None:
        """Emit ``value`` to the side output ``tag``."""


class ProcessWindowFunction(ABC, Generic[IN, OUT]):
    """Sees every element of a firing window (or the single pre-aggregated result).

    ``process`` returns (or yields) the outputs.
    """

    @abstractmethod
    def process(self, key: Any, context: WindowContext, elements: Iterable[IN]) -> Iterable[OUT]: ...

    def clear(self, context: WindowContext) -> None:
        """Called when the window's state is cleaned up."""
