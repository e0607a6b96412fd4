"""The keyed path: window operators of any kind, per key, on the executors.

Session windows, custom and count triggers, process window functions, user aggregates,
Python maps, filters and key selectors: what the native path cannot express in SQL runs
here, and no longer in the driver's one Python process. The pipeline's shape::

    per source: map/filter/flat_map/assign_timestamps_and_watermarks (any order, one strategy)
      [-> union(...) -> map/filter/flat_map]
      -> key_by(anything) -> window(any assigner, trigger, contents, function, lateness)
                             | process(KeyedProcessFunction)
      -> sinks on the operator's output, its late output and its side outputs

    or two such inputs: connect(...).key_by(k1, k2).process(KeyedCoProcessFunction)

Per micro-batch ``k`` (shared/DESIGN.md §2):

1. **Per lane, on the executors** (``groupBy(_source, _partition).applyInArrow``, rows in
   offset order; a lane is one partition of one source): the Python operators on the way,
   the timestamp assigner and the watermark generator, with the lane's generator state from
   the driver and the batch's clock. Each lane returns its elements (key text, timestamp, the
   value pickled) and one control row: its generator's new state as plain data and the
   watermark events it emitted.
2. **On the driver**: the control rows (O(lanes)) go through each input's sources'
   multiplexers and the valve that unites them, then the inputs' combination, as the
   reference runtime's operator does: the batch's watermark steps, the last one ``W_k``.
   Elements of batch ``k`` are judged against ``W_{k-1}``.
3. **Per key, on the executors**: the elements and the stored state rows are cogrouped by a hash
   bucket of the key, in one exchange. Each bucket takes the newest stored row per key, and visits
   the keys with elements, or with a timer due by ``W_k`` or by the batch's processing time
   (untouched keys' rows cross into Python as bytes and are not unsealed). Each bucket runs the
   reference window operator (:class:`~lowwater.runtime.nodes.WindowNode`;
   for event-time sessions with the event-time trigger, the
   :class:`~lowwater.core.windows.session_operator.SessionWindowOperator`, which does exactly what
   it does, faster): the elements in arrival order at ``W_{k-1}``, then each step up to ``W_k``,
   then processing time. What it emits, and each visited key's new state, come back as rows.
   Sessions with a built-in sum, count, min or max of an integer field run in columns instead,
   for every key none of whose elements is late (:mod:`.keyed_sessions`).
4. Keyed state is Parquet under ``<checkpoint>/lowwater/keyed/batch=<k>/``: one row per key the
   batch visited (``live`` false when the key's state is gone), its slice sealed
   (:mod:`.sealed`). The state as of ``k - 1`` is the newest row per key over the directories
   the control state lists; every ``compact_every`` batches one directory gets the whole
   state, and the older ones are deleted one batch later. A replay of ``k`` rewrites the same
   directory with the same rows.

The driver holds O(lanes + buckets) per batch: generator states, watermarks, counters.
Results come to the driver only for row-list sinks, which ask for them.
"""

from __future__ import annotations

import functools
import json
import pickle
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lowwater.core.clock import ManualClock
from lowwater.core.errors import BadRecordError, LowwaterError, UserFunctionError
from lowwater.core.keys import canonical_key
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.time_characteristic import TimeCharacteristic
from lowwater.core.watermarks import (
    CombinedWatermarkStatus,
    FieldTimestampAssigner,
    PartialWatermark,
    RecordingOutput,
    WatermarkEvent,
    WatermarkStrategy,
)
from lowwater.core.watermarks.assigner import assigned_timestamp, timestamp_or_none
from lowwater.core.windows.aggregations import BuiltinAggregate, Count
from lowwater.core.windows.contents import AggregatingContents
from lowwater.core.windows.events import RESULT_FIELDS
from lowwater.graph import PipelineLike, as_pipeline
from lowwater.graph.transformations import (
    AssignTransformation,
    CoTransformation,
    KeyedCoProcessTransformation,
    KeyedProcessTransformation,
    OneInputTransformation,
    OutputTag,
    SideOutputTransformation,
    SourceTransformation,
    Transformation,
    UnionTransformation,
    WindowTransformation,
)
from lowwater.metrics.dead_letters import letter_from_json, letter_json
from lowwater.runtime.nodes import _fn_name, _lane_labels, _stateless_label
from lowwater.runtime.nodes.window import late_counts
from lowwater.runtime.operator_inputs import combine_input_steps
from lowwater.runtime.records import LaneEvent
from lowwater.runtime.union_input import UnionInput
from lowwater.spark.executor_watermarks import PartitionState, new_partition
from lowwater.spark.fs import CheckpointFS, join
from lowwater.spark.json_rows import (
    JsonFrames,
    element_seed,
    json_row,
    late_document,
    merge_orders,
    merge_shapes,
    reported,
)
from lowwater.spark.keyed_sessions import ColumnarSessions, result_value
from lowwater.spark.native_sql import quote, sql_of
from lowwater.spark.native_state import _exchange, _exchange_data
from lowwater.spark.outputs import Output, empty_frame
from lowwater.spark.sealed import StateKey
from lowwater.spark.session import settings_for
from lowwater.spark.snapshot import restore, to_data
from lowwater.spark.sources import SparkSource
from lowwater.spark.window_store import check_files, replace_with_parquet

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["KeyedOutput", "KeyedPlan", "KeyedProcessor", "KeyedState", "keyed_plan", "window_result_seed"]

FORMAT = 2
"""2: lanes are (source, partition), several sources and two inputs (1: one source)."""
COMPACT_EVERY = 20
COMPACT_READ = 2
"""A batch that read more than this many stored rows per live key (the versions of keys that
later batches wrote again) makes the next batch compact, whatever ``compact_every`` says."""

_A_SCHEMA = ("_source INT, _partition INT, _offset BIGINT, _seq BIGINT, _sub INT, _ts BIGINT, _kb STRING, "
             "_el BINARY, _dead STRING, _ctl STRING")
_A_COLUMNS = (("_source", "int32"), ("_partition", "int32"), ("_offset", "int64"), ("_seq", "int64"),
              ("_sub", "int32"), ("_ts", "int64"), ("_kb", "string"), ("_el", "binary"), ("_dead", "string"),
              ("_ctl", "string"))
_B_COLUMNS = (("kind", "string"), ("_kb", "string"), ("o1", "int64"), ("o2", "int64"), ("o3", "int64"),
              ("o4", "int64"), ("o5", "int64"), ("blob", "binary"), ("next_event", "int64"),
              ("next_proc", "int64"), ("live", "bool_"), ("json", "string"))
_B_SCHEMA = ("kind STRING, _kb STRING, o1 BIGINT, o2 BIGINT, o3 BIGINT, o4 BIGINT, o5 BIGINT, blob BINARY, "
             "next_event BIGINT, next_proc BIGINT, live BOOLEAN, json STRING")
_STATE_SCHEMA = "_kb STRING, _v BIGINT, state BINARY, next_event BIGINT, next_proc BIGINT, live BOOLEAN"


@dataclass(frozen=True)
class Branch:
    """One source's way to the keyed operator."""

    source: SparkSource
    chain: tuple[tuple[str, Any, str], ...]
    """From the source down: (kind, function or strategy, operator name)."""
    """From the source to the operator: ``("map" | "filter" | "flat_map", fn)`` or ``("assign", strategy)``
    (exactly one), through any union on the way."""
    strategy: WatermarkStrategy[Any]
    input: int
    """The operator input it reaches: 0, or 1 for the second input of a keyed ``connect``."""
    name: str = ""
    """The source's label in its dead letters and late elements when there are several
    (:meth:`~lowwater.graph.pipeline.Pipeline.source_labels`: its name, unless two sources share it)."""


@dataclass(frozen=True)
class KeyedPlan:
    branches: tuple[Branch, ...]
    """One per source, in the order the compiled job numbers them (the ``_source`` column)."""
    operator: WindowTransformation | KeyedProcessTransformation | KeyedCoProcessTransformation
    outputs: tuple[OutputTag | None, ...]
    """Per sink of the pipeline (in ``env.sinks`` order): ``None`` for the operator's output, else
    the side output's tag."""

    @property
    def source(self) -> SparkSource:
        return self.branches[0].source

    @property
    def key_selectors(self) -> tuple[Any, ...]:
        t = self.operator
        if isinstance(t, KeyedCoProcessTransformation):
            return (t.key_selector1, t.key_selector2)
        return (t.key_selector,)

    @property
    def direct(self) -> bool:
        return all(kind == "assign" for b in self.branches for kind, *_ in b.chain)


