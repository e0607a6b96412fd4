"""Window functions: reduce, aggregate and process (with a context)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from lowwater.core.errors import ConfigurationError
from lowwater.core.windows.window import Window

__all__ = [
    "AggregateFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "WindowContext",
    "WindowRuntimeContext",
    "open_once",
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

    def open(self, runtime_context: WindowRuntimeContext) -> None:
        """PyFlink's ``Function.open``: called once before the operator's first firing (or clean-up)
        in each process that runs it (a restart, and on Spark's keyed path each task, opens it
        again), with the operator's runtime context. Until session 58 it was never called, so
        what it set up was missing at the first firing (a user probe)."""

    def close(self) -> None:
        """PyFlink's ``Function.close``. lowwater does not call it: a micro-batch job's operators
        have no last moment (a run stops, the next one resumes from the checkpoint, and on the
        keyed path a task ends every batch), so hold nothing here that needs closing."""


class WindowRuntimeContext:
    """What a :class:`ProcessWindowFunction`'s ``open`` receives. It has no keyed state (PyFlink's
    ``get_state`` from a window function's runtime context): ask for it and you are told so, where
    a value kept in memory would be lost at the next batch or restart."""

    def __init__(self, name: str) -> None:
        self._name = name

    def get_task_name(self) -> str:
        return self._name

    def get_state(self, descriptor: Any) -> Any:
        raise ConfigurationError(
            "runtime_context", f"a ProcessWindowFunction has no keyed state in lowwater (asked for "
            f"{getattr(descriptor, 'name', descriptor)!r}): keep what a window needs in its contents "
            "(an aggregate or reduce before the function), or use a KeyedProcessFunction with timers")

    get_list_state = get_map_state = get_reducing_state = get_aggregating_state = get_state


def open_once(operator: Any, function: Any) -> None:
    """Open ``operator``'s window ``function`` (a :class:`ProcessWindowFunction`) before its first
    use by that operator; an operator built in another process (a restart, a task) opens it again."""
    if isinstance(function, ProcessWindowFunction) and not getattr(operator, "_function_opened", False):
        operator._function_opened = True
        function.open(WindowRuntimeContext("window operator"))  # the same on every path
