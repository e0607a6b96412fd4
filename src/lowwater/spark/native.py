"""The native path: Flink's window semantics with Spark column expressions.

Per micro-batch ``k``, with ``W`` the combined watermark from the end of batch ``k-1``:

1. Spark assigns windows (``start = ts - ((ts - offset) mod slide)``, and for sliding
   windows every earlier start ``> ts - size``) and classifies each (element, window):

   * on time:        ``max_ts > W``
   * late, allowed:  ``max_ts <= W < max_ts + allowed_lateness``  (fires at once)
   * too late:       ``max_ts + allowed_lateness <= W``  (the element goes to the late
     output when *all* its windows are too late)

2. ONE aggregation (grouping sets) computes, per partition, ``max(ts)`` and counts for the
   watermark generators, and per (key, window) the on-time partial aggregate.
3. On the driver: the per-partition generators and idleness run with the batch's clock,
   the multiplexer combines once (the new watermark ``W'``); the rare late-but-allowed
   elements re-fire their windows in arrival order with full contents; the partials
   merge into the open windows; windows with ``W < max_ts <= W'`` fire; windows with
   ``max_ts + allowed_lateness <= W'`` are dropped.

Open windows live on the driver grouped by window start (all keys of a start share one
``max_ts``, so firing and cleanup are per group), and each batch writes only the groups it
touched (:mod:`lowwater.spark.state`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from lowwater.core.clock import ManualClock
from lowwater.core.errors import BadRecordError
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.watermarks import PartitionWatermarking, Watermark, WatermarkGeneratorContext
from lowwater.core.windows import WindowResult
from lowwater.runtime.exchange import Exchange
from lowwater.runtime.restore import transfer_state
from lowwater.spark.executor_watermarks import (
    PartitionState,
    decode,
    encode_states,
    new_partition,
    with_executor_timestamps,
)
from lowwater.spark.plan import NativePlan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["NativeProcessor", "NativeState"]

_AGG = {"sum": "sum", "count": "sum", "min": "min", "max": "max", "avg": "sum"}


@dataclass
class NativeState:
    clock: ManualClock = field(default_factory=ManualClock)
    exchange: Exchange = field(default_factory=lambda: Exchange(keep_history=False))
    partitions: dict[int, PartitionWatermarking[Any]] = field(default_factory=dict)
    windows: dict[int, pd.DataFrame] = field(default_factory=dict)
    """Open windows: window start -> frame indexed by key with ``acc``, ``cnt``, ``fires``."""
    rows_in: int = 0
    rows_late: int = 0
    rows_dead: int = 0
    late_by_partition: dict[int, int] = field(default_factory=dict)
    windows_fired: int = 0
    started: bool = False
    executor_states: dict[int, PartitionState] = field(default_factory=dict)
    """With watermarks on the executors: each partition's clock, assigner and generator."""

    @property
    def watermark(self) -> int:
        return self.exchange.watermark_or_min()


@dataclass
class BatchOutput:
    results: list[WindowResult]
    late: list[dict[str, Any]]
    dead: list[dict[str, Any]]
    metrics: dict[str, Any]
    delta: dict[str, Any]


def _apply(events: list[tuple[str, int]], out: Any) -> None:
    for kind, ts in events:
        if kind == "watermark":
            out.emit_watermark(Watermark(ts))
        elif kind == "idle":
            out.mark_idle()
        else:
            out.mark_active()


def _quote(name: str) -> str:
    """A column name as a SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def _ints(col: pd.Series) -> list[int]:
    """A column as Python ints."""
    values: list[int] = col.tolist()
    if col.dtype.kind in "iu":
        return values
    return [int(x) for x in values]


def _empty_frame() -> pd.DataFrame:
    return pd.DataFrame({"acc": pd.Series(dtype="float64"), "cnt": pd.Series(dtype="int64"),
                         "fires": pd.Series(dtype="int64")})


def unparsed_dead_letter(row: Any) -> dict[str, Any]:
    """The dead letter of a source row that did not parse (``_corrupt`` set): its file, as
    Spark's JSON reader gives no offset for such a line."""
    return {"reason": BadRecordError.unparsed(row["_corrupt"]), "partition": row["_partition"],
            "offset": row["_offset"], "file": row.asDict().get("_file"), "record": None}


