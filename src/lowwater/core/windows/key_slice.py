"""One key's slice of a keyed operator's state, as plain data.

Keys never interact inside a keyed operator (a :class:`~lowwater.core.windows.WindowOperator`
or a :class:`~lowwater.core.process.KeyedProcessOperator`), so a runtime may keep each
key's slice apart and run any subset of keys in a fresh operator: it puts the slices of the
keys it runs into the operator (``put_key_slice``), runs it, and takes every key's slice
out again (``take_key_slices``). The Spark keyed path stores the slices per key.

A slice has every field below, for both operators (the ones an operator does not use stay
empty); pairs are tuples, in the operator's own iteration order.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypedDict

from lowwater.core.time import MAX_TIMESTAMP
from lowwater.core.windows.timers import Timer, TimerQueue
from lowwater.core.windows.window import Window

__all__ = ["KeySlice", "KeySlices", "new_key_slice", "put_timers", "take_timers"]


class KeySlice(TypedDict):
    key: Hashable
    windows: list[tuple[Window, Any]]
    """Each window's contents (window operator)."""
    triggers: list[tuple[Window, dict[str, Any]]]
    """Each window's non-empty trigger state (window operator)."""
    fires: list[tuple[Window, int]]
    """How often each window fired (window operator)."""
    merging: list[tuple[Window, Window]] | None
    """The merged session windows: window -> its state window; ``None`` when none (window operator)."""
    event_timers: list[tuple[int, Window | None]]
    processing_timers: list[tuple[int, Window | None]]
    state: list[tuple[str, Any]]
    """The named keyed state (keyed process operator)."""


KeySlices = dict[Hashable, tuple[KeySlice, int, int]]
"""Every key's slice, with its next event-time and processing-time timer (``MAX`` when none)."""


def new_key_slice(key: Hashable) -> KeySlice:
    return {"key": key, "windows": [], "triggers": [], "fires": [], "merging": None,
            "event_timers": [], "processing_timers": [], "state": []}


def put_timers(key: Hashable, data: KeySlice, event_timers: TimerQueue, processing_timers: TimerQueue) -> None:
    """Register the slice's timers for ``key``."""
    for ts, w in data["event_timers"]:
        event_timers.register(Timer(ts, key, w))
    for ts, w in data["processing_timers"]:
        processing_timers.register(Timer(ts, key, w))


def take_timers(slices: dict[Hashable, KeySlice], slot: Callable[[Hashable], KeySlice],
                event_timers: TimerQueue, processing_timers: TimerQueue) -> KeySlices:
    """Move every timer into its key's slice (``slot`` gives it, new if need be); the queues
    are left empty. Returns every slice with its key's next timers."""
    nexts: dict[Hashable, list[int]] = {}
    for t in event_timers.timers():
        slot(t.key)["event_timers"].append((t.timestamp, t.window))
        due = nexts.setdefault(t.key, [MAX_TIMESTAMP, MAX_TIMESTAMP])
        due[0] = min(due[0], t.timestamp)
    for t in processing_timers.timers():
        slot(t.key)["processing_timers"].append((t.timestamp, t.window))
        due = nexts.setdefault(t.key, [MAX_TIMESTAMP, MAX_TIMESTAMP])
        due[1] = min(due[1], t.timestamp)
    for queue in (event_timers, processing_timers):
        for t in queue.timers():
            queue.delete(t)
    out: KeySlices = {}
    for k, s in slices.items():
        next_event, next_processing = nexts.get(k, [MAX_TIMESTAMP, MAX_TIMESTAMP])
        out[k] = (s, next_event, next_processing)
    return out