def keyed_plan(pipeline: PipelineLike) -> tuple[KeyedPlan | None, str]:
    """The keyed plan, or ``None`` and the reason the pipeline needs the general path."""
    env = as_pipeline(pipeline)
    if env.time_characteristic is TimeCharacteristic.PROCESSING_TIME:
        return None, "the processing-time characteristic"
    # ingestion time: a source without a strategy gets the clock's timestamps (as the reference runtime's)
    ingestion = env.time_characteristic is TimeCharacteristic.INGESTION_TIME
    walked = env.walk()
    if any(isinstance(t, CoTransformation) for t in walked):
        return None, "connect without key_by (a CoMapFunction)"
    operators = [t for t in walked if isinstance(t, WindowTransformation | KeyedProcessTransformation
                                                  | KeyedCoProcessTransformation)]
    if len(operators) != 1:
        return None, "not exactly one window or keyed process operator"
    w = operators[0]
    outputs: list[OutputTag | None] = []
    for s in env.sinks:
        if s.input is w:
            outputs.append(None)
        elif isinstance(s.input, SideOutputTransformation) and s.input.input is w:
            outputs.append(s.input.tag)
        else:
            return None, f"sink {s.name!r} is not on the operator's output or one of its side outputs"
    found: list[tuple[SourceTransformation, tuple[tuple[str, Any, str], ...], int]] = []

    def climb(up: Transformation, below: list[tuple[str, Any, str]], input_index: int) -> str | None:
        chain = list(below)  # from the operator upwards
        while not isinstance(up, SourceTransformation):
            if isinstance(up, OneInputTransformation):
                chain.append((up.kind, up.fn, up.name))
            elif isinstance(up, AssignTransformation):
                chain.append(("assign", up.strategy, up.name))
            elif isinstance(up, UnionTransformation):
                if any(kind == "assign" for kind, *_ in chain):
                    return "a watermark strategy after a union"
                for member in up.members:
                    why = climb(member, chain, input_index)
                    if why is not None:
                        return why
                return None
            else:
                return f"{type(up).__name__} between a source and the keyed operator"
            up = up.input
        if up.strategy is not None:
            chain.append(("assign", up.strategy, up.name))
        elif ingestion:
            chain.append(("assign", WatermarkStrategy.for_ingestion_time(), up.name))
        found.append((up, tuple(reversed(chain)), input_index))
        return None

    for i, upstream in enumerate(w.inputs):
        why = climb(upstream, [], i)
        if why is not None:
            return None, why
    order = {t.id: k for k, t in enumerate(env.sources)}  # the _source column (general.read_sources)
    if len({order[t.id] for t, _, _ in found}) != len(found):
        return None, "a source reaches the keyed operator more than once"
    branches: list[Branch | None] = [None] * len(order)
    labels = env.source_labels()
    for t, chain, input_index in found:
        strategies = [fn for kind, fn, _ in chain if kind == "assign"]
        if len(strategies) != 1:
            return None, "no watermark strategy" if not strategies else "more than one watermark strategy"
        if not isinstance(t.source, SparkSource):
            return None, f"{type(t.source).__name__} cannot be read by Spark"
        branches[order[t.id]] = Branch(t.source, chain, strategies[0], input_index, labels.get(t.id, t.name))
    if any(b is None for b in branches):
        return None, "a source that does not reach the keyed operator"
    return KeyedPlan(tuple(b for b in branches if b is not None), w, tuple(outputs)), "keyed"


# -- the control plane ------------------------------------------------------------------------
Lane = tuple[int, int]
"""``(source, partition)``, as the reference runtime numbers lanes."""


@dataclass
class KeyedState:
    """What the driver keeps: per lane (source, partition) its generator; per operator input the
    sources' multiplexers and the valve that unites them; the inputs' combination (as the
    reference runtime's :class:`~lowwater.runtime.nodes._SingleLaneNode` keeps them)."""

    clock: ManualClock = field(default_factory=ManualClock)
    inputs: list[UnionInput] = field(default_factory=list)
    combined: CombinedWatermarkStatus = field(default_factory=CombinedWatermarkStatus)
    partials: list[PartialWatermark] = field(default_factory=list)
    partitions: dict[Lane, PartitionState] = field(default_factory=dict)
    started: bool = False
    state_dirs: list[int] = field(default_factory=list)
    """The batches whose ``keyed/batch=<k>`` directories hold the keyed state (newest row per key wins)."""
    pending_delete: list[int] = field(default_factory=list)
    compact_next: bool = False
    """The last batch read more than :data:`COMPACT_READ` times the rows the state holds: the
    next one compacts."""
    ended_ms: int | None = None
    """The processing time the end-of-input step kept (where the last batch left it), once the input
    ended: the operators of every later batch see it, so a processing-time timer or window still
    pending at the end never fires, as Flink's end of input quiesces the processing-time service.
    Until session 62 a later run (the same command again, with nothing new) fired them with its own
    clock and wrote their results after the end (a user probe)."""
    totals: dict[str, int] = field(default_factory=dict)
    late_by_partition: dict[str, int] = field(default_factory=dict)
    """Late elements by lane label (``partition_watermarks``' names: ``source:partition`` with
    several sources)."""
    metrics: dict[str, Any] = field(default_factory=dict)
    schemas: dict[str, str] = field(default_factory=dict)
    """Per output a DataFrame sink takes (``result``, ``side:<i>``), the schema (Spark's JSON) its
    DataFrames have had so far: its columns keep their types from batch to batch and across
    restarts (:meth:`~lowwater.spark.json_rows.JsonFrames.settled`)."""

    @staticmethod
    def for_inputs(n: int) -> KeyedState:
        st = KeyedState(inputs=[UnionInput(keep_history=False) for _ in range(n)],
                        partials=[PartialWatermark() for _ in range(n)])
        for partial in st.partials:
            st.combined.add(partial)
        return st

    @property
    def watermark(self) -> int:
        """The operator's current watermark (the last step it moved to)."""
        return self.combined.combined_watermark

    def lane_event(self, plan: KeyedPlan, lane: Lane, event: LaneEvent) -> None:
        self.inputs[plan.branches[lane[0]].input].on_lane_event(lane, event)


def _union_data(ui: UnionInput) -> dict[str, Any]:
    return {"sources": [[g, _exchange_data(ex), ui.channel[g]] for g, ex in ui.sources.items()],
            "valve": {"channels": [[c.watermark, c.idle, c.aligned] for c in ui.valve.channels],
                      "last": ui.valve.last_output_watermark, "idle": ui.valve.idle},
            "output_idle": ui._out.idle, "advanced_once": bool(ui.advanced_once)}


def _union(data: dict[str, Any]) -> UnionInput:
    ui = UnionInput(keep_history=False)
    for g, ex, channel in data["sources"]:
        ui.sources[int(g)] = _exchange(ex, lane=tuple)
        ui.channel[int(g)] = int(channel)
    for w, idle, aligned in data["valve"]["channels"]:
        c = ui.valve.channels[ui.valve.add_channel()]
        c.watermark, c.idle, c.aligned = int(w), bool(idle), bool(aligned)
    ui.valve.last_output_watermark = int(data["valve"]["last"])
    ui.valve.idle = bool(data["valve"]["idle"])
    # what the valve last told the operator: an idle input that turns active reports it
    ui._out.idle = bool(data.get("output_idle", data["valve"]["idle"]))
    ui.advanced_once = bool(data["advanced_once"])
    return ui


def state_to_json(st: KeyedState) -> dict[str, Any]:
    return {"format": FORMAT, "path": "keyed", "clock_ms": st.clock.now_ms(), "started": st.started,
            "inputs": [_union_data(ui) for ui in st.inputs],
            "combined": {"watermark": st.combined.combined_watermark, "idle": st.combined.idle,
                         "partials": [[p.watermark, p.idle] for p in st.partials]},
            "executor": [[src, p, c.now_ms(), to_data(pw)] for (src, p), (c, pw) in st.partitions.items()],
            "state_dirs": list(st.state_dirs), "pending_delete": list(st.pending_delete),
            "compact_next": st.compact_next, "ended_ms": st.ended_ms, "totals": dict(st.totals),
            "late_by_partition": {str(p): n for p, n in st.late_by_partition.items()},
            "metrics": st.metrics, "schemas": dict(st.schemas)}


