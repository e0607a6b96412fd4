"""Event-time sessions with a built-in aggregate, in columns: the keyed path's stage B without a
Python step per element.

The keyed path runs every other window through the reference operator one element at a time
(:mod:`.keyed`, step 3). For the commonest session job, event-time session windows with the
event-time trigger and ``sum``, ``count``, ``min`` or ``max`` of an integer field, the result of
a batch does not depend on the order of its elements, as long as none of them is late:

* an element that is not late opens ``[ts, ts + gap)``, and the sessions of a key after the batch
  are the connected components (touching counts) of its stored sessions and those intervals,
  whatever the order they arrived in (a merge keeps every window disjoint from the others, and
  the cover of windows that touch is their union);
* with ``ts + gap - 1 > W_{k-1}`` for every element, no session an element joins can fire at once
  or be late (its end only grows), so the element phase emits nothing;
* the aggregates are exact and order-free on 64-bit integers (a sum wraps as Java's ``long``
  does, and addition modulo 2**64 is associative); counts, minimums and maximums are too.

So :meth:`ColumnarSessions.run` merges a bucket's sessions with numpy, fires them against the
batch's watermark steps, and writes each key's sessions as one row of four integers per session.
A key that does not qualify this batch (an element that is late or would fire at once, a null
value, a timestamp too close to the ends of the 64-bit range, a key that is neither a string nor
an integer, or state the reference operator wrote that the four integers cannot describe) runs
through the reference operator as before; keys never interact, so each key's result is the
reference's. The two forms of a key's state convert into each other (:func:`to_slice`,
:func:`from_slice`).

What the columns do not keep is the name of a merged session's *state window*: the reference
operator keeps the contents of a merged session under the state window of the earliest of the
sessions it merged, in arrival order; here every session is its own state window. It is an
internal name (Flink's ``MergingWindowSet`` keeps one too) that no output, timer or count depends
on.

A key's sessions are stored as ``MAGIC``, then little-endian ``int64`` rows ``(start, end,
accumulator, fires)``. They are integers only and nothing in them is unpickled, so, like the
native path's window state, they are not sealed (:mod:`.sealed` guards what would be unpickled).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.windows.aggregations import Count, Max, Min, Sum
from lowwater.core.windows.contents import AggregatingContents
from lowwater.core.windows.events import WindowResult
from lowwater.core.windows.key_slice import KeySlice, new_key_slice
from lowwater.core.windows.session import EventTimeSessionWindows
from lowwater.core.windows.triggers.event_time import EventTimeTrigger
from lowwater.core.windows.window import TimeWindow
from lowwater.spark.sealed import CheckpointIntegrityError

if TYPE_CHECKING:
    from lowwater.graph.transformations import WindowTransformation

__all__ = ["MAGIC", "RESULT", "ColumnarSessions", "from_slice", "is_sessions", "key_of", "result_value", "results_json",
           "results_shapes", "rows_blob", "rows_of", "to_slice"]

MAGIC = b"LWSESS1\n"
RESULT = b"LWRES1\n"
"""Before a pickled tuple of :class:`WindowResult`'s fields, in a result row (faster both ways
than pickling the dataclass): :func:`result_value` reads either."""
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_AGGREGATES: dict[type, str] = {Sum: "sum", Count: "count", Min: "min", Max: "max"}


def is_sessions(blob: bytes | None) -> bool:
    return blob is not None and blob[:len(MAGIC)] == MAGIC


def _payload(blob: bytes, what: str) -> bytes:
    payload = blob[len(MAGIC):]
    if len(payload) % 32:
        raise CheckpointIntegrityError(f"{what} is {len(blob)} bytes, not {len(MAGIC)} and rows of 32: it was "
                                       "cut short or changed after lowwater wrote it. Nothing in it was loaded")
    return payload


def result_value(blob: bytes) -> Any:
    """A result row's value: a window result's fields after :data:`RESULT`, or any pickled value."""
    if blob[:len(RESULT)] == RESULT:
        return WindowResult(*pickle.loads(blob[len(RESULT):]))
    return pickle.loads(blob)


def results_json(args: list[tuple[Any, int, int, int, int]]) -> list[str]:
    """Window results' fields as the JSON objects a DataFrame sink reads, exactly as
    :func:`~lowwater.spark.json_rows.to_json` writes a :class:`WindowResult` (integer fields)."""
    import json

    dumps = json.dumps
    return [f'{{"key": {dumps(k)}, "window_start": {a}, "window_end": {b}, "value": {v}, "fire_index": {f}}}'
            for k, a, b, v, f in args]


def results_shapes(args: list[tuple[Any, int, int, int, int]]) -> list[str]:
    """The shapes (:func:`~lowwater.spark.json_rows.shape`) of :func:`results_json`'s objects: one
    result per kind of key and value stands for the rest (the other fields are ``long`` integers)."""
    from lowwater.spark.json_rows import document, shape

    one: dict[tuple[str, str], tuple[Any, int, int, int, int]] = {}
    for r in args:
        one.setdefault((shape(r[0]), shape(r[3])), r)
    return sorted({shape(document(WindowResult(*r))) for r in one.values()})


def key_of(kb: str) -> Any:
    """The key whose :func:`~lowwater.spark.keyed_state.key_bytes` is ``kb``, for strings and integers."""
    return kb[2:] if kb[0] == "s" else int(kb[2:])


def rows_of(blob: bytes, what: str) -> list[tuple[int, int, int, int]]:
    """A key's sessions as :meth:`ColumnarSessions.run` or :func:`rows_blob` stored them."""
    import numpy as np

    payload = _payload(blob, what)
    return [(a, b, c, d) for a, b, c, d in np.frombuffer(payload, dtype="<i8").reshape(-1, 4).tolist()]


