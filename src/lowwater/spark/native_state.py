"""The native path's control-plane state, and its JSON form in the checkpoint.

O(partitions + open window starts), whatever the number of keys: the batch clock, each
partition's watermark generator and assigner (their data, :mod:`lowwater.spark.snapshot`),
the multiplexer's per-partition watermarks and idle flags, the combined watermark, and per
open window start the batches whose partials hold it (:mod:`lowwater.spark.window_store`).
Window contents are not here: they are Parquet files under the checkpoint.

The JSON document (``state/<batch_id>.json``)::

    {"format": 2, "clock_ms": 7000, "started": true,
     "watermarks": {"lanes": [[0, 4999, false], [1, 2999, true]], "combined": 2999, "status_idle": false,
                    "underlying_idle": false, "stream_idle": false, "advanced_once": true},
     "generators": {"0": <data of PartitionWatermarking>, ...},       # driver-side generators
     "executor": {"0": {"clock_ms": 7000, "state": <data>}, ...},    # generators run on executors
     "panes": false, "open_starts": {"10000": [6, 7]}, "late_written": {"10000": [7]},
     "pending_delete": {"0": [3, 4]},
     "totals": {"rows_in": ..., "rows_windowed": ..., "rows_late": ..., "rows_dead": ..., "windows_fired": ...},
     "late_by_partition": {"1": 3},
     "metrics": {... this batch's counters, committed with the state ...}}
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from lowwater.core.clock import ManualClock
from lowwater.core.watermarks import PartitionWatermarking, WatermarkGeneratorContext, WatermarkStrategy
from lowwater.runtime.exchange import Exchange
from lowwater.spark.executor_watermarks import PartitionState, new_partition
from lowwater.spark.snapshot import restore, to_data

__all__ = ["FORMAT", "NativeState", "from_json", "to_json"]

FORMAT = 2
"""2: which batches wrote a start late but allowed is here (``late_written``), no longer a column
``nl`` of the window store's files; a format-1 checkpoint is refused with a clear error."""


@dataclass
class NativeState:
    clock: ManualClock = field(default_factory=ManualClock)
    exchange: Exchange = field(default_factory=lambda: Exchange(keep_history=False))
    partitions: dict[int, PartitionWatermarking[Any]] = field(default_factory=dict)
    executor_states: dict[int, PartitionState] = field(default_factory=dict)
    """With watermarks on the executors: each partition's clock, assigner and generator."""
    panes: bool = False
    """Whether ``open_starts`` are the starts of *panes* (sliding windows: each element is in one pane,
    ``gcd(size, slide)`` long, ``slide`` where the size is a multiple of it, and a window is the union
    of its ``size / gcd`` panes), not of windows. A checkpoint written before panes (no ``panes`` in
    its JSON) keeps its windows' own starts, as does one of a size not a multiple of the slide written
    before session 61 (``false``): only multiples had panes then."""
    open_starts: dict[int, list[int]] = field(default_factory=dict)
    """Open window (or pane) start -> the batch ids whose partials hold it."""
    late_written: dict[int, list[int]] = field(default_factory=dict)
    """Open window start -> the batch ids of ``open_starts`` that wrote it late but allowed (after it
    fired): their every element re-fires the window, and counts in its later firings' index."""
    pending_delete: dict[int, list[int]] = field(default_factory=dict)
    """Starts cleaned up by the last batch: their files are deleted by the next one."""
    rows_in: int = 0
    rows_windowed: int = 0
    rows_late: int = 0
    rows_dead: int = 0
    windows_fired: int = 0
    late_by_partition: dict[int, int] = field(default_factory=dict)
    started: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    """The last batch's counters, committed in the same file as the state."""

    @property
    def watermark(self) -> int:
        return self.exchange.watermark_or_min()


def _exchange_data(ex: Exchange) -> dict[str, Any]:
    mux = ex.mux
    lanes = [[lane, mux.partial(lane).watermark, mux.partial(lane).idle] for lane in mux.output_ids()]
    return {"lanes": lanes, "combined": mux.status.combined_watermark, "status_idle": mux.status.idle,
            "underlying_idle": mux._underlying_idle, "stream_idle": ex._under.idle,
            "advanced_once": bool(ex.advanced_once or ex.history)}