def state_from_json(data: dict[str, Any], plan: KeyedPlan) -> KeyedState:
    if data.get("format") != FORMAT or data.get("path") != "keyed":
        from lowwater.core.errors import ConfigurationError

        raise ConfigurationError("checkpoint_location", "the checkpoint's state was not written by the keyed path "
                                                        "of this lowwater version: use a new checkpoint")
    st = KeyedState.for_inputs(0)
    st.clock.set(int(data["clock_ms"]))
    st.started = bool(data["started"])
    st.inputs = [_union(ui) for ui in data["inputs"]]
    for w, idle in data["combined"]["partials"]:
        partial = PartialWatermark()
        partial.watermark, partial.idle = int(w), bool(idle)
        st.partials.append(partial)
        st.combined.add(partial)
    st.combined.combined_watermark = int(data["combined"]["watermark"])
    st.combined.idle = bool(data["combined"]["idle"])
    for src, p, clock_ms, tree in data["executor"]:
        clock, pw = new_partition(plan.branches[int(src)].strategy, int(p))
        restore(tree, pw)
        clock.set(int(clock_ms))
        st.partitions[(int(src), int(p))] = (clock, pw)
    st.state_dirs = [int(b) for b in data["state_dirs"]]
    st.pending_delete = [int(b) for b in data["pending_delete"]]
    st.compact_next = bool(data.get("compact_next", False))
    if "ended_ms" in data:
        st.ended_ms = None if data["ended_ms"] is None else int(data["ended_ms"])
    elif st.combined.combined_watermark == MAX_TIMESTAMP:  # ended before session 62, which keeps no ended_ms:
        # where the end step left processing time (it moves no partition's clock)
        st.ended_ms = max((clock.now_ms() for clock, _ in st.partitions.values()), default=st.clock.now_ms())
    st.totals = {k: int(v) for k, v in data["totals"].items()}
    st.late_by_partition = {str(p): int(n) for p, n in data["late_by_partition"].items()}
    st.metrics = dict(data.get("metrics") or {})
    st.schemas = {str(k): str(v) for k, v in (data.get("schemas") or {}).items()}
    return st


@dataclass
class KeyedOutput:
    per_sink: list[Output]
    """Per sink: the operator's output or side output it takes, as a DataFrame for a DataFrame sink
    (built by Spark from JSON rows on the executors), as Python objects for a row-list sink."""
    metrics: dict[str, Any]
    dead: list[dict[str, Any]]
    persisted: list[DataFrame] = field(default_factory=list)
    """Cached frames the outputs read: the caller unpersists them once every sink has written."""


class _JsonOutput(Output):
    """One kind of stage B's rows: their JSON as a DataFrame (built before the batch's state is
    committed, with the schema the output keeps: :meth:`KeyedProcessor._outputs`), their pickled
    values as rows."""

    def __init__(self, frame: DataFrame | None, to_rows: Any, df: DataFrame | None) -> None:
        super().__init__(frame, to_rows)
        self._df = df

    def dataframe(self) -> DataFrame | None:
        return self._df


def _dumps(value: Any) -> bytes:
    """A value in transit between the stages (never stored): :func:`~lowwater.spark.sealed.dumps`."""
    from lowwater.spark.sealed import dumps

    return dumps(value)


def spark_hash_int(value: int) -> int:
    """Spark's ``hash()`` of one ``INT`` column (``Murmur3Hash``: ``Murmur3_x86_32.hashInt`` with
    seed 42), a signed 32-bit int: what ``HashPartitioning`` takes modulo the partitions."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    k1 = rotl((value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    h1 = (rotl(42 ^ k1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h1 ^= 4  # the length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


@functools.cache
def bucket_labels(n: int) -> tuple[int, ...]:
    """For each bucket ``i < n``, the smallest non-negative ``INT`` that Spark's hash partitioning
    into ``n`` partitions sends to partition ``i``.

    Stage B groups by a bucket column, and Spark hashes that column again to pick the bucket's
    partition: buckets numbered ``0 .. n-1`` collide (with 4 buckets in 4 partitions, two
    partitions took all the keys and the other two none, so one task did three quarters of the
    work). Labelled with these, bucket ``i`` is partition ``i``'s alone."""
    labels: dict[int, int] = {}
    x = 0
    while len(labels) < n:
        labels.setdefault(spark_hash_int(x) % n, x)
        x += 1
    return tuple(labels[i] for i in range(n))


def bucket_column(n: int) -> Column:
    """``_b``: the stage-B bucket of the row's key ``_kb``, one of ``n``, labelled so that Spark's
    hash partitioning into ``n`` partitions gives each bucket a partition of its own."""
    from pyspark.sql import functions as F

    labels = ", ".join(str(b) for b in bucket_labels(n))
    return F.expr(f"element_at(array({labels}), CAST(pmod(hash(_kb), {n}) AS INT) + 1)").alias("_b")


def _table(rows: list[tuple[Any, ...]], columns: tuple[tuple[str, str], ...]) -> Any:
    """``rows`` as an Arrow table of ``columns`` (name, Arrow type name)."""
    import pyarrow as pa

    data = list(zip(*rows, strict=True)) if rows else [()] * len(columns)
    return pa.table({name: pa.array(list(col), type=getattr(pa, kind)()) for (name, kind), col
                     in zip(columns, data, strict=True)})


# -- stage A: per partition ----------------------------------------------------------------------
def _per_partition(plan: KeyedPlan, states: dict[Lane, Any], clock_ms: int) -> Any:
    """Stage A's function: one lane (source, partition) per call."""

    def run(table: Any) -> Any:
        from lowwater.spark.keyed_state import key_bytes

        cols = table.to_pydict(maps_as_pydicts="lossy")  # a MAP a dict, as the general path's (Spark's keys are unique)
        n = table.num_rows
        none = [None] * n
        src = int(cols["_source"][0]) if "_source" in cols else 0
        branch = plan.branches[src]
        chain, strategy, key_selector = branch.chain, branch.strategy, plan.key_selectors[branch.input]
        fields = branch.source.fields()
        seqs, offsets = cols.get("_seq", none), cols["_offset"]
        order = sorted(range(n), key=lambda i: (seqs[i] is not None, seqs[i] or 0,
                                                offsets[i] is not None, offsets[i] or 0))
        p = int(cols["_partition"][0])
        clock, pw = new_partition(strategy, p)
        if (src, p) in states:
            restore(states[(src, p)], pw)
        clock.set(clock_ms)
        out = RecordingOutput()
        rows: list[tuple[Any, ...]] = []
        names = [f for f in fields if f in cols]
        records = [{f: cols[f][i] for f in names} for i in order]
        offsets = [offsets[i] for i in order]
        seqs = [seqs[i] for i in order]
        source_ts = [cols["_source_ts"][i] for i in order]
        corrupt = [cols["_corrupt"][i] for i in order] if "_corrupt" in cols else none
        files = [cols["_file"][i] for i in order] if "_file" in cols else none
        raws = [cols["_raw"][i] for i in order] if "_raw" in cols else none  # what a Kafka dead letter held
        n_in = n_dead = n_key_dead = 0

        def dead(offset: Any, seq: Any, reason: str, record: Any, unparsed: bool = False, file: Any = None) -> None:
            nonlocal n_dead
            n_dead += 1
            letter = {"reason": reason, "partition": p, "offset": offset, "record": record}
            if len(plan.branches) > 1:
                letter["source"] = branch.name
            if unparsed:  # its file, whether the source knows it or not (as the other paths' letters)
                letter["file"] = file
            rows.append((src, p, offset, seq, 0, None, None, None, letter_json(letter), None))

        def push(step: int, value: Any, ts: int | None, off: Any, sq: Any, sub: list[int]) -> None:
            """One value through the chain from ``step`` on, depth first, as the reference runtime
            pushes records: a bad value is dead-lettered alone, as it is at that operator."""
            nonlocal n_key_dead
            while step < len(chain):
                kind, fn, name = chain[step]
                try:
                    if kind == "assign":
                        stamp = assigned_timestamp(
                            pw.assigner.extract_timestamp(value, MIN_TIMESTAMP if ts is None else ts), pw.assigner)
                        pw.generator.on_event(value, stamp, out)
                        ts = timestamp_or_none(ts, stamp)
                    elif kind == "map":
                        value = fn(value)
                    elif kind == "filter":
                        if not fn(value):
                            return
                    else:
                        for v in list(fn(value) or ()):
                            push(step + 1, v, ts, off, sq, sub)
                        return
                except BadRecordError as e:
                    dead(off, sq, e.reason, value)
                    return
                except LowwaterError:
                    raise
                except Exception as e:
                    what = (f"timestamp/watermark assignment ({strategy!r})" if kind == "assign"
                            else _stateless_label(kind, name, fn))
                    raise UserFunctionError(what, e, partition=p, offset=off) from e
                step += 1
            try:
                kb = key_bytes(key_selector(value))
            except BadRecordError as e:
                n_key_dead += 1
                dead(off, sq, e.reason, value)
                return
            except Exception as e:
                raise UserFunctionError(f"key_by {_fn_name(key_selector)}", e, partition=p, offset=off) from e
            rows.append((src, p, off, sq, sub[0], ts, kb, _dumps(value), None, None))
            sub[0] += 1

        for record, offset, seq, sts, bad, file, raw in zip(records, offsets, seqs, source_ts, corrupt, files, raws,
                                                            strict=True):
            n_in += 1
            off, sq = offset, seq
            if bad is not None:
                dead(off, sq, BadRecordError.unparsed(bad), raw, unparsed=True, file=file)
                continue
            push(0, record, sts, off, sq, [0])
        try:
            pw.generator.on_periodic_emit(out)
        except LowwaterError:
            raise
        except Exception as e:
            raise UserFunctionError(f"watermark generator ({strategy!r})", e, partition=p) from e
        ctl = {"state": to_data(pw), "clock_ms": clock_ms, "events": out.to_rows(), "rows_in": n_in, "dead": n_dead,
               "key_dead": n_key_dead, "elements": len(rows) - n_dead}
        rows.append((src, p, None, None, None, None, None, None, None, json.dumps(ctl)))
        return _table(rows, _A_COLUMNS)

    return run