def rows_blob(rows: list[tuple[int, int, int, int]]) -> bytes:
    """Sessions ``(start, end, accumulator, fires)`` as a key's stored state."""
    import numpy as np

    return MAGIC + np.array(rows, dtype="<i8").reshape(-1, 4).tobytes()


def to_slice(key: Any, rows: list[tuple[int, int, int, int]], watermark: int, lateness: int) -> KeySlice:
    """The reference operator's slice of a key whose sessions are ``rows`` (start, end, accumulator,
    fires) after watermark ``watermark``: every session its own state window, the timers its own."""
    s = new_key_slice(key)
    rows = sorted(rows)
    s["windows"] = [(TimeWindow(a, b), acc) for a, b, acc, _ in rows]
    s["fires"] = [(TimeWindow(a, b), f) for a, b, _, f in rows if f]
    s["merging"] = [(TimeWindow(a, b), TimeWindow(a, b)) for a, b, _, _ in rows]
    s["event_timers"] = [(ts, TimeWindow(a, b)) for ts, a, b in sorted(_timers(rows, watermark, lateness))]
    return s


def _timers(rows: list[tuple[int, int, int, int]], watermark: int, lateness: int) -> set[tuple[int, int, int]]:
    """``(ts, start, end)`` of the live timers of sessions ``rows`` at ``watermark``: the trigger's
    at ``end - 1`` until it fires, and the cleanup timer (none at ``MAX``)."""
    out = set()
    for a, b, _, _ in rows:
        if b - 1 > watermark:
            out.add((b - 1, a, b))
        cleanup = min(b - 1 + lateness, MAX_TIMESTAMP)
        if cleanup != MAX_TIMESTAMP:
            out.add((cleanup, a, b))
    return out


