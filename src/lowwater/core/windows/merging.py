"""Tracks merging windows and the state window each maps to (Flink's ``MergingWindowSet``)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Generic, TypeVar

from lowwater.core.windows.assigner import MergingWindowAssigner
from lowwater.core.windows.window import Window

__all__ = ["MergeFunction", "MergingWindowSet"]

W = TypeVar("W", bound=Window)

MergeFunction = Callable[[Any, Collection[Any], Any, Collection[Any]], None]
"""``merge(merge_result, merged_windows, state_window_result, merged_state_windows)``."""


class MergingWindowSet(Generic[W]):
    """In-flight windows of one key, each mapped to the window its state is stored under.

    Merging never moves state: the merge result takes over one of the merged windows'
    state windows and the others' state is merged into it.
    """

    def __init__(self, assigner: MergingWindowAssigner[W], mapping: dict[W, W] | None = None) -> None:
        self.assigner = assigner
        self.mapping: dict[W, W] = dict(mapping or {})

    def get_state_window(self, window: W) -> W | None:
        return self.mapping.get(window)

    def retire_window(self, window: W) -> None:
        if self.mapping.pop(window, None) is None:
            raise KeyError(f"Window {window!r} is not in in-flight window set.")

    def add_window(self, new_window: W, merge_function: MergeFunction) -> W:
        """Add ``new_window``, merging as the assigner says; returns the window it ended up in."""
        windows = [*self.mapping.keys(), new_window]
        merge_results: list[tuple[W, set[W]]] = []
        self.assigner.merge_windows(windows, lambda to_merge, result: merge_results.append((result, set(to_merge))))

        result_window = new_window
        merged_new_window = False
        for merge_result, merged_windows in merge_results:
            if new_window in merged_windows:
                merged_windows.discard(new_window)
                merged_new_window = True
                result_window = merge_result
            # the merge result takes over the state window of (the earliest) merged window
            first = min(merged_windows, key=_order)
            merged_state_window = self.mapping[first]
            merged_state_windows = []
            for w in sorted(merged_windows, key=_order):
                res = self.mapping.pop(w, None)
                if res is not None:
                    merged_state_windows.append(res)
            self.mapping[merge_result] = merged_state_window
            merged_state_windows.remove(merged_state_window)
            # the new window alone, inside one existing window, is no real merge
            if not (merge_result in merged_windows and len(merged_windows) == 1):
                merge_function(merge_result, merged_windows, merged_state_window, merged_state_windows)

        if not merge_results or (result_window == new_window and not merged_new_window):
            self.mapping[result_window] = result_window
        return result_window


def _order(w: Any) -> Any:
    return (getattr(w, "start", 0), getattr(w, "end", 0))