# -- stage A in SQL ---------------------------------------------------------------------------
_SQL_GENERATORS = ("bounded_out_of_orderness", "time_lag", "no_watermarks")
_INTEGRAL = ("bigint", "int", "smallint", "tinyint")


@dataclass(frozen=True)
class SqlLanes:
    """Stage A without Python per row, where it would only read fields.

    It applies to one source whose chain is its watermark strategy alone, with a built-in
    generator (whose state after a batch depends only on the largest timestamp it saw, as the
    native path uses it), the timestamp an integer field, and the key a field of a type whose
    :func:`~lowwater.spark.keyed_state.key_bytes` text SQL writes the same. Then:

    * one aggregate gives each lane what its control row gives (rows, largest timestamp,
      dead letters, elements), and the driver runs the lane's generator on it;
    * the elements go to stage B as columns ``_f0, _f1, ...`` (the record's fields), not pickled;
    * the rows stage A would dead-letter (unparsed, no timestamp, no key: rare) go through
      stage A's own function, so their letters are its letters.
    """

    ts_field: str
    key_field: str
    key_type: str
    fields: tuple[str, ...]
    """The source's fields the batch has, in order: the record dict stage A would build."""
    columns: tuple[str, ...]

    @staticmethod
    def of(plan: KeyedPlan, df: DataFrame) -> SqlLanes | None:
        if len(plan.branches) != 1 or not plan.direct:
            return None
        branch = plan.branches[0]
        strategy = branch.strategy
        proto = strategy.assigner_prototype
        if (strategy.builtin not in _SQL_GENERATORS or strategy.legacy_assigner is not None
                or strategy.assigner_factory is None or not isinstance(proto, FieldTimestampAssigner)):
            return None
        key_field = getattr(plan.key_selectors[branch.input], "field_name", None)
        types = dict(df.dtypes)
        if (key_field is None or types.get(proto.field) not in _INTEGRAL
                or types.get(key_field) not in (*_INTEGRAL, "string", "boolean")):
            return None
        fields = tuple(f for f in branch.source.fields() if f in types)
        return SqlLanes(proto.field, key_field, types[key_field], fields, tuple(df.columns))

    def classify(self, df: DataFrame) -> DataFrame:
        """``df`` with ``_lw_src``, ``_lw_ts``, ``_lw_tsok`` (stage A would take its timestamp),
        ``_lw_good`` (and its key: an element) and ``_lw_kb`` (the key's text)."""
        ts, k = f"CAST({quote(self.ts_field)} AS BIGINT)", quote(self.key_field)
        corrupt = "_corrupt IS NOT NULL" if "_corrupt" in self.columns else "false"
        if self.key_type == "string":
            kb = f"concat('s:', {k})"
        elif self.key_type == "boolean":
            kb = f"CASE WHEN {k} THEN 'b:True' WHEN NOT {k} THEN 'b:False' END"
        else:
            kb = f"concat('i:', CAST({k} AS STRING))"
        tsok = f"(NOT ({corrupt}) AND {ts} IS NOT NULL AND {ts} <> {MIN_TIMESTAMP})"
        return df.selectExpr("*", f"{'_source' if '_source' in self.columns else '0'} AS _lw_src",
                             f"{ts} AS _lw_ts", f"{tsok} AS _lw_tsok", f"{tsok} AND {k} IS NOT NULL AS _lw_good",
                             f"{kb} AS _lw_kb")

    @staticmethod
    def lane_stats(classified: DataFrame) -> list[Any]:
        """Per lane: its rows, the largest timestamp its generator sees, its dead letters (of which
        for want of a key), its elements."""
        from pyspark.sql import functions as F

        return classified.groupBy("_lw_src", "_partition").agg(*[F.expr(e) for e in (
            "count(1) AS rows_in", "max(CASE WHEN _lw_tsok THEN _lw_ts END) AS max_ts",
            "count_if(NOT _lw_good) AS dead", "count_if(_lw_tsok AND NOT _lw_good) AS key_dead",
            "count_if(_lw_good) AS elements")]).collect()

    def elements(self, classified: DataFrame) -> DataFrame:
        seq = "_seq" if "_seq" in self.columns else "CAST(NULL AS BIGINT)"
        return classified.where("_lw_good").selectExpr(
            "_lw_kb AS _kb", "_lw_src AS _source", "_partition", "_offset", f"{seq} AS _seq", "0 AS _sub",
            "_lw_ts AS _ts", *[f"{quote(f)} AS _f{j}" for j, f in enumerate(self.fields)])

    def rejected(self, plan: KeyedPlan, classified: DataFrame, clock_ms: int) -> DataFrame:
        """Stage A's rows for the rows it would dead-letter (its control rows are not used)."""
        lanes = ["_source", "_partition"] if "_source" in self.columns else ["_partition"]
        return (classified.where("NOT _lw_good").select(*[quote(c) for c in self.columns]).groupBy(*lanes)
                .applyInArrow(_per_partition(plan, {}, clock_ms), _A_SCHEMA))


@dataclass(frozen=True)
class Encodings:
    """Which outputs (``result``, ``side:<i>``) a row-list sink takes (their values pickled) and
    which a DataFrame sink takes (their values as JSON)."""

    pickled: frozenset[str]
    as_json: frozenset[str]

    @staticmethod
    def for_sinks(plan: KeyedPlan, sinks: list[Any]) -> Encodings:
        from lowwater.spark.sinks.base import DataFrameSink

        tags = [tag for tag in plan.outputs if tag is not None]
        pickled: set[str] = set()
        as_json: set[str] = set()
        for sink, tag in zip(sinks, plan.outputs, strict=True):
            kind = "result" if tag is None else f"side:{tags.index(tag)}"
            (as_json if isinstance(sink, DataFrameSink) else pickled).add(kind)
        return Encodings(frozenset(pickled), frozenset(as_json))