def from_slice(data: KeySlice, watermark: int, lateness: int) -> list[tuple[int, int, int, int]] | None:
    """The rows of a reference slice (see :func:`to_slice`), or ``None`` when they cannot describe it:
    trigger or processing-time state, contents that are not 64-bit integers, or timers other than
    the ones the rows imply."""
    if data["triggers"] or data["processing_timers"] or data["state"] or data["merging"] is None:
        return None
    states = {(w.start, w.end): v for w, v in data["windows"]}  # type: ignore[attr-defined]
    fires = {(w.start, w.end): n for w, n in data["fires"]}  # type: ignore[attr-defined]
    rows = []
    for w, sw in data["merging"]:
        acc = states.get((sw.start, sw.end))  # type: ignore[attr-defined]
        if type(acc) is not int or not _I64_MIN <= acc <= _I64_MAX:
            return None
        rows.append((w.start, w.end, acc, fires.get((w.start, w.end), 0)))  # type: ignore[attr-defined]
    if len(states) != len(rows) or any((a, b) not in {(r[0], r[1]) for r in rows} for a, b in fires):
        return None
    timers = {(ts, w.start, w.end) for ts, w in data["event_timers"]}  # type: ignore[union-attr]
    if timers != _timers(rows, watermark, lateness):
        return None
    return sorted(rows)


