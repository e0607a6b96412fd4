"""How a window's elements are kept until it fires: aggregated, reduced, or listed."""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import Any

from lowwater.core.windows.functions import AggregateFunction, ReduceFunction

__all__ = ["AggregatingContents", "ListContents", "ReducingContents", "WindowContents"]


class WindowContents(ABC):
    """The window's state: ``add`` an element, ``merge`` states, ``inputs`` for the function."""

    @abstractmethod
    def add(self, state: Any, element: Any, is_new: bool) -> Any: ...

    @abstractmethod
    def merge(self, a: Any, b: Any) -> Any: ...

    @abstractmethod
    def inputs(self, state: Any) -> list[Any]:
        """What the window function receives when the window fires."""

    def size(self, state: Any) -> int | None:
        return None

    may_reject = True
    """Whether ``add`` may raise :class:`~lowwater.core.errors.BadRecordError` (a user's function
    rejecting the element, which may depend on the state), so an element's adds to several
    windows are undone when one raises."""

    def snapshot(self, state: Any) -> Any:
        """What :meth:`restore` needs to undo the ``add`` calls after it (an element one of whose
        windows rejects it reaches none: :meth:`WindowOperator.process_element`). A copy of the
        state by default, which an ``add`` that changes its argument in place leaves alone."""
        return copy.deepcopy(state)

    def restore(self, state: Any, snapshot: Any) -> Any:
        """The state as it was at :meth:`snapshot` (``state`` is the one ``add`` returned since)."""
        return snapshot


class AggregatingContents(WindowContents):
    """Keeps one accumulator; the window function receives ``[get_result(acc)]``."""

    def __init__(self, function: AggregateFunction[Any, Any, Any]) -> None:
        from lowwater.core.windows.aggregations import BuiltinAggregate

        self.function = function
        self.may_reject = not isinstance(function, BuiltinAggregate)  # a built-in's check comes before any window

    def add(self, state: Any, element: Any, is_new: bool) -> Any:
        acc = self.function.create_accumulator() if is_new else state
        return self.function.add(element, acc)

    def merge(self, a: Any, b: Any) -> Any:
        return self.function.merge(a, b)

    def inputs(self, state: Any) -> list[Any]:
        return [self.function.get_result(state)]


class ReducingContents(WindowContents):
    """Keeps one reduced element; the window function receives ``[reduced]``."""

    def __init__(self, function: ReduceFunction) -> None:
        self.function = function

    def add(self, state: Any, element: Any, is_new: bool) -> Any:
        return element if is_new else self.function(state, element)

    def merge(self, a: Any, b: Any) -> Any:
        return self.function(a, b)

    def inputs(self, state: Any) -> list[Any]:
        return [state]


class ListContents(WindowContents):
    """Keeps every element in arrival order; the window function receives them all."""

    may_reject = False  # an append

    def add(self, state: Any, element: Any, is_new: bool) -> Any:
        if is_new:
            return [element]
        state.append(element)
        return state

    def merge(self, a: Any, b: Any) -> Any:
        return [*a, *b]

    def snapshot(self, state: Any) -> Any:
        return len(state)  # an add appends: undone by cutting the list back, not by copying it

    def restore(self, state: Any, snapshot: Any) -> Any:
        del state[snapshot:]
        return state

    def inputs(self, state: Any) -> list[Any]:
        return list(state)

    def size(self, state: Any) -> int | None:
        return len(state)