# -- stage B: per key ------------------------------------------------------------------------------
def _visits(stored: Any, element_keys: Any, due: int, clock_ms: int) -> tuple[Any, Any]:
    """Of one bucket's stored state rows (every version of every key, Arrow), the newest row per
    live key, split in two: the keys to visit (with elements in the batch, or a timer due: the
    next event-time timer by ``due`` or the next processing-time timer by ``clock_ms``) and the
    others (which a compaction keeps as they are)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = stored.num_rows
    if n == 0:
        return stored, stored
    rows = stored.take(pc.sort_indices(stored, sort_keys=[("_kb", "ascending"), ("_v", "descending")]))
    kb = rows["_kb"]
    newest = pa.concat_arrays([pa.array([True]), pc.not_equal(kb.slice(1), kb.slice(0, n - 1)).combine_chunks()])
    rows = rows.filter(newest)
    rows = rows.filter(rows["live"])
    due_timer = pc.or_kleene(pc.less_equal(rows["next_event"], due), pc.less_equal(rows["next_proc"], clock_ms))
    visit = pc.fill_null(pc.or_kleene(pc.is_in(rows["_kb"], value_set=pc.unique(element_keys)), due_timer), False)
    return rows.filter(visit), rows.filter(pc.invert(visit))


def _per_bucket(plan: KeyedPlan, key: StateKey, w_prev: int, steps: list[int], clock_ms: int, batch_id: int,
                due: int, compact: bool, value_fields: tuple[str, ...] | None = None,
                encodings: Encodings | None = None, columnar: bool = True) -> Any:
    """Stage B's function: one hash bucket of keys per call. The elements' values are pickled
    (``_el``), or, when stage A ran in SQL (:class:`SqlLanes`), the source's fields as columns
    ``_f0, _f1, ...`` that become the record dict ``value_fields`` names, as stage A builds it.
    An output's rows carry their value pickled for row-list sinks and as JSON for DataFrame
    sinks, each only where ``encodings`` says a sink takes it that way (both when it is None).
    Event-time sessions with a built-in aggregate run in columns where they can
    (:mod:`.keyed_sessions`; ``columnar=False``: every key through the reference operator).
    The state rows are every stored version of the bucket's keys; :func:`_visits` picks the keys
    to visit, with ``due`` the watermark their event-time timers are compared with. With
    ``compact`` (the batch's directory gets the whole state), the other live keys' newest rows
    come back too, as stored."""
    t = plan.operator
    tags = [tag for tag in plan.outputs if tag is not None]
    columnar_ = ColumnarSessions.of(t, value_fields) if columnar and isinstance(t, WindowTransformation) else None
    lateness = t.allowed_lateness_ms if isinstance(t, WindowTransformation) else 0
    pickled = None if encodings is None else encodings.pickled
    as_json = None if encodings is None else encodings.as_json

    def run(elements_table: Any, states_table: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        from lowwater.core.windows.session_operator import session_operator_for
        from lowwater.runtime.nodes import DeadLetters, WindowNode
        from lowwater.runtime.process_node import KeyedProcessNode
        from lowwater.runtime.records import LateRecord, Record
        from lowwater.spark.keyed_sessions import from_slice, is_sessions, key_of, rows_blob, rows_of, to_slice
        from lowwater.spark.keyed_state import key_bytes
        from lowwater.spark.sealed import seal, unseal

        node: WindowNode | KeyedProcessNode
        if isinstance(t, WindowTransformation):
            clock = ManualClock(clock_ms)
            node = WindowNode(0, t, clock, session_operator_for(t, clock))  # None: the generic operator
        else:
            node = KeyedProcessNode(0, t.name, t.function, list(plan.key_selectors), ManualClock(clock_ms))
        node.dead = DeadLetters()
        op = node.operator
        op.current_watermark = w_prev
        out: list[tuple[Any, ...]] = []
        order: list[int] = [0, 0, 0, 0]  # the position that emissions get: phase, then three numbers

        shapes: dict[str, set[str]] = {}  # per kind written as JSON, its documents' shapes
        orders: dict[str, dict[str, None]] = {}  # and their fields' names, in the order first met

        def encoded(kind: str, value: Any, row: Any = None) -> tuple[Any, ...]:
            """``row``: what a DataFrame sink gets instead of ``value`` (a late element's row)."""
            text = json_row(value if row is None else row, shapes.setdefault(kind, set()),
                            orders.setdefault(kind, {})) if as_json is None or kind in as_json else None
            return (kind, None, *order, len(out), _dumps(value) if pickled is None or kind in pickled else None,
                    None, None, None, text)

        def emit(record: Record) -> None:
            out.append(encoded("result", record.value))

        def emit_side(tag: OutputTag, record: Record) -> None:
            if tag in tags:
                out.append(encoded(f"side:{tags.index(tag)}", record.value))

        arriving = [0]  # the source of the element being processed (a late one is emitted on its arrival)

        def emit_late(tag: OutputTag, record: LateRecord) -> None:
            if tag in tags:  # a row-list sink gets the element; a DataFrame sink also where it came from
                source = plan.branches[arriving[0]].name if len(plan.branches) > 1 else None
                out.append(encoded(f"side:{tags.index(tag)}", record.value,
                                   late_document(record.value, record.partition, record.offset, record.rejected,
                                                 source)))

        node.emit = emit  # type: ignore[method-assign]
        node.emit_side = emit_side  # type: ignore[method-assign]
        if isinstance(node, WindowNode):
            node.emit_late = emit_late  # type: ignore[method-assign]
        visited: set[str] = set()
        to_visit, others = _visits(states_table, elements_table["_kb"], due, clock_ms)
        live_keys = to_visit.num_rows + others.num_rows
        fast = fast_elements = fast_visit = None
        if columnar_ is not None:  # the keys that run in columns (keyed_sessions); the others below
            fast, fast_mask = columnar_.fast_keys(elements_table, to_visit, w_prev)
            if len(fast):
                fast_elements = elements_table.filter(fast_mask)
                elements_table = elements_table.filter(pc.invert(fast_mask))
                in_fast = pc.is_in(to_visit["_kb"], value_set=fast)
                fast_visit, to_visit = to_visit.filter(in_fast), to_visit.filter(pc.invert(in_fast))
        states = to_visit.select(["_kb", "state"]).to_pydict()
        for kb, blob in zip(states["_kb"], states["state"], strict=True):
            what = f"the keyed state of {kb}"
            data = to_slice(key_of(kb), rows_of(blob, what), w_prev, lateness) if is_sessions(blob) \
                else unseal(blob, key, what)
            op.put_key_slice(canonical_key(data["key"]), data)  # a NaN unsealed is not the elements' NaN
            visited.add(kb)
        # arrival order, as the general path orders them (no sequence number or offset first; stable:
        # a missing one sorts as its type's smallest number, which no source numbers a record with)
        order_by = ("_seq", "_source", "_partition", "_offset", "_sub")
        arrival = elements_table.take(pc.sort_indices(
            pa.table({c: pc.fill_null(elements_table[c], -(2 ** (elements_table[c].type.bit_width - 1)))
                      for c in order_by}),
            sort_keys=[(c, "ascending") for c in order_by]))
        el = arrival.select(["_kb", "_source", "_partition", "_offset", "_seq", "_ts"]).to_pydict()
        values: Iterable[Any]
        if value_fields is None:
            values = map(pickle.loads, arrival["_el"].to_pylist())
        else:  # the record dict stage A builds, field by field
            values = arrival.select([f"_f{j}" for j in range(len(value_fields))]).rename_columns(
                list(value_fields)).to_pylist(maps_as_pydicts="lossy")
        inputs = [b.input for b in plan.branches]
        # each record's source, in a job with several: its dead letters and late counts name it
        names = [b.name if len(plan.branches) > 1 else None for b in plan.branches]
        for kb, src, p, off, sq, ts, v in zip(el["_kb"], el["_source"], el["_partition"], el["_offset"], el["_seq"],
                                             el["_ts"], values, strict=True):
            visited.add(kb)
            order[:] = [0, -1 if sq is None else sq, (src << 32) | p, -1 if off is None else off]
            arriving[0] = src
            node.on_record(Record(v, ts, (src, p), p, off, names[src]), inputs[src])
        try:
            for w in steps:
                order[:] = [1, w, 0, 0]
                node._handle(op.advance_watermark(w))  # type: ignore[arg-type]
            order[:] = [2, clock_ms, 0, 0]
            node._handle(op.advance_processing_time(clock_ms))  # type: ignore[arg-type]
        except Exception as e:
            # lowwater's own errors pass; a BadRecordError has no record to reject here: it fails, naming the function
            if isinstance(e, LowwaterError) and not isinstance(e, BadRecordError):
                raise
            # as the reference runtime's nodes name it (WindowNode, KeyedProcessNode.on_batch_end)
            raise UserFunctionError(f"window function of {node.name}" if isinstance(node, WindowNode)
                                    else f"process function of {node.name} (on_timer)", e) from e
        for letter in node.dead.rows:
            out.append(("dead", None, 0, 0, 0, 0, len(out), letter_json(letter).encode(), None, None,
                        None, None))
        for k, (data, next_event, next_proc) in op.take_key_slices().items():
            kb = key_bytes(k)
            visited.discard(kb)
            rows = from_slice(data, op.current_watermark, lateness) \
                if columnar_ is not None and kb[:2] in ("s:", "i:") else None
            blob = seal(data, key) if rows is None else rows_blob(rows)
            out.append(("state", kb, batch_id, 0, 0, 0, 0, blob, next_event, next_proc, True, None))
        for kb in visited:  # visited, and no state left: a tombstone
            out.append(("state", kb, batch_id, 0, 0, 0, 0, None, MAX_TIMESTAMP, MAX_TIMESTAMP, False, None))
        counted: dict[str, Any] = {"elements": 0, "fired": 0, "shapes": []}
        in_columns = None
        if fast is not None and len(fast):
            in_columns, counted = columnar_.run(  # type: ignore[union-attr]
                fast, fast_elements, fast_visit, w_prev, steps, batch_id, pickled is None or "result" in pickled,
                as_json is None or "result" in as_json, _B_COLUMNS)
        if compact:  # the batch's directory gets the whole state: the keys not visited, as stored
            kept = others.select(["_kb", "state", "next_event", "next_proc"]).to_pydict()
            for kb, blob, next_event, next_proc in zip(kept["_kb"], kept["state"], kept["next_event"],
                                                      kept["next_proc"], strict=True):
                out.append(("state", kb, batch_id, 0, 0, 0, 0, blob, next_event, next_proc, True, None))
        kinds: dict[str, int] = {}
        for row in out:
            kinds[row[0]] = kinds.get(row[0], 0) + 1
        if in_columns is not None:
            for kind, c in (("result", counted["fired"]), ("state", len(fast))):  # type: ignore[arg-type]
                if c:
                    kinds[kind] = kinds.get(kind, 0) + c
            if counted["shapes"]:
                shapes.setdefault("result", set()).update(counted["shapes"])
                orders.setdefault("result", {}).update(dict.fromkeys(RESULT_FIELDS))  # as results_json writes them
        stats = {"kinds": kinds, "op_rows_in": node.rows_in + counted["elements"], "op_dead": node.rows_dead_lettered,
                 "unvisited": others.num_rows, "columnar_keys": 0 if fast is None else len(fast),
                 "stored_rows": states_table.num_rows, "live_keys": live_keys,
                 "shapes": {k: reported(v) for k, v in shapes.items()},
                 "orders": {k: list(v) for k, v in orders.items()}}
        if isinstance(node, WindowNode):
            stats.update(windowed=node.operator.windowed_count + counted["elements"], late=node.operator.late_count,
                         unassigned=node.operator.unassigned_count, fired=node.operator.fired_count + counted["fired"],
                         late_by_partition=late_counts(node.late_by_partition))
        else:  # a process function takes every element it is handed (as on the reference runtime)
            stats.update(windowed=node.operator.elements_in, late=0, unassigned=0, fired=node.operator.timers_fired,
                         late_by_partition={})
        out.append(("stats", None, 0, 0, 0, 0, 0, json.dumps(stats).encode(), None, None, None, None))
        table = _table(out, _B_COLUMNS)
        return table if in_columns is None else pa.concat_tables([table, in_columns])

    return run


_PLANNED = {"spark.sql.adaptive.enabled": "false"}
"""How the keyed path's own queries are planned. Adaptive execution runs every shuffle's map side
as a job of its own and plans again after it: a steady batch ran 10 jobs instead of 5, and took
about 1 s longer (docs/performance.md). Its gains (coalescing small partitions, splitting skewed
ones) do not apply: every shuffle here is into one partition per bucket, and a bucket is one
Python call whatever its size."""


class KeyedProcessor:
    """Runs a :class:`KeyedPlan`, one micro-batch at a time (see the module docstring)."""

    def __init__(self, plan: KeyedPlan, fs: CheckpointFS, location: str, key: StateKey,
                 compact_every: int = COMPACT_EVERY, sinks: list[Any] | None = None) -> None:
        self.plan = plan
        self.encodings = None if sinks is None else Encodings.for_sinks(plan, sinks)
        """How the outputs' values travel: only as the pipeline's sinks take them (both ways if not given)."""
        self.fs = fs
        self.root = join(location, "keyed")
        self.key = key
        self.compact_every = compact_every
        self.json_frames = JsonFrames()
        """The schemas of the outputs' JSON rows, inferred once per set of shapes (:mod:`.json_rows`)."""
        self.registered = False
        """Whether this run registered the sources' partitions (as :attr:`NativeProcessor.registered`)."""
        self.input_schema: StructType | None = None
        """The schema of the query's batches (the engine sets it before any step): the end-of-input step,
        which has no batch, types its outputs from it as the batches do (:meth:`_result_seed`)."""

    def empty_state(self) -> KeyedState:
        return KeyedState.for_inputs(len(self.plan.key_selectors))

    def state_from_json(self, data: dict[str, Any]) -> KeyedState:
        return state_from_json(data, self.plan)

    @staticmethod
    def state_to_json(st: KeyedState) -> dict[str, Any]:
        return state_to_json(st)

    def _dir(self, batch: int) -> str:
        return join(self.root, f"batch={batch}")

    def _buckets(self, spark: SparkSession) -> int:
        return max(2, 2 * int(spark.sparkContext.defaultParallelism))

    def _lane(self, st: KeyedState, lane: Lane) -> PartitionState:
        if lane not in st.partitions:
            st.partitions[lane] = new_partition(self.plan.branches[lane[0]].strategy, lane[1])
            st.lane_event(self.plan, lane, LaneEvent("register"))
        return st.partitions[lane]

    def _periodic(self, st: KeyedState, lane: Lane, clock_ms: int) -> None:
        """A lane without rows this batch: its generator's periodic emission, on the driver."""
        clock, pw = st.partitions[lane]
        clock.set(clock_ms)
        out = RecordingOutput()
        pw.generator.on_periodic_emit(out)
        for event in out.events:
            st.lane_event(self.plan, lane, LaneEvent.of(event))

    def run(self, st: KeyedState, df: DataFrame | None, batch_id: int, clock_ms: int, spark: SparkSession,
            end_of_input: bool = False) -> KeyedOutput:
        """One micro-batch. Its plans run in the batch's own session (the streaming query's clone
        of the user's, which ``foreachBatch`` hands over with ``df``), planned without adaptive
        execution and with one shuffle partition per bucket (:data:`_PLANNED`), put back as found
        before the sinks run. A batch without rows (``df`` None: the engine's tick) is given the batch's
        session as ``spark``."""
        if end_of_input:  # no batch: the user's session as it is
            return self._run(st, df, batch_id, clock_ms, spark, end_of_input)
        settings = {**_PLANNED, "spark.sql.shuffle.partitions": str(self._buckets(spark))}
        with settings_for(df.sparkSession if df is not None else spark, settings) as session:
            return self._run(st, df, batch_id, clock_ms, session, end_of_input)

    def _run(self, st: KeyedState, df: DataFrame | None, batch_id: int, clock_ms: int, spark: SparkSession,
             end_of_input: bool = False) -> KeyedOutput:
        plan = self.plan
        phases: dict[str, float] = {}
        mark = time.monotonic()

        def lap(name: str) -> None:
            nonlocal mark
            now = time.monotonic()
            phases[name] = round((now - mark) * 1000)
            mark = now

        if not st.started or not self.registered:  # and partitions gained while the job was stopped (native.py)
            for src, branch in enumerate(plan.branches):
                for p in branch.source.partitions():
                    self._lane(st, (src, p))
            st.started = self.registered = True
        for b in st.pending_delete:  # superseded by a compaction that batch k-1 committed
            self.fs.delete(self._dir(b))
        st.pending_delete = []
        st.clock.set(clock_ms)
        w_prev = st.watermark
        rows_in = dead_a = key_dead = n_elements = 0
        persisted: list[DataFrame] = []
        elements: DataFrame | None = None
        rejected: DataFrame | None = None  # stage A's rows for the batch's dead letters (_dead), if any
        value_fields: tuple[str, ...] | None = None
        stage_a_kind: str | None = None
        operator_ms = clock_ms  # the processing time the operators see
        if df is not None and not end_of_input:
            emitted: set[Lane] = set()
            sql = SqlLanes.of(plan, df)
            stage_a_kind = "python" if sql is None else "sql"
            # each lane's generator events and counters, one lane at a time (its events are
            # handed on before the next lane is registered, as it always was)
            reports: Iterator[tuple[Lane, list[Any], Any]]
            if sql is not None:  # no Python per row: the lanes' statistics from one aggregate
                classified = sql.classify(df).persist()
                persisted.append(classified)

                def sql_reports(sql: SqlLanes = sql) -> Iterator[tuple[Lane, list[Any], Any]]:
                    for r in sql.lane_stats(classified):
                        lane = (int(r["_lw_src"]), int(r["_partition"]))
                        clock, pw = self._lane(st, lane)
                        clock.set(clock_ms)
                        out = RecordingOutput()
                        if r["max_ts"] is not None:  # a built-in generator keeps the largest timestamp alone
                            pw.generator.on_event(None, int(r["max_ts"]), out)
                        pw.generator.on_periodic_emit(out)
                        yield lane, out.events, r

                reports = sql_reports()
                elements, value_fields = sql.elements(classified), sql.fields
            else:
                states = {lane: to_data(pw) for lane, (_, pw) in st.partitions.items()}
                lanes = ["_source", "_partition"] if "_source" in df.columns else ["_partition"]
                stage_a = df.groupBy(*lanes).applyInArrow(_per_partition(plan, states, clock_ms), _A_SCHEMA).persist()
                persisted.append(stage_a)

                def python_reports() -> Iterator[tuple[Lane, list[Any], Any]]:
                    for r in stage_a.filter("_ctl IS NOT NULL").select("_source", "_partition", "_ctl").collect():
                        lane, ctl = (int(r["_source"]), int(r["_partition"])), json.loads(r["_ctl"])
                        clock, pw = self._lane(st, lane)
                        restore(ctl["state"], pw)
                        clock.set(clock_ms)
                        yield lane, RecordingOutput.from_rows(ctl["events"]).events, ctl

                reports = python_reports()
                elements = (stage_a.filter("_ctl IS NULL AND _dead IS NULL")
                            .select("_kb", "_source", "_partition", "_offset", "_seq", "_sub", "_ts", "_el"))
            for lane, events, counts in reports:
                for event in events:
                    st.lane_event(plan, lane, LaneEvent.of(event))
                rows_in += int(counts["rows_in"])
                dead_a += int(counts["dead"])
                key_dead += int(counts["key_dead"])
                n_elements += int(counts["elements"])
                emitted.add(lane)
            if dead_a:  # stage A's rows for the batch's dead letters
                rejected = sql.rejected(plan, classified, clock_ms) if sql is not None else stage_a
            for lane in list(st.partitions):
                if lane not in emitted:
                    self._periodic(st, lane, clock_ms)
        elif end_of_input:  # every lane sends MAX (the sources' end), no last periodic emission
            for lane in st.partitions:
                st.lane_event(plan, lane, LaneEvent.of(WatermarkEvent.watermark(MAX_TIMESTAMP)))
            # and processing time stays where the last batch left it, as on the reference runtime and in
            # Flink, whose end of input quiesces the processing-time service: a timer still pending does
            # not fire (this step's later clock fired those due before it, on this path alone)
            operator_ms = max((clock.now_ms() for clock, _ in st.partitions.values()), default=clock_ms)
            st.ended_ms = operator_ms
        else:
            for lane in list(st.partitions):
                self._periodic(st, lane, clock_ms)
        if st.ended_ms is not None:  # the input ended before this batch: processing time stays there
            operator_ms = st.ended_ms
        lap("partitions_ms")
        # each input combines its sources' lanes, then the inputs combine (the reference runtime's
        # _SingleLaneNode.combine_inputs): the watermark steps the operator moves through
        steps = list(combine_input_steps(st.combined, st.partials, [ui.combine() for ui in st.inputs]).steps)
        w_new = st.watermark

        try:
            if elements is None:
                elements = empty_frame(spark, "_kb STRING, _source INT, _partition INT, _offset BIGINT, "
                                              "_seq BIGINT, _sub INT, _ts BIGINT, _el BINARY")
            stored = self._stored(spark, st.state_dirs)
            # every stored row goes to its key's bucket in one exchange; stage B keeps the newest
            # row per key, and of those the keys it visits (_visits); a compacting batch writes all
            compact = (batch_id % self.compact_every == 0 or st.compact_next) and len(st.state_dirs) > 1
            rows = stored if stored is not None else empty_frame(spark, _STATE_SCHEMA)
            n = self._buckets(spark)
            bucket = bucket_column(n)
            stage_b = (elements.select("*", bucket).groupBy("_b")
                       .cogroup(rows.select("*", bucket).groupBy("_b"))
                       .applyInArrow(_per_bucket(plan, self.key, w_prev, steps, operator_ms, batch_id,
                                                max(w_new, w_prev), compact, value_fields, self.encodings),
                                     _B_SCHEMA))
            if n_elements or stored is not None:
                stage_b = stage_b.persist()
                persisted.append(stage_b)
                stats = [json.loads(bytes(r["blob"]))
                         for r in stage_b.filter("kind = 'stats'").select("blob").collect()]
            else:  # nothing to visit: no elements, no state
                stats = []
            lap("keys_ms")
            kinds: dict[str, int] = {}
            for s_ in stats:
                for k, c in s_["kinds"].items():
                    kinds[k] = kinds.get(k, 0) + int(c)
            # the batch's directory holds the whole state when it compacts (stage B wrote the keys
            # it did not visit as stored) or when stage B visited every live key (no key written more)
            whole = compact or (stored is not None and sum(int(s_["unvisited"]) for s_ in stats) == 0)
            # reading every version since the last compaction costs more than compacting once
            st.compact_next = not whole and sum(int(s_["stored_rows"]) for s_ in stats) > COMPACT_READ * max(
                1, sum(int(s_["live_keys"]) for s_ in stats))
            new_state = stage_b.filter("kind = 'state'").selectExpr(
                "_kb", "o1 AS _v", "blob AS state", "next_event", "next_proc", "live")  # o1: the batch id
            if whole:  # tombstones are only needed over older directories
                new_state = new_state.where("live")
            wrote = self._write(new_state, batch_id, known_empty=not compact and not kinds.get("state"))
            if whole:
                st.pending_delete = [b for b in st.state_dirs if b != batch_id]
                st.state_dirs = [batch_id] if wrote else []
            elif wrote:
                st.state_dirs = [*[b for b in st.state_dirs if b != batch_id], batch_id]
            lap("state_write_ms")
            schema = df.schema if df is not None else self.input_schema
            per_sink = self._outputs(st, stage_b, kinds, stats, batch_id, self._late_seed(schema),
                                     self._result_seed(schema))
            dead = [letter_from_json(r["_dead"]) for r in rejected.filter("_dead IS NOT NULL")
                    .orderBy("_seq", "_source", "_partition", "_offset").select("_dead").collect()] \
                if rejected is not None else []
            if kinds.get("dead"):
                dead += [letter_from_json(bytes(r["blob"])) for r in stage_b.filter("kind = 'dead'").orderBy("o5")
                         .select("blob").collect()]
            lap("outputs_ms")
        except BaseException:
            for frame in persisted:
                frame.unpersist()
            raise

        sums = {k: sum(int(s[k]) for s in stats) for k in ("op_rows_in", "op_dead", "windowed", "late", "unassigned",
                                                            "fired")}
        for s in stats:
            for p, c in s["late_by_partition"].items():
                st.late_by_partition[str(p)] = st.late_by_partition.get(str(p), 0) + int(c)
        batch = {"rows_in": rows_in, "rows_windowed": sums["windowed"], "rows_late": sums["late"],
                 "rows_dead": dead_a + sums["op_dead"], "rows_unassigned": sums["unassigned"],
                 "op_rows_in": sums["op_rows_in"] + key_dead, "op_dead": sums["op_dead"] + key_dead,
                 "windows_fired": sums["fired"]}
        for k, v in batch.items():
            st.totals[k] = st.totals.get(k, 0) + v
        st.totals["direct"] = int(plan.direct)
        st.totals["process"] = int(not isinstance(plan.operator, WindowTransformation))
        status: dict[Any, tuple[int, bool]] = {}
        for ui in st.inputs:
            status.update(ui.lane_status())
        label = _lane_labels(list(status))
        metrics = {  # as the general path's operator reports them
            "combined_watermark": (st.inputs[0].watermark_or_min() if isinstance(plan.operator, WindowTransformation)
                                   else st.watermark),
            "partition_watermarks": {label[k]: v[0] for k, v in status.items()},
            "idle_partitions": sorted(label[k] for k, v in status.items() if v[1]),
            "source_watermarks": {str(g): w for ui in st.inputs for g, (w, _) in ui.source_status().items()},
            "rows_in": rows_in, "rows_windowed": batch["rows_windowed"], "rows_late": batch["rows_late"],
            "rows_dead_lettered": batch["rows_dead"], "rows_unassigned": batch["rows_unassigned"],
            "operator_rows_in": batch["op_rows_in"], "operator_rows_dead_lettered": batch["op_dead"],
            "rows_late_by_partition": {str(k): v for k, v in st.late_by_partition.items()},
            "windows_fired": batch["windows_fired"], "direct": plan.direct, "state_batches": len(st.state_dirs),
            # a process function's elements processed: what marks its line (MetricsLine.operator)
            **({} if isinstance(plan.operator, WindowTransformation) else {"rows_processed": batch["rows_windowed"]}),
            "phases": phases, "stage_a": stage_a_kind,
            "keys_in_columns": sum(int(s_.get("columnar_keys", 0)) for s_ in stats),
        }
        st.metrics = dict(metrics)
        return KeyedOutput(per_sink, metrics, dead, persisted)

    def _stored(self, spark: SparkSession, dirs: list[int]) -> DataFrame | None:
        if not dirs:
            return None
        paths = [self._dir(b) for b in dirs]
        return check_files(spark.read.schema(_STATE_SCHEMA).parquet(*paths), paths, "keyed state")

    def _write(self, rows: DataFrame, batch_id: int, known_empty: bool) -> bool:
        """Write ``rows`` as batch ``batch_id``'s state directory (replacing a replay's); False when empty."""
        target = self._dir(batch_id)
        if known_empty:
            self.fs.delete(target)
            return False
        replace_with_parquet(rows, target, self.fs)
        return True

    def _late_seed(self, schema: StructType | None) -> StructType | None:
        """The late output's columns for the element's fields, typed as the source's DataFrame (of
        ``schema``) has them (:func:`~lowwater.spark.json_rows.element_seed`), where the window is fed
        straight from its sources: its elements are their records."""
        if schema is None or not self.plan.direct or not isinstance(self.plan.operator, WindowTransformation):
            return None
        return element_seed(schema, [f for b in self.plan.branches for f in b.source.fields()])

    def _result_seed(self, schema: StructType | None) -> StructType | None:
        """The window's results typed as the native path types them (:func:`window_result_seed`),
        where the window is fed straight from its sources. Until session 56 the end-of-input step,
        which has no batch, gave none: results first fired there were typed by their values (an INT
        key a BIGINT, a BINARY one its base64 text; a user probe)."""
        if schema is None or not self.plan.direct:
            return None
        return window_result_seed(self.plan.operator, schema)

    def _outputs(self, st: KeyedState, stage_b: DataFrame, kinds: dict[str, int], stats: list[dict[str, Any]],
                 batch_id: int, late_seed: StructType | None = None, result_seed: StructType | None = None
                 ) -> list[Output]:
        """One :class:`Output` per sink; sinks on the same output share it (its rows are collected once).
        An output a DataFrame sink takes gets its DataFrame here, before the batch's state is
        committed, since its schema is part of it (``st.schemas``: a batch whose values change a
        column's type fails here, with :class:`~lowwater.core.errors.OutputSchemaError`)."""
        tags = [tag for tag in self.plan.outputs if tag is not None]
        made: dict[str, Output] = {}

        def to_rows(frame: DataFrame) -> list[Any]:
            return [result_value(bytes(r["blob"])) for r in
                    frame.orderBy("o1", "o2", "o3", "o4", "_kb", "o5").select("blob").collect()]

        t = self.plan.operator
        late_tag = t.late_tag if isinstance(t, WindowTransformation) else None
        late_kind = f"side:{tags.index(late_tag)}" if late_tag in tags else None

        def output(kind: str) -> Output:
            if kind not in made:
                frame = stage_b.filter(f"kind = '{kind}'") if kinds.get(kind) else None
                df = None
                kept = st.schemas.get(kind)
                # a batch without rows gets an empty DataFrame once the output's columns are known
                # (its first rows), as Spark's foreachBatch gets one: a directory sink writes it
                if (frame is not None or kept is not None) and (self.encodings is None or
                                                                kind in self.encodings.as_json):
                    from pyspark.sql.types import StructType

                    what = (f"the output of {t.name!r}" if kind == "result" else
                            f"the side output {tags[int(kind.split(':')[1])].name!r} of {t.name!r}")
                    df, schema = self.json_frames.settled(
                        frame if frame is not None else empty_frame(stage_b.sparkSession, "json STRING"), "json",
                        merge_shapes([s_["shapes"].get(kind) for s_ in stats if kind in s_["kinds"]]),
                        None if kept is None else StructType.fromJson(json.loads(kept)), what, batch_id,
                        late=kind == late_kind, late_source=len(self.plan.branches) > 1,
                        seed=late_seed if kind == late_kind else result_seed if kind == "result" else None,
                        order=merge_orders([s_.get("orders", {}).get(kind) for s_ in stats if kind in s_["kinds"]]))
                    st.schemas[kind] = schema.json()
                made[kind] = _JsonOutput(frame, to_rows, df)
            return made[kind]

        return [output("result" if tag is None else f"side:{tags.index(tag)}") for tag in self.plan.outputs]


def window_result_seed(t: Any, schema: StructType, timestamps: bool = True) -> StructType | None:
    """The results of the window ``t`` typed as the native path types the same window's (its key
    the key field's type in ``schema``, the sources' columns; its value
    :func:`~lowwater.spark.native_sql.sql_of`'s), for a built-in aggregate of a field, keyed by a
    field, of a window fed straight from its sources (the caller knows that). Without it the
    results' types were the values' own: an INT key or maximum a BIGINT, a FLOAT minimum a DOUBLE,
    a ``DECIMAL(10,2)`` maximum a ``DECIMAL(38,2)``, a BINARY key base64 text, so a table the native
    path had made refused the same window's results once a count trigger, a session window (the
    keyed path) or a processing-time or count window (the general path until session 53) moved it. ``timestamps``:
    as :func:`~lowwater.spark.json_rows.element_seed`'s."""
    from pyspark.sql.types import DataType, IntegerType, LongType, StructField, StructType

    if not isinstance(t, WindowTransformation) or t.window_function:
        return None
    agg = t.contents.function if isinstance(t.contents, AggregatingContents) else None
    key = getattr(t.key_selector, "field_name", None)
    names = set(schema.fieldNames())
    if not isinstance(agg, BuiltinAggregate) or key not in names or (
            agg.field not in names if agg.field is not None else not isinstance(agg, Count)):
        return None
    value = "bigint" if agg.field is None else schema[agg.field].dataType.simpleString()
    wanted = StructType([StructField("key", schema[key].dataType), StructField("window_start", LongType()),
                         StructField("window_end", LongType()),
                         StructField("value", DataType.fromDDL(sql_of(agg.name)(value).value_type)),
                         StructField("fire_index", IntegerType())])
    seed = element_seed(wanted, wanted.fieldNames(), timestamps=timestamps)
    return seed if seed is not None and seed.fieldNames() == wanted.fieldNames() else None
