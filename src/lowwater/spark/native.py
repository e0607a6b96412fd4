"""The native path: Flink's window semantics with Spark column expressions, window state on the executors.

Per micro-batch ``k``, with ``W`` the combined watermark from the end of batch ``k-1``:

1. Spark assigns windows (``start = ts - ((ts - offset) mod slide)``, and for sliding
   windows every earlier start ``> ts - size``), with no reference to ``W``.
2. ONE aggregation (grouping sets) computes per partition and last window start of its
   elements ``max(ts)`` and counts (for the watermark generators) and per (key, window
   start) the partial aggregate, and ONE Spark job writes the partials from the executors
   to the window store (:mod:`lowwater.spark.window_store`) under ``batch=<k>``. Only the
   per-partition rows and the window starts written come to the driver, as ``observe()``
   metrics of that write: O(partitions x window starts). The driver classifies each start
   written (:class:`_Classes`; every element of a window shares its class):

   * on time:        ``max_ts > W``
   * late, allowed:  ``max_ts <= W < max_ts + allowed_lateness``  (fires at once)
   * too late:       ``max_ts + allowed_lateness <= W``  (its files are deleted; an element
     goes to the late output when *all* its windows are too late, i.e. its last one)

3. On the driver: the per-partition generators and idleness run with the batch's clock,
   the multiplexer combines once (the new watermark ``W'``). The driver decides which
   window starts fire (``W < start + size - 1 <= W'``) and which are cleaned up
   (``start + size - 1 + allowed_lateness <= W'``).
4. Outputs are DataFrames, computed on the executors when a sink writes them
   (:mod:`lowwater.spark.sinks.base`): a firing start is aggregated from its files; the
   rare late-but-allowed elements re-fire their windows with a running aggregate in
   arrival order over the stored contents (``fire_index`` 1, 2, ...); the late output and
   the dead letters are filters of the batch.

Edge cases, the same on every Spark path and documented in docs/reliability.md:

* A timestamp so close to the ends of the 64-bit range that its window's start, end or
  cleanup time cannot be represented (``|ts|`` within ``size + slide + |offset| +
  allowed_lateness`` of ``2**63``) is dead-lettered with that reason, never an
  ``ARITHMETIC_OVERFLOW``; it still advances its partition's watermark.
* An integer ``sum`` wraps around like Java's ``long`` (Flink's ``SumAggregator``): the
  native path sums the high and low 32 bits apart, which cannot overflow, and wraps the
  total modulo ``2**64``.

This module is the driver's flow of a batch (watermarks, the window store's calls, what
fires and what is cleaned up); the SQL text it runs, one entry per built-in aggregate, is in
:mod:`lowwater.spark.native_sql`, and the outputs it returns in :mod:`lowwater.spark.outputs`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from lowwater.core.errors import BadRecordError, PipelineError
from lowwater.core.failures import chain_text
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.watermarks import PartitionWatermarking, Watermark, WatermarkGeneratorContext
from lowwater.core.windows import BUILTIN_AGGREGATES, WindowResult
from lowwater.spark.analyzed import AnalyzedQuery
from lowwater.spark.executor_watermarks import decode, encode_states, new_partition, with_executor_timestamps
from lowwater.spark.literals import bigint_sql, with_batch_values
from lowwater.spark.native_sql import (
    INTEGRAL,
    AggregateSql,
    base_types,
    dead_ddl,
    late_ddl,
    late_names,
    literal,
    merge_exprs,
    partial_aggregates,
    partial_columns,
    partial_ddl,
    python_repr_sql,
    quote,
    result_ddl,
    running_accumulators,
    schema_json,
    sql_of,
    value_expr,
    window_sql,
)
from lowwater.spark.native_state import NativeState, from_json, to_json
from lowwater.spark.outputs import BatchOutput, Output, empty_frame
from lowwater.spark.plan import NativePlan
from lowwater.spark.window_store import WindowStore, fires_in_one_task, write_tasks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["BatchOutput", "NativeProcessor", "NativeState", "Output", "schema_json"]
# BatchOutput, Output (lowwater.spark.outputs) and schema_json (lowwater.spark.native_sql): re-exported

PANES_PER_SLIDE = 8
"""Sliding windows keep panes (``gcd(size, slide)`` long) when a slide is at most this many of them
(:meth:`NativeProcessor._pane_able`); a size that is a multiple of the slide has one a slide."""


def unparsed_dead_letter(row: Any) -> dict[str, Any]:
    """The dead letter of a source row that did not parse (``_corrupt`` set): its file, as
    Spark's JSON reader gives no offset for such a line, and as its ``record`` what the source read
    where it keeps it (``_raw``: a Kafka value's text)."""
    return {"reason": BadRecordError.unparsed(row["_corrupt"]), "partition": row["_partition"],
            "offset": row["_offset"], "file": row.asDict().get("_file"), "record": row.asDict().get("_raw")}


class NativeProcessor:
    def __init__(self, plan: NativePlan) -> None:
        self.plan = plan
        p = plan
        self.margin_ms = p.size_ms + p.slide_ms + abs(p.offset_ms) + p.allowed_lateness_ms + 1
        """Timestamps within this distance of MIN or MAX have windows that cannot be represented."""
        self.store: WindowStore | None = None
        self.sql_for = sql_of(plan.aggregate)
        """The aggregate's SQL, given the value's SQL type (raises here for an aggregate without SQL)."""
        self.numeric = BUILTIN_AGGREGATES[plan.aggregate].numeric
        """Whether the aggregate takes numbers only (sum, avg): :meth:`_value_sql`."""
        self.partials = AnalyzedQuery(lambda batch: self._partials(batch, self._schema(batch)))
        """The batch's partials to write, observed (:meth:`_partials`), parsed and analysed once per
        run and schema (:mod:`lowwater.spark.analyzed`)."""
        self.partial_rows: int | None = None
        """How many partials the last batch this process ran wrote: the next write's task count
        (:func:`~lowwater.spark.window_store.write_tasks`). Not state: a restart leaves the
        first batch's to adaptive execution, and a write's task count changes its files, not its rows."""
        self.panes = False
        """Whether the state in hand keeps panes (:attr:`NativeState.panes`): set with it."""
        self.registered = False
        """Whether this run registered the source's partitions: a restarted job registers those the
        source gained while it was stopped, as a new job's are (a Flink source restored from a
        checkpoint discovers its splits anew); they joined at their first record before (session 59)."""
        self.rows_written: dict[int, int] = {}
        """Per batch this process ran whose files a window still holds: how many partials it wrote
        (all its starts). A firing adds them up to choose its plan (:func:`~lowwater.spark.window_store.
        fires_in_one_task`); not state either: a batch missing here counts as unknown."""

    JOIN_ROWS = 100_000
    """A sliding firing that reads at least this many partials from its panes (or an unknown number:
    batches written before this process started) takes each pane's windows from a table of (pane,
    window) pairs joined in, as data (spark/literals.py); a smaller one from a lambda over the range,
    evaluated per row without generated code (:meth:`_windows_sql`). The join costs a Spark job of
    its own, the lambda about 2.5 times the CPU per row (docs/performance.md, session 61)."""
    JOIN_PAIRS = 4_096
    """At most this many (pane, window) pairs for the join (:attr:`JOIN_ROWS`), else the lambda."""

    def bind(self, store: WindowStore) -> None:
        self.store = store

    # -- state ----------------------------------------------------------------------------
    def empty_state(self) -> NativeState:
        st = NativeState()
        st.panes = self.panes = self._pane_able()
        return st

    def state_from_json(self, data: dict[str, Any]) -> NativeState:
        st = from_json(data, self.plan.strategy)
        self.panes = st.panes
        return st

    @staticmethod
    def state_to_json(st: NativeState) -> dict[str, Any]:
        return to_json(st)

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

    # -- one micro-batch ------------------------------------------------------------------
    def run(self, st: NativeState, df: DataFrame | None, batch_id: int, clock_ms: int, spark: SparkSession,
            end_of_input: bool = False) -> BatchOutput:
        """Batch ``batch_id``: mutates ``st`` into the state after it; returns its outputs (lazy DataFrames)."""
        assert self.store is not None, "bind(store) first"
        store = self.store
        if not st.started or not self.registered:  # and partitions the source gained while the job was stopped
            self._start(st)
            self.registered = True
        st.clock.set(clock_ms)
        plan = self.plan
        self.panes = st.panes
        w_prev = st.watermark
        if st.pending_delete:  # cleaned up by batch k-1, which Spark has committed: no replay reads them
            store.delete(st.pending_delete, st.open_starts, before=batch_id)
            st.pending_delete = {}
        rows_in = late_n = dead_n = windowed_n = 0
        late = dead = late_fires = None
        written: list[int] = []
        late_starts: list[int] = []
        schema = st.metrics.get("_schema")

        if df is not None and not end_of_input:
            if plan.executor_watermarks:
                df = with_executor_timestamps(df, plan.source.fields(), plan.strategy,
                                              encode_states(st.executor_states), clock_ms)
            schema = self._schema(df)
            parts, starts = self._write_partials(df, schema, batch_id)
            classes = _Classes(w_prev, plan.size_ms, plan.allowed_lateness_ms)
            # a pane is too late when its last window is
            written = [ws for ws in starts if not classes.too_late(self._last_window(ws))]
            late_starts = sorted({ws for pane in written for ws in self._windows_of(pane)
                                  if classes.late_allowed(ws)}) if st.panes else \
                [ws for ws in written if classes.late_allowed(ws)]
            late_fires = self._late_fires(
                spark, self._over(df, lambda view: self._exploded_sql(view, dict(df.dtypes), windows=True)),
                late_starts, st, w_prev, schema) if late_starts else None
            emitted: set[int] = set()
            for r in parts:
                p = int(r["_partition"])
                pw = self._partition(st, p)
                n = int(r["n"])
                rows_in += n + int(r["n_bad"])
                dead_n += int(r["n_bad"]) + (n if r["_last"] is None else 0)  # with no window: edge elements
                if r["_last"] is not None:  # elements in windows; all of them too late, or not
                    if classes.too_late(int(r["_last"])):
                        late_n += n
                        st.late_by_partition[p] = st.late_by_partition.get(p, 0) + n
                    else:
                        windowed_n += n
                if isinstance(r["ctl"], str):  # the partition's state and events, from its executor
                    st.executor_states[p], events = decode(r["ctl"])
                    events.replay(st.exchange.mux.get_deferred_output(p))
                    emitted.add(p)
                elif r["max_ts"] is not None and not plan.executor_watermarks:
                    pw.generator.on_event(None, int(r["max_ts"]), st.exchange.mux.get_deferred_output(p))
            if not written:  # batch=<k> holds no window kept (or nothing): no start refers to it
                store.discard(batch_id)
            elif len(written) < len(starts):
                store.discard_starts(batch_id, [ws for ws in starts if classes.too_late(self._last_window(ws))])
            if late_n:
                late = self._base(df, w_prev).filter("_elate")
            if dead_n:
                dead = self._base(df, None).filter("_bad OR _edge")
            for ws in written:
                st.open_starts.setdefault(ws, []).append(batch_id)
            for ws in late_starts:
                st.late_written.setdefault(ws, []).append(batch_id)
            self._periodic_emit(st, clock_ms, skip=emitted)
        elif end_of_input:
            for p in [*st.partitions, *st.executor_states]:
                st.exchange.mux.get_deferred_output(p).emit_watermark(Watermark(MAX_TIMESTAMP))
        else:  # a tick with no data: periodic emission only
            self._periodic_emit(st, clock_ms, skip=set())

        combined = st.exchange.combine()
        w_new = st.watermark
        size = plan.size_ms
        fires = None
        if combined.advanced_to is None:
            n_firing = 0
        elif st.panes:  # the windows over the open panes whose end the watermark passed, read from those panes
            lo, hi = max(w_prev - size + 1, MIN_TIMESTAMP), w_new - size + 1  # no window starts at MIN
            n_firing, read = self._windows_over(st.open_starts, lo, hi)
            fires = self._fires(spark, {pane: st.open_starts[pane] for pane in read}, schema,
                                (lo, hi)) if n_firing else None
        else:
            firing = [ws for ws in sorted(st.open_starts) if w_prev < ws + size - 1 <= w_new]
            n_firing = len(firing)
            fires = self._fires(spark, {ws: st.open_starts[ws] for ws in firing}, schema) if firing else None
        horizon = size - 1 + plan.allowed_lateness_ms
        for ws in [ws for ws in st.open_starts if self._last_window(ws) + horizon <= w_new]:  # a pane: its last window
            st.pending_delete[ws] = st.open_starts.pop(ws)
            st.late_written.pop(ws, None)
        for ws in [ws for ws in st.late_written if ws + horizon <= w_new]:  # with panes, keyed by window
            st.late_written.pop(ws)
        live = {b for bs in st.open_starts.values() for b in bs}
        self.rows_written = {b: n for b, n in self.rows_written.items() if b in live}
        results = fires if late_fires is None else late_fires if fires is None else late_fires.unionByName(fires)
        st.rows_in += rows_in
        st.rows_windowed += windowed_n
        st.rows_late += late_n
        st.rows_dead += dead_n
        # windows_fired counts result rows (one per key and window firing), which only Spark knows:
        # the engine counts them as the batch's sinks write them and adds them (record_fired)
        metrics = self._metrics(st, rows_in, windowed_n, late_n, dead_n, n_firing, len(late_starts))
        if schema is not None:
            st.metrics = {**metrics, "_schema": schema}
        else:
            st.metrics = dict(metrics)
        def empty(ddl: Callable[[dict[str, Any]], str]) -> Callable[[], DataFrame | None]:
            return lambda: None if schema is None else empty_frame(spark, ddl(schema))

        out = BatchOutput(
            Output(results, self._result_rows, ("_o1", "_o2", "_o3", "_o4"), empty(self._result_ddl)),
            Output(None if late is None else self._late_frame(late), self._late_rows, ("_seq", "_partition", "_offset"),
                   empty(late_ddl)),
            Output(None if dead is None else self._dead_frame(dead),
                   lambda _: self._dead_rows(dead) if dead is not None else [], (), empty(dead_ddl)),
            metrics,
        )
        out.per_sink = [out.results if kind == "result" else out.late for kind in self.plan.sink_outputs]
        return out

    @staticmethod
    def record_fired(st: NativeState, n: int) -> None:
        """Count the batch's result rows in ``st`` (the state after it): ``n`` firings of a
        (key, window), one result row each, re-firings of late-but-allowed elements included,
        as Flink's window operator emits them. :meth:`run` cannot count them without a Spark
        job of its own; the engine counts them as a sink writes them (or by themselves when
        no sink counts them), after ``run`` returned and the state was committed."""
        st.windows_fired += n
        st.metrics["windows_fired"] = n

    def _periodic_emit(self, st: NativeState, clock_ms: int, skip: set[int]) -> None:
        """Periodic emission of every partition (those done on an executor this batch excepted)."""
        for p, pw in st.partitions.items():
            pw.generator.on_periodic_emit(st.exchange.mux.get_deferred_output(p))
        for p, (clock, pw) in st.executor_states.items():
            if p not in skip:
                clock.set(clock_ms)
                pw.generator.on_periodic_emit(st.exchange.mux.get_deferred_output(p))

    # -- types ------------------------------------------------------------------------------
    def _schema(self, df: DataFrame) -> dict[str, Any]:
        """The types the outputs need (kept in the state, for batches with no input)."""
        p = self.plan
        types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        fields = [[f, types[f]] for f in p.source.fields() if f in types]
        value = types[p.value_field] if p.value_field else "bigint"
        return {"key": types[p.key_field], "value": value, "fields": fields}

    def _sql(self, schema: dict[str, Any]) -> AggregateSql:
        return self.sql_for(str(schema["value"]))

    def _result_ddl(self, schema: dict[str, Any]) -> str:
        return result_ddl(self._sql(schema), schema)

    # -- classification and the one aggregation --------------------------------------------
    def _element_layers(self, columns: Mapping[str, str]) -> list[dict[str, str]]:
        """Each element's columns, as SQL over the batch's own, none of them depending on the
        watermark: which windows an element is in, whether it is bad (dead-lettered: no
        timestamp, key or value) or at the edge of the 64-bit range, its value ``_v`` (null
        unless it is in a window) and ``_last``, the start of the last of its windows (null
        unless it is in one). No expression can overflow: edge timestamps are caught first
        (``_edge``) and CASE evaluates its branches lazily.

        In layers, each over the columns of those before it (``_lw_value`` and ``_lw_data``, whether
        the row is an element and not a control row, are only for the layers after): each condition
        is written once, where inlining them repeated the bad-record test six times, and Spark's
        analyzer, optimizer and planner walk a tree a fraction of the size, every batch.

        ``columns`` maps the batch's column names to their SQL types (``dict(df.dtypes)``)."""
        p = self.plan
        if p.executor_watermarks:
            ts, data = "TRY_CAST(_ts AS BIGINT)", "(_ctl IS NULL)"
        elif p.timestamp_field and columns.get(p.timestamp_field) not in NUMBER_TYPES:
            # the field assigner takes an integer or a float only (FieldTimestampAssigner): a STRING, a
            # BOOLEAN, a DECIMAL or a TIMESTAMP column is no timestamp, and each element a dead letter,
            # where the cast read "1714557600123" as a number, True as 1 ms and a TIMESTAMP as seconds
            ts, data = "CAST(NULL AS BIGINT)", "true"
        else:
            ts, data = f"TRY_CAST({quote(p.timestamp_field) if p.timestamp_field else '_source_ts'} AS BIGINT)", "true"
        windowed = "(_lw_data AND NOT _bad AND NOT _edge)"
        return [
            # NaN, infinite or out of range: null, so dead-lettered
            {"_ts": ts, "_k": quote(p.key_field),
             "_lw_value": self._value_sql(columns), "_lw_data": data,
             "_lw_parsed": "(_corrupt IS NULL)" if "_corrupt" in columns else "true"},
            {"_bad": f"(_lw_data AND (_ts IS NULL OR _ts = {MIN_TIMESTAMP} OR _k IS NULL OR _lw_value IS NULL))",
             # the generator sees every element whose timestamp the assigner takes, as on the reference
             # runtime: also one dead-lettered for its key or value, or at the edge of the range
             "_tsok": f"(_lw_data AND _lw_parsed AND _ts IS NOT NULL AND _ts <> {MIN_TIMESTAMP})"},
            {"_edge": f"(_lw_data AND NOT _bad AND (_ts > {MAX_TIMESTAMP - self.margin_ms} OR "
                      f"_ts < {MIN_TIMESTAMP + self.margin_ms}))"},
            {"_v": f"CASE WHEN {windowed} THEN _lw_value END",
             "_last": f"CASE WHEN {windowed} THEN _ts - pmod(_ts - {p.offset_ms}, {p.slide_ms}) END"},
        ]

    def _value_sql(self, columns: Mapping[str, str]) -> str:
        """The value an element brings to the aggregate, null when it has none the aggregate takes
        (so the element is dead-lettered): a sum or average takes a number only, as the reference
        runtime's :meth:`~lowwater.core.windows.aggregations.BuiltinAggregate.check` says, so a
        column of another type (a STRING, a BOOLEAN: a ``DataFrameSource`` can bring any) makes
        every element of the batch a dead letter with the reference's reason
        (:meth:`BadRecordError.non_numeric`), not a cast."""
        p = self.plan
        if not p.value_field:
            return "1"
        return quote(p.value_field) if self._takes(columns.get(p.value_field)) else "CAST(NULL AS BIGINT)"

    def decimal_overflow(self, failure: BaseException) -> PipelineError | None:
        """The batch's failure said as what it is, where Spark's sum of the value field's decimals
        passed ``DECIMAL(38,s)``, Spark's widest (``[ARITHMETIC_OVERFLOW] Overflow in sum of
        decimals``, whose hint, ``try_sum`` or ``spark.sql.ansi.enabled``, a lowwater user cannot
        take: a user probe, session 65); otherwise None. The reference runtime and the keyed and
        general paths sum Decimals exactly to any size, as Flink's ``BigDecimal`` does."""
        if "Overflow in sum of decimals" not in chain_text(failure):
            return None
        p = self.plan
        return PipelineError(
            f"the {p.aggregate} of the DECIMAL field {p.value_field!r} in a window passed DECIMAL(38,s), the "
            "widest decimal Spark has (38 digits, s of them after the point), on the native path; a rerun stops "
            "here again. Read the field with fewer places (DECIMAL(38,2) holds 36 digits before the "
            "point), on a new checkpoint; the keyed path (SparkRuntime(path=\"keyed\")) sums exactly to any size, "
            "into a row sink, but a DataFrame sink's DECIMAL(38,s) column cannot hold such a total either")

    def _takes(self, value_type: str | None) -> bool:
        """Whether the aggregate takes values of the SQL type ``value_type``."""
        return not self.numeric or value_type is None or value_type in NUMBER_TYPES or \
            value_type.startswith("decimal")

    def _element_sql(self, view: str, columns: Mapping[str, str]) -> str:
        """The batch's elements (``view``, of ``columns``) with the columns of :meth:`_element_layers`,
        one SELECT per layer."""
        ctl = ", _ctl" if self.plan.executor_watermarks else ""
        first, *rest = self._element_layers(columns)
        sql = f"SELECT _partition, _seq, _offset{ctl}, {_select(first)} FROM {view}"
        for layer in rest:
            sql = f"SELECT *, {_select(layer)} FROM ({sql})"
        return sql

    def _exploded_sql(self, view: str, columns: Mapping[str, str], windows: bool = False) -> str:
        """One row per element and window it is in (``_ws``, the window's start; ``_i`` its place
        from the last), and one row (``_i`` 0, ``_ws`` null) per element in none: bad, edge and
        control rows. ``_first`` marks each element's first row (for the per-partition counts).
        With panes (and not ``windows``), one row per element, ``_ws`` its pane's start."""
        p = self.plan
        ctl = ", _ctl" if p.executor_watermarks else ""
        cols = f"_partition, _seq, _offset, _ts, _k, _v, _bad, _tsok, _edge, _last{ctl}"
        elements = self._element_sql(view, columns)
        n = math.ceil(p.size_ms / p.slide_ms)
        if n == 1 or (self.panes and not windows):  # one window (or pane) per element: one projection
            g = self._pane_ms()
            pane = "_last" if n == 1 or g == p.slide_ms else f"_last + (_ts - _last) DIV {g} * {g}"
            return f"SELECT {cols}, {pane} AS _ws, 0 AS _i, _lw_data AS _first FROM ({elements})"
        ws = f"_last - _i * {p.slide_ms}"
        return (f"SELECT {cols}, _i, {ws} AS _ws, (_i = 0 AND _lw_data) AS _first FROM ("
                f"SELECT *, explode(sequence(0, {n - 1})) AS _i FROM ({elements})) "
                f"WHERE _i = 0 OR {ws} > _ts - {p.size_ms}")

    def _aggregate_sql(self, view: str, schema: dict[str, Any], columns: Mapping[str, str]) -> str:
        """ONE aggregation, as SQL text (planned in one call, not one per column): per partition
        and last window start of its elements (``g`` 1) the generators' inputs and counts, whose
        class the driver decides from the start (:class:`_Classes`); per (key, window start)
        (``g`` 0) the partial aggregate. For tumbling windows the two grouping sets share the one
        window column, and every element is one row in each.

        Five aggregates where seven were (about 5% of a steady batch at 100k keys, nothing
        measurable at 1k keys: docs/performance.md): an edge element (``_edge``) is
        the only kind counted in ``n`` with no window, so a partition's edge count is its ``n``
        at ``_last`` null (:meth:`run`); and with tumbling windows an element is one row, so a
        (key, start)'s element count is its ``n`` (no ``count(1)``)."""
        # max() over a string forces a SortAggregate (no hash map for variable-width buffers):
        # three times slower, so the control column is aggregated only when executors send one
        ctl = "max(_ctl)" if self.plan.executor_watermarks else "CAST(NULL AS STRING)"
        # one column for both grouping sets where an element's window (or pane) is its last window's start
        ws = "_last" if self._tumbling() or (self.panes and self._pane_ms() == self.plan.slide_ms) else "_ws"
        aggregates = [
            "max(CASE WHEN _first AND _tsok THEN _ts END) AS max_ts",
            "count(CASE WHEN _first AND NOT _bad THEN 1 END) AS n",
            "count(CASE WHEN _first AND _bad THEN 1 END) AS n_bad",
            *partial_aggregates(self._sql(schema), count=not self._one_row()),
            f"{ctl} AS ctl",
        ]
        return (f"SELECT CAST(grouping(_k) AS INT) AS g, _partition, _last, _k, {ws} AS _ws, {', '.join(aggregates)} "
                f"FROM ({self._exploded_sql(view, columns)}) GROUP BY GROUPING SETS ((_partition, _last), (_k, {ws}))")

    def _tumbling(self) -> bool:
        """One window per element (``size <= slide``): each element is one row of the aggregation."""
        return math.ceil(self.plan.size_ms / self.plan.slide_ms) == 1

    def _pane_able(self) -> bool:
        """Sliding windows (``size > slide``) whose panes are at most :data:`PANES_PER_SLIDE` a slide:
        a new state keeps panes (:attr:`NativeState.panes`), each ``gcd(size, slide)`` long (a slide
        where the size is a multiple of it). Each element is then one row of the batch's aggregation,
        in its pane, where exploded into its windows it was ``size / slide`` rows or so, as in Spark's
        own sliding windows; a window's partials are its panes'. A slide of many short panes (10 s
        sliding by 9.999 s: ten thousand panes of 1 ms a slide) keeps exploding: each pane would be a
        directory of every batch that writes it."""
        p = self.plan
        return p.size_ms > p.slide_ms and p.slide_ms // math.gcd(p.size_ms, p.slide_ms) <= PANES_PER_SLIDE

    def _pane_ms(self) -> int:
        """How long a pane is: every window boundary is one of theirs."""
        return math.gcd(self.plan.size_ms, self.plan.slide_ms)

    def _last_window(self, ws: int) -> int:
        """The start of the last window holding the pane ``ws`` (with panes), else ``ws``."""
        return ws - (ws - self.plan.offset_ms) % self.plan.slide_ms if self.panes else ws

    def _one_row(self) -> bool:
        """Each element is one row of the aggregation: tumbling windows, or panes."""
        return self._tumbling() or self.panes

    def _windows_of(self, pane: int) -> range:
        """The starts of the windows that hold the pane starting at ``pane``: aligned, from the
        first whose end is at or after the pane's to the pane's last window."""
        p = self.plan
        first = pane + self._pane_ms() - p.size_ms
        return range(first + (p.offset_ms - first) % p.slide_ms, self._last_window(pane) + 1, p.slide_ms)

    def _panes_of(self, ws: int) -> range:
        """The starts of the panes of the window starting at ``ws``."""
        return range(ws, ws + self.plan.size_ms, self._pane_ms())

    def _windows_over(self, panes: Iterable[int], lo: int, hi: int) -> tuple[int, list[int]]:
        """Of the windows over ``panes``, those starting in ``(lo, hi]``: how many there are, and
        the panes they hold. O(panes): the windows are counted as runs of starts, not listed."""
        s, offset = self.plan.slide_ms, self.plan.offset_ms
        above_lo = lo + 1 + (offset - lo - 1) % s  # the first aligned start > lo
        spans: list[tuple[int, int]] = []
        read: list[int] = []
        for pane in sorted(panes):
            if pane <= lo:
                continue
            windows = self._windows_of(pane)
            a, b = max(windows.start, above_lo), min(windows[-1], hi)  # windows is never empty
            b -= (b - offset) % s  # the latest aligned start <= hi
            if a <= b:
                spans.append((a, b))
                read.append(pane)
        count, end = 0, None
        for a, b in spans:  # sorted by a, as the panes are; every start is aligned alike
            a = a if end is None else max(a, end + s)
            if a <= b:
                count += (b - a) // s + 1
                end = b if end is None else max(end, b)
        return count, read

    def _over(self, df: DataFrame, sql: Callable[[str], str]) -> DataFrame:
        """The query ``sql(view)`` over the batch ``df``, ``view`` a temporary view of it while the
        query is analysed (the analysed plan holds the batch's own plan, not the view's name)."""
        session = df.sparkSession
        view = f"_lowwater_batch_{id(self):x}"
        df.createOrReplaceTempView(view)
        try:
            return session.sql(sql(view))
        finally:
            session.catalog.dropTempView(view)

    def _write_partials(self, df: DataFrame, schema: dict[str, Any], batch_id: int
                        ) -> tuple[list[Any], list[int]]:
        """Aggregate the batch and write its partials (``g`` 0) to the window store, in ONE Spark
        job, and return what the driver needs of the batch, O(partitions + window starts): the
        per-partition rows (``g`` 1) and the window starts written. These ride along the write as
        ``observe()`` metrics (``collect_list`` and ``collect_set`` skip the nulls of the other
        rows), so the aggregation is neither cached nor computed twice. A replay rewrites the same
        files and observes the same values. Starts the driver finds too late are deleted after."""
        assert self.store is not None
        session = df.sparkSession
        partials = self.partials.over(df, key=schema["value"])
        tasks = write_tasks(self.partial_rows, int(session.conf.get("spark.sql.shuffle.partitions") or 200))
        self.store.append(partials, batch_id, tasks)
        got = self.partials.metrics()
        self.partial_rows = int(got["rows"])
        self.rows_written[batch_id] = self.partial_rows
        return list(got["parts"]), sorted(int(ws) for ws in got["starts"])

    def _partials(self, df: DataFrame, schema: dict[str, Any]) -> DataFrame:
        """The batch's aggregation (:meth:`_aggregate_sql`), observed, and of it the partials the
        window store keeps (``g`` 0, in a window): :meth:`_write_partials`."""
        from pyspark.sql import functions as F

        fields = ("_partition", "_last", "max_ts", "n", "n_bad", "ctl")
        kept = "g = 0 AND _ws IS NOT NULL"
        observed = self.partials.observe(
            self._over(df, lambda view: self._aggregate_sql(view, schema, dict(df.dtypes))),
            F.expr(f"collect_list(CASE WHEN g = 1 THEN struct({', '.join(fields)}) END)").alias("parts"),
            F.expr("collect_set(CASE WHEN g = 0 THEN _ws END)").alias("starts"),
            F.expr(f"count_if({kept})").alias("rows"))
        return observed.filter(kept).selectExpr(
            "_ws AS start", "_k AS key", *partial_columns(self._sql(schema), "n" if self._one_row() else "cnt"))

    def _base(self, df: DataFrame, w: int | None) -> DataFrame:
        """The batch, one row per element, with its columns (:meth:`_element_layers`) and, given the
        watermark ``w`` (a column: spark/literals.py), ``_elate``: all its windows too late. Only
        the late output and the dead letters need it, on the batches that have them."""
        from pyspark.sql import functions as F

        p = self.plan
        for layer in self._element_layers(dict(df.dtypes)):
            df = df.withColumns({name: F.expr(text) for name, text in layer.items()})
        df = df.drop("_lw_value", "_lw_data", "_lw_parsed")
        if w is not None:
            wv = "_lw_prev_watermark"
            df = with_batch_values(df, {wv: w})
            elate = f"coalesce(_last + {p.size_ms - 1 + p.allowed_lateness_ms} <= {wv}, false)"
            df = df.withColumn("_elate", F.expr(elate))
        return df

    # -- outputs ------------------------------------------------------------------------------
    def _fires(self, spark: SparkSession, starts: dict[int, list[int]], schema: dict[str, Any] | None,
               window_range: tuple[int, int] | None = None) -> DataFrame | None:
        """The windows starting at ``starts`` (start -> batches), every key with contents: fire 0.
        With panes, ``starts`` are the panes to read and ``window_range`` ``(lo, hi]`` the starts of
        the windows that fire: each pane's partials count in each of them it is in.

        One SQL text over the store's scan, analysed once: built as a chain of DataFrame calls, each
        call analysed the plan so far again (190-270 ms of the driver's a firing in session 60's
        profile, docs/performance.md), and a sliding window fires in every batch."""
        assert self.store is not None
        if schema is None:
            return None
        agg = self._sql(schema)
        parts = self.store.read(spark, partial_ddl(agg, schema), starts, batch_column=True)
        if parts is None:
            return None
        batches = {b for bs in starts.values() for b in bs}
        stored_rows = sum(self.rows_written[b] for b in batches) if batches <= self.rows_written.keys() else None
        one_task = fires_in_one_task(stored_rows)
        merges = ", ".join(merge_exprs(agg))
        size = self.plan.size_ms
        pairs = None if window_range is None or (stored_rows is not None and stored_rows < self.JOIN_ROWS) \
            else self._pane_windows(starts, *window_range)

        def query(view: str) -> str:
            # one partition when small: the merge below needs no shuffle
            src = f"(SELECT /*+ COALESCE(1) */ * FROM {view})" if one_task else view
            if window_range is None:
                grouped = f"SELECT key, start, {merges} FROM {src} GROUP BY key, start"
            elif pairs:  # each pane's rows joined to the windows that fire over it
                table = ", ".join(f"({bigint_sql(pane)}, {bigint_sql(ws)})" for pane, ws in pairs)
                grouped = (f"SELECT key, _lw_w AS start, {merges} FROM {src} "
                           f"JOIN (VALUES {table}) AS _lw_f(_lw_p, _lw_w) ON start = _lw_p GROUP BY key, _lw_w")
            else:
                # lo and hi as literals in a lambda (_windows_sql), where a broadcast one-row table of them
                # cost a job of its own and, with adaptive execution, a planning more (docs/performance.md)
                lo, hi = window_range
                windows = self._windows_sql(max(lo, min(starts) - size), hi)  # no overflow from MIN
                grouped = (f"SELECT key, _lw_w AS start, {merges} FROM (SELECT *, explode({windows}) AS _lw_w "
                           f"FROM {src}) GROUP BY key, _lw_w")
            return (  # RESULT_COLUMNS, in one projection
                f"SELECT key, start AS window_start, start + {size} AS window_end, "
                f"{value_expr(agg, 'acc', 'n')} AS value, 0 AS fire_index, "
                f"{window_sql('start', f'start + {size}')} AS window, "
                f"1 AS _o1, start AS _o2, CAST(NULL AS BIGINT) AS _o3, CAST(NULL AS BIGINT) AS _o4 FROM ({grouped})")

        return self._over(parts, query)

    def _pane_windows(self, panes: Iterable[int], lo: int, hi: int) -> list[tuple[int, int]] | None:
        """The (pane, window) pairs of the windows starting in ``(lo, hi]`` over ``panes``, or ``None``
        when there are more than :attr:`JOIN_PAIRS` (a slide of milliseconds: a table too big to be
        SQL text)."""
        pairs: list[tuple[int, int]] = []
        for pane in panes:
            pairs += [(pane, ws) for ws in self._windows_of(pane) if lo < ws <= hi]
            if len(pairs) > self.JOIN_PAIRS:
                return None
        return pairs

    def _late_fires(self, spark: SparkSession, exploded: DataFrame, starts: list[int], st: NativeState, w: int,
                    schema: dict[str, Any]) -> DataFrame:
        """Each late-but-allowed element (of a window in ``starts``) re-fires its window with full
        contents, in arrival order: the stored contents (batches before this one) plus a running
        aggregate of this batch's late-allowed elements of the same (key, window)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        assert self.store is not None
        agg = self._sql(schema)
        p = self.plan
        wv, end = "_lw_prev_watermark", f"_ws + {p.size_ms - 1}"
        # a float key as Spark groups it, the key of the stored partials: -0.0 is 0.0 (canonical_key);
        # the element's own would name a re-firing's key -0.0 where its first firing said 0.0
        key_type = dict(exploded.dtypes).get("_k")
        key = f"_k + CAST(0 AS {key_type})" if key_type in ("double", "float") else "_k"  # of its own type
        late = with_batch_values(exploded, {wv: w}).filter(
            f"{end} <= {wv} AND {end} + {p.allowed_lateness_ms} > {wv}").selectExpr(
            f"{key} AS key", "_ws AS start", "_v AS v", "_seq", "_partition", "_offset")
        if st.panes:  # each window from its panes, the batches that wrote them late marked for it
            stored = self._late_panes(spark, starts, st, schema)
        else:
            before = {ws: st.open_starts.get(ws, []) for ws in starts}
            stored = self.store.read(spark, partial_ddl(agg, schema), before,
                                     late={ws: st.late_written.get(ws, []) for ws in starts})
        if stored is not None:
            base = stored.groupBy("key", "start").agg(*[F.expr(e) for e in merge_exprs(agg, "b_", late=True)])
            late = late.join(base, ["key", "start"], "left")
        else:
            late = late.selectExpr("*", *[f"CAST(NULL AS {t}) AS {c}" for c, t in base_types(agg)])
        order = Window.partitionBy("key", "start").orderBy("_seq", "_partition", "_offset") \
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        arrival = Window.partitionBy("key", "start").orderBy("_seq", "_partition", "_offset")
        late = late.withColumn("_rank", F.row_number().over(arrival) - 1)
        late = late.withColumns(running_accumulators(agg, order))
        size = self.plan.size_ms
        n = "(coalesce(b_n, 0) + _rank + 1)"
        fire = "(CASE WHEN coalesce(b_n, 0) - coalesce(b_nl, 0) > 0 THEN 1 ELSE 0 END + coalesce(b_nl, 0) + _rank)"
        return late.selectExpr(  # RESULT_COLUMNS, in one projection
            "key", "start AS window_start", f"start + {size} AS window_end",
            f"{value_expr(agg, 'acc', n)} AS value", f"CAST({fire} AS INT) AS fire_index",
            f"{window_sql('start', f'start + {size}')} AS window",
            "0 AS _o1", "_seq AS _o2", "CAST(_partition AS BIGINT) AS _o3", "_offset AS _o4")

    def _late_panes(self, spark: SparkSession, starts: list[int], st: NativeState, schema: dict[str, Any]
                    ) -> DataFrame | None:
        """The stored partials of the windows ``starts`` (late but allowed), from their panes, in one
        scan: each partial counted in each of those windows it is in, with ``nl`` its ``n`` where its
        batch wrote the pane late for that window (:attr:`NativeState.late_written`, per window), else
        0. Which windows, and which (window, batch) pairs were late, are small tables joined in (data,
        not literals: spark/literals.py). A scan (two) per window re-fired took minutes where a late
        element re-fired hundreds of windows of a short slide (probe P, session 60)."""
        assert self.store is not None
        panes = {pane: st.open_starts[pane] for ws in starts for pane in self._panes_of(ws) if pane in st.open_starts}
        scan = self.store.read(spark, partial_ddl(self._sql(schema), schema), panes, batch_column=True)
        if scan is None:
            return None
        columns = ", ".join(f"x.{c}" for c in scan.columns if c not in ("batch", "start"))
        windows = self._windows_sql(min(starts) - 1, max(starts))
        chosen = f"(VALUES {', '.join(f'({bigint_sql(ws)})' for ws in starts)}) AS _lw_s(_lw_sw)"
        pairs = sorted({(ws, b) for ws in starts for b in st.late_written.get(ws, [])})
        rows = ", ".join(f"({bigint_sql(ws)}, {bigint_sql(b)})" for ws, b in pairs)
        late = f"(VALUES {rows}) AS _lw_m(_lw_mw, _lw_mb)"

        def query(view: str) -> str:
            sql = (f"SELECT {columns}, x._lw_w AS start, "
                   f"{'CASE WHEN _lw_m._lw_mb IS NULL THEN 0 ELSE x.n END' if pairs else 'CAST(0 AS BIGINT)'} AS nl "
                   f"FROM (SELECT *, explode({windows}) AS _lw_w FROM {view}) x JOIN {chosen} ON x._lw_w = _lw_sw")
            return sql + (f" LEFT JOIN {late} ON x._lw_w = _lw_mw AND x.batch = _lw_mb" if pairs else "")

        return self._over(scan, query)

    def _windows_sql(self, lo: int, hi: int) -> str:
        """SQL for the starts of the windows in ``(lo, hi]`` that hold a partial's pane (its ``start``),
        in order: from the first aligned start above ``lo`` and the pane's first window, to the pane
        itself and ``hi``. Built in a lambda, which Spark evaluates without generated code, so ``lo``
        and ``hi`` can be literals and the code is the same every batch (spark/literals.py): a
        ``sequence`` of the windows themselves, not a filter of all ``size / slide`` windows of the
        pane (a thousand for a window of 10 s sliding by 10 ms)."""
        slide, size, offset, g = self.plan.slide_ms, self.plan.size_ms, self.plan.offset_ms, self._pane_ms()
        # as _windows_of: the pane's first window (aligned, its end at or after the pane's) and its last
        first_window = f"p + {g - size} + pmod({offset} - (p + {g - size}), {slide})"
        above_lo = f"{bigint_sql(lo)} + 1 + pmod({offset} - {bigint_sql(lo)} - 1, {slide})"
        first = f"greatest({first_window}, {above_lo})"
        last = f"least(p - pmod(p - {offset}, {slide}), {bigint_sql(hi)})"
        return (f"flatten(transform(array(start), p -> CASE WHEN {first} <= {last} "
                f"THEN sequence({first}, {last}, CAST({slide} AS BIGINT)) ELSE CAST(array() AS ARRAY<BIGINT>) END))")

    def _result_rows(self, df: DataFrame) -> list[Any]:
        rows = df.orderBy("_o1", "_o2", "_o3", "_o4").select(
            "key", "window_start", "window_end", "value", "fire_index").collect()
        return [WindowResult(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def _late_frame(self, base: DataFrame) -> DataFrame:
        """The late output: the element's fields, its source position and the windows that rejected it."""
        p = self.plan
        fields = [f for f in p.source.fields() if f in base.columns]
        part, off, windows = late_names(fields)
        n = math.ceil(p.size_ms / p.slide_ms)
        rejected = (f"filter(transform(sequence(0, {n - 1}), i -> named_struct('start', _last - i * {p.slide_ms}, "
                    f"'end', _last - i * {p.slide_ms} + {p.size_ms})), w -> w.start > _ts - {p.size_ms})")
        return base.selectExpr(*[quote(f) for f in fields], f"_partition AS {part}", f"_offset AS {off}",
                               f"{rejected} AS {quote(windows)}", "_seq", "_partition", "_offset")

    def _late_rows(self, df: DataFrame) -> list[dict[str, Any]]:
        fields = [f for f in self.plan.source.fields() if f in df.columns]
        rows = df.orderBy("_seq", "_partition", "_offset").select(*[quote(f) for f in fields]).collect()
        return [{f: r[i] for i, f in enumerate(fields)} for r in rows]

    def _reason_sql(self, base: DataFrame) -> str:
        """A dead letter's reason, as SQL over the columns of :meth:`_base`: one expression for the
        DataFrame letters and the row lists alike. In the reference runtime's order: a timestamp
        field's assigner judges the timestamp first, then the window the key, the value and the
        range's edge; the source's timestamp (or a Python assigner's marker) is the window's to
        judge, after the key and the value. Until session 58 the timestamp came first in both cases,
        here and in a second, Python copy of the order for row lists (a user probe)."""
        p = self.plan
        field = p.timestamp_field or BadRecordError.timestamp_origin([p.strategy.timestamp_origin])
        value_reason = literal(BadRecordError.missing("value", str(p.value_field)))
        value_type = dict(base.dtypes).get(p.value_field) if p.value_field else None
        takes = value_type is None or self._takes(value_type)
        if p.value_field and value_type is not None and not takes:
            value_reason = (f"CASE WHEN {quote(p.value_field)} IS NULL THEN {value_reason} "
                            f"ELSE {_python_repr_sql(p.value_field, value_type)} END")
        # a value column this batch lacks is judged by the ELSE below
        value_bad = "false" if value_type is None else f"{quote(str(p.value_field))} IS NULL" if takes else "true"
        timestamp = [("_ts IS NULL", literal(BadRecordError.missing_timestamp(field))),
                     (f"_ts = {MIN_TIMESTAMP}", literal(BadRecordError.no_timestamp_marker(field)))]
        key_and_value = [("_k IS NULL", literal(BadRecordError.missing("key", str(p.key_field)))),
                         (value_bad, value_reason)]
        edge = ("_edge", f"concat('timestamp ', _ts, ' is within {self.margin_ms} ms of the 64-bit range''s end: its "
                         f"window or cleanup time cannot be represented')")
        reasons = [
            ("_why IS NOT NULL", "_why") if "_why" in base.columns else None,
            _out_of_range_sql(p.timestamp_field, dict(base.dtypes).get(p.timestamp_field or "")),
            *(timestamp + key_and_value if p.timestamp_field else key_and_value + timestamp), edge,
        ]
        if "_corrupt" in base.columns:
            # BadRecordError.unparsed: the reader's reason as Python's repr shows it, on every path
            reasons.insert(0, ("_corrupt IS NOT NULL",
                               f"concat('record does not parse: ', {python_repr_sql('substr(_corrupt, 1, 200)')})"))
        whens = " ".join(f"WHEN {c} THEN {r}" for c, r in (x for x in reasons if x is not None))
        return f"CASE {whens} ELSE {value_reason} END"

    def _dead_frame(self, base: DataFrame) -> DataFrame:
        """Dead letters as a DataFrame: reason, partition, offset, file, record (the fields as JSON)."""
        fields = [f for f in self.plan.source.fields() if f in base.columns]
        file = "_file" if "_file" in base.columns else "CAST(NULL AS STRING)"
        record = f"to_json(named_struct({', '.join(f'{literal(f)}, {quote(f)}' for f in fields)}))"
        if "_corrupt" in base.columns:  # a record that did not parse has no fields: what was read, if the
            raw = "_raw" if "_raw" in base.columns else "CAST(NULL AS STRING)"  # source keeps it ('{}' was)
            record = f"CASE WHEN _corrupt IS NULL THEN {record} ELSE {raw} END"
        return base.selectExpr(f"{self._reason_sql(base)} AS reason", "_partition AS partition",
                               "_offset AS offset", f"{file} AS file", f"{record} AS record")

    def _dead_rows(self, base: DataFrame) -> list[dict[str, Any]]:
        """Records that cannot be windowed, with the reason (:meth:`_reason_sql`) and their source
        position (for row-list sinks), the record's fields as Python values."""
        from pyspark.sql import functions as F

        out = []
        corrupt = "_corrupt" in base.columns
        bad = base.filter("_bad OR _edge").withColumn("_lw_reason", F.expr(self._reason_sql(base)))
        for r in bad.orderBy("_seq", "_partition", "_offset").collect():
            if corrupt and r["_corrupt"] is not None:
                out.append(unparsed_dead_letter(r))
                continue
            record = {f: r[f] for f in self.plan.source.fields()}
            out.append({"reason": r["_lw_reason"], "partition": r["_partition"], "offset": r["_offset"],
                        "record": record})
        return out

    def _metrics(self, st: NativeState, rows_in: int, windowed: int, late: int, dead: int,
                 fired_starts: int, refired_starts: int) -> dict[str, Any]:
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
            "windows_fired": 0,  # until the engine has counted the results (record_fired)
            "window_starts_fired": fired_starts,
            "window_starts_refired": refired_starts,
            "open_windows": None,
            "open_window_starts": self._windows_over(st.open_starts, st.watermark - self.plan.size_ms
                                                     - self.plan.allowed_lateness_ms + 1,
                                                     max(st.open_starts))[0] if st.panes and st.open_starts
            else len(st.open_starts),
        }


