"""Keys as one object per equal key: NaN and ``-0.0``, in memory and after a restore.

A float NaN is not equal to itself, so a Python dict finds a NaN key by identity alone: each
record's NaN was a key of its own (a window per record) until :func:`canonical_key` made every
NaN the one object :data:`NAN`. State restored from bytes (a keyed path's slice each batch, the
general path's operators after a restart) holds other NaN objects, which :data:`NAN` does not
find: :func:`canonicalize_operator` gives such keys back to it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

__all__ = ["NAN", "canonical_key", "canonicalize_operator", "has_nan_key"]

NAN = float("nan")
"""The one NaN every key's NaN becomes (:func:`canonical_key`)."""


def canonical_key(key: Any) -> Any:
    """``key`` as the one object every equal key is: a float NaN is :data:`NAN` (a NaN is not equal to
    itself, so each record's NaN was a key of its own in a Python dict, a window per record) and
    ``-0.0`` is ``0.0`` (one key, where it was one only when the keyed path's buckets put them
    together), in a tuple as well. Spark's grouping does the same to a key column (the native path),
    so every path groups alike; Flink's ``Double.equals`` makes NaN one key too, but ``-0.0`` and
    ``0.0`` two (docs/semantics.md)."""
    t = type(key)
    if t is float:
        return NAN if key != key else 0.0 if key == 0.0 else key
    if t is tuple and any(type(k) is float or type(k) is tuple for k in key):
        return tuple(canonical_key(k) for k in key)
    return key


def _holds_nan(x: Any, depth: int = 0) -> bool:
    if type(x) is float:
        return x != x
    if type(x) is tuple and depth < 4:
        return any(_holds_nan(e, depth + 1) for e in x)
    key = getattr(x, "key", None) if depth == 0 else None  # a Timer
    return key is not None and _holds_nan(key, 1)


def has_nan_key(snapshot: dict[str, Any]) -> bool:
    """Whether an operator's :meth:`snapshot` holds a NaN in a key: in a dict's keys, a set's or a
    list's items, a timer queue's timers (its ``_live`` set), or a state backend's ``entries``."""
    for v in snapshot.values():
        live, entries = getattr(v, "_live", None), getattr(v, "entries", None)
        items = v.keys() if isinstance(v, dict) else live if isinstance(live, set) else \
            entries.keys() if isinstance(entries, dict) else v if isinstance(v, set | list) else ()
        if any(_holds_nan(k) for k in items):
            return True
    return False


class _KeyedOperator(Protocol):
    def snapshot(self) -> dict[str, Any]: ...

    def take_key_slices(self) -> dict[Hashable, Any]: ...

    def put_key_slice(self, key: Hashable, data: Any) -> None: ...


def canonicalize_operator(op: _KeyedOperator) -> None:
    """Give the NaN keys of ``op``, restored from bytes, back to :data:`NAN`: its key slices taken
    and put back under :func:`canonical_key`, which joins the slices of one NaN key (each NaN object
    of a restored key is another key). An operator without a NaN key is left as it is: the round
    trip would register its timers again, in another order where timestamps tie."""
    if not has_nan_key(op.snapshot()):
        return
    for key, (data, _, _) in op.take_key_slices().items():
        op.put_key_slice(canonical_key(key), data)