class NativeProcessor:
    def __init__(self, plan: NativePlan) -> None:
        self.plan = plan

    # -- state --------------------------------------------------------------------------
    def empty_state(self) -> NativeState:
        return NativeState()

    @staticmethod
    def apply_delta(state: NativeState, delta: dict[str, Any]) -> None:
        windows = state.windows
        state.__dict__.update(delta["driver"].__dict__)
        state.windows = windows
        for ws in delta["dropped"]:
            state.windows.pop(ws, None)
        state.windows.update(delta["touched"])

    def rebind(self, st: NativeState) -> NativeState:
        """Loaded state, with assigners and generators rebuilt from the current strategy and
        their data (max timestamps, idleness timers, clocks) carried over."""
        strategy = self.plan.strategy
        st.exchange.advanced_once = st.exchange.advanced_once or bool(st.exchange.history)
        st.exchange.keep_history, st.exchange.history = False, st.exchange.history[-1:]
        for p, old in list(st.partitions.items()):
            fresh = strategy.create_partition(WatermarkGeneratorContext(partition=p, clock=st.clock))
            transfer_state(old.assigner, fresh.assigner)
            transfer_state(old.generator, fresh.generator)
            st.partitions[p] = fresh
        for p, (old_clock, old_pw) in list(st.executor_states.items()):
            clock, pw = new_partition(strategy, p)
            clock.set(old_clock.now_ms())
            transfer_state(old_pw.assigner, pw.assigner)
            transfer_state(old_pw.generator, pw.generator)
            st.executor_states[p] = (clock, pw)
        return st

    def _start(self, st: NativeState) -> None:
        for p in self.plan.source.partitions():
            self._partition(st, p)
        st.started = True

    def _partition(self, st: NativeState, p: int) -> PartitionWatermarking[Any]:
        if self.plan.executor_watermarks:
            if p not in st.executor_states:
                st.executor_states[p] = new_partition(self.plan.strategy, p)
            if p not in st.exchange.mux:
                st.exchange.mux.register_new_output(p)
            return st.executor_states[p][1]
        pw = st.partitions.get(p)
        if pw is None:
            ctx = WatermarkGeneratorContext(partition=p, clock=st.clock)
            pw = st.partitions[p] = self.plan.strategy.create_partition(ctx)
            if p not in st.exchange.mux:
                st.exchange.mux.register_new_output(p)
        return pw

    # -- one micro-batch ----------------------------------------------------------------
    def run(self, st: NativeState, df: DataFrame | None, batch_id: int, clock_ms: int,
            end_of_input: bool = False) -> BatchOutput:
        from pyspark.sql import functions as F

        if not st.started:
            self._start(st)
        st.clock.set(clock_ms)
        plan = self.plan
        w_prev = st.watermark
        touched: set[int] = set()
        results: list[WindowResult] = []
        late_rows: list[dict[str, Any]] = []
        dead_rows: list[dict[str, Any]] = []
        rows_in = late_n = dead_n = windowed_n = 0

        if df is not None and not end_of_input:
            if plan.executor_watermarks:
                df = with_executor_timestamps(df, plan.source.fields(), plan.strategy,
                                              encode_states(st.executor_states), clock_ms)
            exploded, base_of = self._classify(df, w_prev)
            agg: pd.DataFrame = self._aggregate(exploded).toPandas()
            parts = agg[agg["gid"] == 3]
            wins = agg[agg["gid"] == 4]
            rows_in = int(parts["n"].sum()) + int(parts["n_bad"].sum())
            late_n = int(parts["n_late"].sum())
            dead_n = int(parts["n_bad"].sum())
            windowed_n = int(parts["n_win"].sum())  # counted apart: the accounting checks the three
            # generators see every valid element (one call with the partition's max suffices)
            emitted: set[int] = set()
            for p_, n, max_ts, n_late, ctl in zip(parts["_partition"].tolist(), parts["n"].tolist(),
                                                  parts["max_ts"].tolist(), parts["n_late"].tolist(),
                                                  parts["ctl"].tolist(), strict=True):
                p = int(p_)
                pw = self._partition(st, p)
                if isinstance(ctl, str):  # the partition's state and events, from its executor
                    st.executor_states[p], events = decode(ctl)
                    _apply(events, st.exchange.mux.get_deferred_output(p))
                    emitted.add(p)
                elif n > 0 and not plan.executor_watermarks:
                    pw.generator.on_event(None, int(max_ts), st.exchange.mux.get_deferred_output(p))
                if n_late:
                    st.late_by_partition[p] = st.late_by_partition.get(p, 0) + int(n_late)
            if late_n and plan.late_sinks:
                late_rows = self._rows(base_of().filter(F.col("_elate") & ~F.col("_bad")))
            if dead_n:
                dead_rows = self._dead_rows(base_of().filter(F.col("_bad")))
            if int(parts["n_lallow"].sum()):
                results += self._late_allowed(st, exploded, touched)
            self._merge(st, wins, touched)
            self._periodic_emit(st, clock_ms, skip=emitted)
        elif end_of_input:
            for p in [*st.partitions, *st.executor_states]:
                st.exchange.mux.get_deferred_output(p).emit_watermark(Watermark(MAX_TIMESTAMP))
        else:  # a tick with no data: periodic emission only
            self._periodic_emit(st, clock_ms, skip=set())

        combined = st.exchange.combine()
        w_new = st.watermark
        if combined.advanced_to is not None:
            results += self._fire(st, w_prev, w_new, touched)
        dropped = self._cleanup(st, w_new)
        st.rows_in += rows_in
        st.rows_late += late_n
        st.rows_dead += dead_n
        st.windows_fired += len(results)
        driver = NativeState(**{**st.__dict__, "windows": {}})
        delta = {"driver": driver, "dropped": dropped,
                 "touched": {ws: st.windows[ws] for ws in touched if ws in st.windows}}
        metrics = self._metrics(st, rows_in, windowed_n, late_n, dead_n, len(results))
        return BatchOutput(results, late_rows, dead_rows, metrics, delta)

    def _periodic_emit(self, st: NativeState, clock_ms: int, skip: set[int]) -> None:
        """Periodic emission of every partition (those done on an executor this batch excepted)."""
        for p, pw in st.partitions.items():
            pw.generator.on_periodic_emit(st.exchange.mux.get_deferred_output(p))
        for p, (clock, pw) in st.executor_states.items():
            if p not in skip:
                clock.set(clock_ms)
                pw.generator.on_periodic_emit(st.exchange.mux.get_deferred_output(p))

    def _classify(self, df: DataFrame, w: int) -> tuple[DataFrame, Callable[[], DataFrame]]:
        """``exploded`` (one row per element and window), and how to build ``base`` (one row per
        element; only late and dead-lettered rows need it).

        Built from SQL expression text in as few DataFrame calls as possible: in PySpark 4
        every ``Column`` operation is a JVM round trip that also records its Python call
        site (about 1.5 ms each here), and every DataFrame call analyses the whole plan
        again; a chain of ``withColumn`` and ``Column`` arithmetic cost more driver time per
        micro-batch than the aggregation of 100k rows."""
        from pyspark.sql import functions as F

        p = self.plan
        new: dict[str, str] = {}
        if p.executor_watermarks:
            ts_col, data = "_ts", "(_ctl IS NULL)"
        else:
            ts_col = _quote(p.timestamp_field) if p.timestamp_field else "_source_ts"
            new["_ctl"] = "CAST(NULL AS STRING)"
            data = "true"  # _ctl is null
        ts = f"TRY_CAST({ts_col} AS BIGINT)"  # NaN, infinite or out of range: null, so dead-lettered
        key = _quote(p.key_field)
        value = _quote(p.value_field) if p.value_field else "1"
        bad = f"({data} AND ({ts} IS NULL OR {ts} = {MIN_TIMESTAMP} OR {key} IS NULL OR {value} IS NULL))"
        last = f"CASE WHEN NOT {bad} THEN {ts} - pmod({ts} - {p.offset_ms}, {p.slide_ms}) END"
        never = w == MIN_TIMESTAMP
        elate = "false" if never else f"coalesce(({last}) + {p.size_ms - 1 + p.allowed_lateness_ms} <= {w}, false)"
        new.update({"_ts": ts, "_k": key, "_v": value, "_bad": bad, "_last": last, "_elate": elate})
        n = math.ceil(p.size_ms / p.slide_ms)

        def base_of() -> DataFrame:
            return df.withColumns({name: F.expr(text) for name, text in new.items()})

        cols: dict[str, str] = {}
        if n == 1:  # one window per element: a single projection, the element's columns inlined
            ex, bad_ref, ws = df, bad, f"({last})"
            cols.update({**new, "_i": "0", "_ws": last})
        else:
            ex = base_of().withColumn("_i", F.expr(f"explode(sequence(0, {n - 1}))"))
            ex = ex.withColumn("_ws", F.expr(f"_last - _i * {p.slide_ms}"))
            ex = ex.filter(f"_bad OR _i = 0 OR _ws > _ts - {p.size_ms}")
            bad_ref, ws = "_bad", "_ws"
        wmax = f"({ws} + {p.size_ms - 1})"
        if never:
            ontime, lallow = f"NOT {bad_ref}", "false"
        else:
            ontime = f"(NOT {bad_ref} AND {wmax} > {w})"
            lallow = f"(NOT {bad_ref} AND {wmax} <= {w} AND {wmax} + {p.allowed_lateness_ms} > {w})"
        first = data if n == 1 else f"(_i = 0 AND {data})"
        cols.update({"_ontime": f"({ontime} AND {data})", "_lallow": f"({lallow} AND {data})", "_first": first})
        return ex.withColumns({name: F.expr(text) for name, text in cols.items()}), base_of

    def _aggregate(self, ex: DataFrame) -> DataFrame:
        """ONE aggregation: per partition (``gid`` 3) the generators' inputs, per (key, window
        start) (``gid`` 4) the on-time partial aggregate."""
        from pyspark.sql import functions as F

        acc = {
            "sum": "sum(CASE WHEN _ontime THEN _v END)",
            "avg": "sum(CASE WHEN _ontime THEN _v END)",
            "count": "count(CASE WHEN _ontime THEN 1 END)",
            "min": "min(CASE WHEN _ontime THEN _v END)",
            "max": "max(CASE WHEN _ontime THEN _v END)",
        }[self.plan.aggregate]
        # max() over a string forces a SortAggregate (no hash map for variable-width buffers):
        # three times slower, so the control column is aggregated only when executors send one
        ctl = "max(_ctl)" if self.plan.executor_watermarks else "CAST(NULL AS STRING)"
        aggregates = [
            "CAST(grouping_id(_partition, _k, _ws) AS INT) AS gid",
            "max(CASE WHEN _first AND NOT _bad THEN _ts END) AS max_ts",
            "count(CASE WHEN _first AND NOT _bad THEN 1 END) AS n",
            "count(CASE WHEN _first AND _bad THEN 1 END) AS n_bad",
            "count(CASE WHEN _first AND _elate AND NOT _bad THEN 1 END) AS n_late",
            "count(CASE WHEN _first AND (_ontime OR _lallow) THEN 1 END) AS n_win",
            "count(CASE WHEN _lallow THEN 1 END) AS n_lallow",
            f"{acc} AS acc",
            "count(CASE WHEN _ontime THEN 1 END) AS cnt",
            f"{ctl} AS ctl",
        ]
        agg = ex.groupingSets([["_partition"], ["_k", "_ws"]], "_partition", "_k", "_ws").agg(
            *[F.expr(a) for a in aggregates])
        return agg.filter("gid = 3 OR cnt > 0")

    def _rows(self, df: DataFrame) -> list[dict[str, Any]]:
        fields = self.plan.source.fields()
        order = ["_seq", "_partition", "_offset"]
        return [{f: r[f] for f in fields} for r in df.orderBy(*order).select(*fields).collect()]

    def _dead_rows(self, df: DataFrame) -> list[dict[str, Any]]:
        """Records that cannot be windowed, with the reason and their source position."""
        p = self.plan
        out = []
        corrupt = "_corrupt" in df.columns
        why = "_why" in df.columns  # a BadRecordError's reason, from an assigner on an executor
        for r in df.orderBy("_seq", "_partition", "_offset").collect():
            if corrupt and r["_corrupt"] is not None:
                out.append(unparsed_dead_letter(r))
                continue
            field = p.timestamp_field or "source timestamp"
            if why and r["_why"] is not None:
                reason = r["_why"]
            elif r["_ts"] is None:
                reason = BadRecordError.missing_timestamp(field)
            elif r["_ts"] == MIN_TIMESTAMP:
                reason = BadRecordError.no_timestamp_marker(field)
            elif r["_k"] is None:
                reason = BadRecordError.missing("key", str(p.key_field))
            else:
                reason = BadRecordError.missing("value", str(p.value_field))
            record = {f: r[f] for f in p.source.fields()}
            out.append({"reason": reason, "partition": r["_partition"], "offset": r["_offset"], "record": record})
        return out

    # -- driver-side window state ----------------------------------------------------------
    def _merge(self, st: NativeState, wins: pd.DataFrame, touched: set[int]) -> None:
        how = _AGG[self.plan.aggregate]
        for ws, part in wins.groupby("_ws", sort=False):
            ws = int(ws)
            new = part.set_index("_k")[["acc", "cnt"]]
            old = st.windows.get(ws)
            if old is None:
                merged = new.assign(fires=0)
            else:
                both = pd.concat([old[["acc", "cnt"]], new])
                merged = both.groupby(level=0, sort=False).agg({"acc": how, "cnt": "sum"})
                merged["fires"] = old["fires"].reindex(merged.index, fill_value=0)
            st.windows[ws] = merged
            touched.add(ws)

    def _values(self, frame: pd.DataFrame) -> list[Any]:
        """``_value`` of every row of a window frame, column at a time (same Python values)."""
        kind = self.plan.aggregate
        if kind == "count":
            return _ints(frame["cnt"])
        if kind == "avg":
            return [self._value(a, c) for a, c in zip(frame["acc"].tolist(), frame["cnt"].tolist(), strict=True)]
        acc = frame["acc"]
        if acc.dtype == object:  # may hold NumPy scalars
            return [a.item() if hasattr(a, "item") else a for a in acc.tolist()]
        values: list[Any] = acc.tolist()  # Python ints or floats already
        return values

    def _value(self, acc: Any, cnt: Any) -> Any:
        kind = self.plan.aggregate
        if kind == "count":
            return int(cnt)
        if kind == "avg":
            return float(acc) / float(cnt) if cnt else None
        return acc.item() if hasattr(acc, "item") else acc

    def _late_allowed(self, st: NativeState, exploded: DataFrame, touched: set[int]) -> list[WindowResult]:
        from pyspark.sql import functions as F

        size = self.plan.size_ms
        rows = (
            exploded.filter(F.col("_lallow")).select("_k", "_ws", "_v", "_seq", "_partition", "_offset")
            .orderBy("_seq", "_partition", "_offset").collect()
        )
        how = self.plan.aggregate
        out: list[WindowResult] = []
        for r in rows:
            ws = int(r["_ws"])
            frame = st.windows.get(ws)
            if frame is None:
                frame = st.windows[ws] = _empty_frame()
            key, v = r["_k"], r["_v"]
            if key in frame.index:
                acc, cnt, fires = frame.at[key, "acc"], int(frame.at[key, "cnt"]), int(frame.at[key, "fires"])
                if how in ("sum", "avg"):
                    acc = acc + v
                elif how == "count":
                    acc = cnt + 1
                elif how == "min":
                    acc = min(acc, v)
                else:
                    acc = max(acc, v)
                cnt += 1
            else:
                acc, cnt, fires = (1 if how == "count" else v), 1, 0
            frame.loc[key] = [acc, cnt, fires + 1]
            out.append(WindowResult(key, ws, ws + size, self._value(acc, cnt), fires))
            touched.add(ws)
        return out

    def _fire(self, st: NativeState, w_prev: int, w_new: int, touched: set[int]) -> list[WindowResult]:
        size = self.plan.size_ms
        out: list[WindowResult] = []
        for ws in sorted(st.windows):
            wmax = ws + size - 1
            if w_prev < wmax <= w_new:
                frame = st.windows[ws]
                n = len(frame)
                out.extend(map(WindowResult, frame.index.tolist(), itertools.repeat(ws, n),
                               itertools.repeat(ws + size, n), self._values(frame), _ints(frame["fires"])))
                frame["fires"] = frame["fires"] + 1
                touched.add(ws)
        return out

    def _cleanup(self, st: NativeState, w_new: int) -> list[int]:
        horizon = self.plan.size_ms - 1 + self.plan.allowed_lateness_ms
        dropped = [ws for ws in st.windows if ws + horizon <= w_new]
        for ws in dropped:
            del st.windows[ws]
        return dropped


    def _metrics(self, st: NativeState, rows_in: int, windowed: int, late: int, dead: int,
                 fired: int) -> dict[str, Any]:
        status = st.exchange.lane_status()
        return {
            "combined_watermark": st.watermark,
            "partition_watermarks": {str(k): v[0] for k, v in status.items()},
            "idle_partitions": sorted(str(k) for k, v in status.items() if v[1]),
            "rows_in": rows_in,
            "rows_windowed": windowed,
            "rows_late": late,
            "rows_dead_lettered": dead,
            "rows_late_by_partition": {str(k): v for k, v in st.late_by_partition.items()},
            "windows_fired": fired,
            "open_windows": int(sum(len(f) for f in st.windows.values())),
        }