class _Classes:
    """What the previous watermark ``w`` makes of a window start ``ws`` (its end ``ws + size - 1``):
    on time (after ``w``), late but allowed (fires at once: ``end <= w < end + lateness``) or too
    late (``end + lateness <= w``). An element's class is its windows': it is late (the late
    output) when its last window is too late. ``w`` at ``MIN_TIMESTAMP``: nothing is late."""

    def __init__(self, w: int, size_ms: int, lateness_ms: int) -> None:
        self.w, self.size, self.lateness, self.never = w, size_ms, lateness_ms, w == MIN_TIMESTAMP

    def too_late(self, ws: int) -> bool:
        return not self.never and ws + self.size - 1 + self.lateness <= self.w

    def late_allowed(self, ws: int) -> bool:
        return not self.never and ws + self.size - 1 <= self.w < ws + self.size - 1 + self.lateness


def _select(columns: dict[str, str]) -> str:
    return ", ".join(f"{text} AS {name}" for name, text in columns.items())


NUMBER_TYPES = (*INTEGRAL, "float", "double")
"""The SQL types a sum or average takes, with ``decimal(p,s)``."""


def _out_of_range_sql(field: str | None, field_type: str | None) -> tuple[str, str] | None:
    """The condition and SQL of :meth:`BadRecordError.out_of_range`'s reason, for a ``DOUBLE`` or
    ``FLOAT`` timestamp field whose finite value ``TRY_CAST`` to ``BIGINT`` could not hold (the
    reference runtime's assigner says so; this path said "missing or non-numeric"). The value is
    shown as Python's ``repr`` shows a float that large: ``1e+19``, ``9.3e+18`` (Java writes
    ``1.0E19``)."""
    if field is None or field_type not in ("double", "float"):
        return None
    v = f"CAST({quote(field)} AS DOUBLE)"
    shown = f"regexp_replace(regexp_replace(CAST({v} AS STRING), '\\\\.0E', 'E'), 'E', 'e+')"
    prefix = literal(BadRecordError.out_of_range(field, 0.0).rsplit(": ", 1)[0] + ": ")
    return (f"_ts IS NULL AND {v} IS NOT NULL AND NOT isnan({v}) AND abs({v}) <> double('infinity')",
            f"concat({prefix}, {shown})")


def _python_repr_sql(field: str, value_type: str) -> str:
    """SQL for :meth:`BadRecordError.non_numeric`'s reason, the value shown as Python's ``repr``
    shows it on the reference runtime and in a row-list sink: a boolean as ``True``, a string in
    the quotes ``repr`` picks, with backslash, newline, return and tab escaped (other control
    characters, which ``repr`` escapes too, are shown as they are)."""
    v = quote(field)
    prefix = literal(f"non-numeric value ({field}): ")
    if value_type == "boolean":
        shown = f"CASE WHEN {v} THEN 'True' ELSE 'False' END"
    elif value_type == "string":
        shown = python_repr_sql(v)
    else:
        shown = f"CAST({v} AS STRING)"
    return f"substr(concat({prefix}, {shown}), 1, 200)"
