"""One key's slice of a :class:`~lowwater.core.windows.WindowOperator`, out and back in.

The keyed path runs a window operator per Spark task over the keys of one bucket. Before
the batch, each visited key's slice (its windows' contents, trigger state, fire counts,
merged session windows and timers) is put into a fresh operator; after it, each key's
slice is taken out again and stored, sealed, under the checkpoint. Keys never interact
inside a window operator, so running them one bucket at a time is the same as running
them all in one operator.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from lowwater.core.time import MAX_TIMESTAMP
from lowwater.core.windows import WindowOperator
from lowwater.core.windows.merging import MergingWindowSet
from lowwater.core.windows.timers import Timer

__all__ = ["key_bytes", "put_slice", "take_slices"]


def key_bytes(key: Hashable) -> str:
    """A text that is equal for equal keys, across processes (Spark groups and joins on it)."""
    if isinstance(key, bool):
        return f"b:{key}"
    if isinstance(key, int):
        return f"i:{key}"
    if isinstance(key, str):
        return f"s:{key}"
    return f"r:{type(key).__qualname__}:{key!r}"


def put_slice(op: Any, key: Hashable, data: dict[str, Any]) -> None:
    """Load one key's slice (from :func:`take_slices`) into ``op`` (a window or keyed process operator)."""
    if not isinstance(op, WindowOperator):
        entries = op.state.entries
        for name, v in data["state"]:
            entries[(name, key)] = v
        for ts, _ in data["event_timers"]:
            op.event_timers.register(Timer(ts, key, None))
        for ts, _ in data["processing_timers"]:
            op.processing_timers.register(Timer(ts, key, None))
        return
    for w, v in data["windows"]:
        op.window_state[(key, w)] = v
    for w, v in data["triggers"]:
        op.trigger_state[(key, w)] = v
    for w, n in data["fires"]:
        op.fire_counts[(key, w)] = n
    if data["merging"] is not None:
        op.merging_sets[key] = MergingWindowSet(op.assigner, dict(data["merging"]))  # type: ignore[arg-type]
    for ts, w in data["event_timers"]:
        op.event_timers.register(Timer(ts, key, w))
    for ts, w in data["processing_timers"]:
        op.processing_timers.register(Timer(ts, key, w))


def take_slices(op: Any) -> dict[Hashable, tuple[dict[str, Any], int, int]]:
    """Every key's slice of ``op`` (a window or keyed process operator), with its next event-time
    and processing-time timer (``MAX`` when none); the operator is left empty."""
    out: dict[Hashable, dict[str, Any]] = {}

    def slot(key: Hashable) -> dict[str, Any]:
        s = out.get(key)
        if s is None:
            s = out[key] = {"key": key, "windows": [], "triggers": [], "fires": [], "merging": None,
                            "event_timers": [], "processing_timers": [], "state": []}
        return s

    if not isinstance(op, WindowOperator):  # a keyed process function: its named state per key
        for (name, key), v in op.state.entries.items():
            slot(key)["state"].append((name, v))
        op.state.entries.clear()
        return _with_timers(op, out, slot)
    for (key, w), v in op.window_state.items():
        slot(key)["windows"].append((w, v))
    for (key, w), v in op.trigger_state.items():
        if v:
            slot(key)["triggers"].append((w, v))
    for (key, w), n in op.fire_counts.items():
        slot(key)["fires"].append((w, n))
    for key, mset in op.merging_sets.items():
        if mset.mapping:
            slot(key)["merging"] = list(mset.mapping.items())
    op.window_state.clear()
    op.trigger_state.clear()
    op.fire_counts.clear()
    op.merging_sets.clear()
    return _with_timers(op, out, slot)


def _with_timers(op: Any, out: dict[Hashable, dict[str, Any]],
                 slot: Any) -> dict[Hashable, tuple[dict[str, Any], int, int]]:
    nexts: dict[Hashable, list[int]] = {}
    for t in op.event_timers.timers():
        slot(t.key)["event_timers"].append((t.timestamp, t.window))
        due = nexts.setdefault(t.key, [MAX_TIMESTAMP, MAX_TIMESTAMP])
        due[0] = min(due[0], t.timestamp)
    for t in op.processing_timers.timers():
        slot(t.key)["processing_timers"].append((t.timestamp, t.window))
        due = nexts.setdefault(t.key, [MAX_TIMESTAMP, MAX_TIMESTAMP])
        due[1] = min(due[1], t.timestamp)
    for queue in (op.event_timers, op.processing_timers):
        for t in queue.timers():
            queue.delete(t)
    return {k: (s, *nexts.get(k, [MAX_TIMESTAMP, MAX_TIMESTAMP])) for k, s in out.items()}  # type: ignore[misc]