@dataclass(frozen=True)
class ColumnarSessions:
    """How one window transformation runs in columns (:meth:`of`)."""

    gap: int
    lateness: int
    aggregate: str
    """``sum``, ``count``, ``min`` or ``max``."""
    value_column: str | None
    """The elements' column with the aggregated field (``_f<j>``); ``None`` for ``count``."""

    @staticmethod
    def of(t: WindowTransformation, value_fields: tuple[str, ...] | None) -> ColumnarSessions | None:
        """The columnar form of ``t`` with the elements' fields ``value_fields`` (stage A in SQL), or
        ``None`` when ``t`` is not event-time sessions, the event-time trigger, no window function
        and a built-in sum, count, min or max of a field."""
        if type(t.assigner) is not EventTimeSessionWindows or t.window_function is not None:
            return None
        if t.trigger is not None and type(t.trigger) is not EventTimeTrigger:
            return None
        if type(t.contents) is not AggregatingContents:
            return None
        function = t.contents.function
        name = _AGGREGATES.get(type(function))
        if name is None:
            return None
        if name == "count":
            return ColumnarSessions(t.assigner.gap_ms, t.allowed_lateness_ms, name, None)
        field = getattr(function, "field", None)
        if value_fields is None or field is None or field not in value_fields:
            return None
        return ColumnarSessions(t.assigner.gap_ms, t.allowed_lateness_ms, name, f"_f{value_fields.index(field)}")

    def fast_keys(self, elements: Any, to_visit: Any, w_prev: int) -> tuple[Any, Any]:
        """Of the keys a bucket visits (``to_visit``: their newest stored rows; the keys of
        ``elements``), the ones this batch runs in columns, and the elements' mask of them."""
        import pyarrow as pa
        import pyarrow.compute as pc

        kb = elements["_kb"]
        ts = elements["_ts"]
        bad = pc.and_kleene(pc.invert(pc.starts_with(kb, "s:")), pc.invert(pc.starts_with(kb, "i:")))
        # late, firing at once, or too close to the ends of the 64-bit range for its window and cleanup
        lo = max(w_prev - self.gap + 1, MIN_TIMESTAMP + 1)
        hi = MAX_TIMESTAMP - self.gap - self.lateness - 1
        bad = pc.or_kleene(bad, pc.or_kleene(pc.less_equal(ts, lo), pc.greater(ts, hi)))
        if self.value_column is not None:
            values = elements[self.value_column]
            if not pa.types.is_integer(values.type) or values.type == pa.uint64():
                bad = pa.array([True] * elements.num_rows, pa.bool_())
            else:
                bad = pc.or_kleene(bad, pc.is_null(values))
        bad = pc.fill_null(bad, True)
        slow = pc.unique(kb.filter(bad))
        stored = to_visit["state"]
        slow_stored = to_visit["_kb"].filter(pc.invert(pc.fill_null(
            pc.equal(pc.binary_slice(stored, 0, len(MAGIC)), pa.scalar(MAGIC, pa.binary())), False)))
        slow = pc.unique(pa.concat_arrays([slow.cast(pa.string()), slow_stored.combine_chunks().cast(pa.string())])
                         if len(slow_stored) else slow.cast(pa.string()))
        all_keys = pc.unique(pa.concat_arrays([kb.combine_chunks().cast(pa.string()),
                                               to_visit["_kb"].combine_chunks().cast(pa.string())]))
        fast = all_keys.filter(pc.invert(pc.is_in(all_keys, value_set=slow)))
        return fast, pc.fill_null(pc.is_in(kb, value_set=fast), False)

    def run(self, fast: Any, elements: Any, to_visit: Any, w_prev: int, steps: list[int], batch_id: int,
            pickled: bool, as_json: bool, row_columns: tuple[tuple[str, str], ...]) -> tuple[Any, dict[str, Any]]:
        """The keys ``fast`` of one bucket, with their elements and newest stored rows: their
        results (each value's fields pickled if ``pickled``, as JSON if ``as_json``) and state rows,
        as a table of stage B's ``row_columns`` (name, Arrow type name), and the counters (with the
        results' JSON shapes, :func:`results_shapes`)."""
        import numpy as np
        import pandas as pd
        import pyarrow as pa
        import pyarrow.compute as pc

        fast_list = fast.to_pylist()
        # the stored sessions of the fast keys, (key index, start, end, acc, fires)
        mine = to_visit.filter(pc.is_in(to_visit["_kb"], value_set=fast))
        s_idx = pc.index_in(mine["_kb"], value_set=fast).to_numpy()
        payloads = [_payload(blob, f"the keyed state of {kb}")
                    for kb, blob in zip(mine["_kb"].to_pylist(), mine["state"].to_pylist(), strict=True)]
        counts = [len(p) // 32 for p in payloads]
        stored = np.frombuffer(b"".join(payloads), dtype="<i8").reshape(-1, 4)
        s_k = np.repeat(s_idx.astype(np.int64), counts)
        e_k = pc.index_in(elements["_kb"], value_set=fast).to_numpy().astype(np.int64)
        e_s = elements["_ts"].to_numpy().astype(np.int64)
        n_el = len(e_k)
        if self.value_column is None:
            e_a = np.ones(n_el, dtype=np.int64)
        else:
            e_a = elements[self.value_column].to_numpy().astype(np.int64)
        k = np.concatenate([s_k, e_k])
        st = np.concatenate([stored[:, 0], e_s])
        en = np.concatenate([stored[:, 1], e_s + self.gap])
        acc = np.concatenate([stored[:, 2], e_a])
        fires = np.concatenate([stored[:, 3], np.zeros(n_el, dtype=np.int64)])
        is_stored = np.concatenate([np.ones(len(s_k), dtype=np.int64), np.zeros(n_el, dtype=np.int64)])
        order = np.lexsort((st, k))
        k, st, en, acc, fires, is_stored = (a[order] for a in (k, st, en, acc, fires, is_stored))
        # components: a new one where the key changes or the start is past every end before it
        run_max = pd.Series(en).groupby(k).cummax().to_numpy()
        brk = np.ones(len(k), dtype=bool)
        brk[1:] = (k[1:] != k[:-1]) | (st[1:] > run_max[:-1])
        first = np.flatnonzero(brk)
        c_k, c_s = k[first], st[first]
        c_e = np.maximum.reduceat(en, first)
        if self.aggregate in ("sum", "count"):
            with np.errstate(over="ignore"):
                c_acc = np.add.reduceat(acc, first)  # wraps as Java's long
        elif self.aggregate == "min":
            c_acc = np.minimum.reduceat(acc, first)
        else:
            c_acc = np.maximum.reduceat(acc, first)
        n_stored = np.add.reduceat(is_stored, first)
        big = np.iinfo(np.int64)
        s_start = np.minimum.reduceat(np.where(is_stored == 1, st, big.max), first)
        s_end = np.maximum.reduceat(np.where(is_stored == 1, en, big.min), first)
        unchanged = (n_stored == 1) & (s_start == c_s) & (s_end == c_e)  # one stored session, no merge
        c_f = np.where(unchanged, np.add.reduceat(fires, first), 0)
        # the watermark steps: each session fires at the first step past its end - 1 (if it has not)
        eff: list[int] = []
        for w in steps:
            if w > (eff[-1] if eff else w_prev):
                eff.append(w)
        w_last = eff[-1] if eff else w_prev
        fire_ts = c_e - 1
        fire_at = np.searchsorted(np.array(eff, dtype=np.int64), fire_ts, side="left")
        fires_now = (fire_ts > w_prev) & (fire_at < len(eff))
        cleanup = np.minimum(fire_ts, MAX_TIMESTAMP - self.lateness) + self.lateness
        removed = (cleanup != MAX_TIMESTAMP) & (cleanup <= w_last)
        # the results, by step, then time, then key
        fired = np.flatnonzero(fires_now)
        fired = fired[np.lexsort((c_k[fired], fire_ts[fired], fire_at[fired]))]
        args = [(key_of(fast_list[kk]), a, b, v, f) for kk, a, b, v, f in zip(
            c_k[fired].tolist(), c_s[fired].tolist(), c_e[fired].tolist(), c_acc[fired].tolist(),
            c_f[fired].tolist(), strict=True)]
        n_res = len(args)
        # the sessions left, per key: one state row each (a tombstone if none is left)
        c_f = c_f + fires_now
        keep = ~removed
        rows = np.stack([c_s, c_e, c_acc, c_f], axis=1)[keep]
        r_k = c_k[keep]
        r_clean = cleanup[keep]
        next_event = np.minimum(np.where(rows[:, 1] - 1 > w_last, rows[:, 1] - 1, MAX_TIMESTAMP), r_clean)
        bounds = np.searchsorted(r_k, np.arange(len(fast_list) + 1))
        data = rows.astype("<i8").tobytes()
        lo, hi = bounds[:-1], bounds[1:]
        live = hi > lo
        blobs = [MAGIC + data[a * 32:b * 32] if b > a else None for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
        key_next = np.full(len(fast_list), MAX_TIMESTAMP, dtype=np.int64)
        if len(r_k):
            np.minimum.at(key_next, r_k, next_event)
        n_st = len(fast_list)
        n = n_res + n_st
        zeros = np.zeros(n, dtype=np.int64)
        columns = {
            "kind": pa.array(["result"] * n_res + ["state"] * n_st, pa.string()),
            "_kb": pa.array([None] * n_res + fast_list, pa.string()),
            "o1": np.concatenate([np.ones(n_res, dtype=np.int64), np.full(n_st, batch_id, dtype=np.int64)]),
            "o2": np.concatenate([np.array(eff, dtype=np.int64)[fire_at[fired]], np.zeros(n_st, dtype=np.int64)]),
            "o3": zeros, "o4": zeros,
            "o5": np.concatenate([np.arange(n_res, dtype=np.int64) + (1 << 40), np.zeros(n_st, dtype=np.int64)]),
            "blob": pa.array(([RESULT + pickle.dumps(a, protocol=5) for a in args] if pickled else [None] * n_res)
                             + blobs, pa.binary()),
            "next_event": pa.array(np.concatenate([zeros[:n_res], key_next]), mask=np.arange(n) < n_res),
            "next_proc": pa.array(np.full(n, MAX_TIMESTAMP, dtype=np.int64), mask=np.arange(n) < n_res),
            "live": pa.array(np.concatenate([np.zeros(n_res, dtype=bool), live]), mask=np.arange(n) < n_res),
            "json": pa.array((results_json(args) if as_json else [None] * n_res)
                             + [None] * n_st, pa.string()),
        }
        schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in row_columns])
        table = pa.table({name: pa.array(col, type=schema.field(name).type) if not isinstance(col, pa.Array) else col
                          for name, col in columns.items()}, schema=schema)
        return table, {"elements": n_el, "fired": n_res, "shapes": results_shapes(args) if as_json else []}