def _exchange(data: dict[str, Any], lane: Callable[[Any], Hashable] = int) -> Exchange:
    """The exchange ``data`` describes; ``lane`` makes a lane id of its JSON form (a partition
    number here; ``tuple`` for the keyed path's ``(source, partition)``)."""
    ex = Exchange(keep_history=False)
    for lane_, watermark, idle in data["lanes"]:
        ex.mux.register_new_output(lane(lane_))
        partial = ex.mux.partial(lane(lane_))
        partial.watermark, partial.idle = int(watermark), bool(idle)
    ex.mux.status.combined_watermark = int(data["combined"])
    ex.mux.status.idle = bool(data["status_idle"])
    ex.mux._underlying_idle = bool(data["underlying_idle"])
    ex._under.idle = bool(data["stream_idle"])
    ex.advanced_once = bool(data["advanced_once"])
    return ex


def to_json(st: NativeState) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "clock_ms": st.clock.now_ms(),
        "started": st.started,
        "watermarks": _exchange_data(st.exchange),
        "generators": {str(p): to_data(pw) for p, pw in st.partitions.items()},
        "executor": {str(p): {"clock_ms": c.now_ms(), "state": to_data(pw)} for p, (c, pw) in
                     st.executor_states.items()},
        "panes": st.panes,
        "open_starts": {str(ws): list(bs) for ws, bs in st.open_starts.items()},
        "late_written": {str(ws): list(bs) for ws, bs in st.late_written.items()},
        "pending_delete": {str(ws): list(bs) for ws, bs in st.pending_delete.items()},
        "totals": {"rows_in": st.rows_in, "rows_windowed": st.rows_windowed, "rows_late": st.rows_late,
                   "rows_dead": st.rows_dead,                   "windows_fired": st.windows_fired},
        "late_by_partition": {str(p): n for p, n in st.late_by_partition.items()},
        "metrics": st.metrics,
    }


def from_json(data: dict[str, Any], strategy: WatermarkStrategy[Any]) -> NativeState:
    """The state ``data`` describes, its generators built by ``strategy`` (the current code)."""
    if data.get("format") != FORMAT:
        from lowwater.core.errors import ConfigurationError

        raise ConfigurationError("checkpoint_location", f"native state of format {data.get('format')!r}; this "
                                                        f"version reads format {FORMAT}: use a new checkpoint")
    st = NativeState()
    st.clock.set(int(data["clock_ms"]))
    st.started = bool(data["started"])
    st.exchange = _exchange(data["watermarks"])
    for p_, tree in data["generators"].items():
        p = int(p_)
        fresh = strategy.create_partition(WatermarkGeneratorContext(partition=p, clock=st.clock))
        st.partitions[p] = restore(tree, fresh)
    for p_, item in data["executor"].items():
        p = int(p_)
        clock, pw = new_partition(strategy, p)
        restore(item["state"], pw)
        clock.set(int(item["clock_ms"]))
        st.executor_states[p] = (clock, pw)
    st.panes = bool(data.get("panes", False))
    st.open_starts = {int(ws): [int(b) for b in bs] for ws, bs in data["open_starts"].items()}
    st.late_written = {int(ws): [int(b) for b in bs] for ws, bs in data["late_written"].items()}
    st.pending_delete = {int(ws): [int(b) for b in bs] for ws, bs in data["pending_delete"].items()}
    t = data["totals"]
    st.rows_in, st.rows_late, st.rows_dead, st.windows_fired = (
        int(t["rows_in"]), int(t["rows_late"]), int(t["rows_dead"]), int(t["windows_fired"]))
    st.rows_windowed = int(t.get("rows_windowed", 0))
    st.late_by_partition = {int(p): int(n) for p, n in data["late_by_partition"].items()}
    st.metrics = dict(data.get("metrics") or {})
    return st
