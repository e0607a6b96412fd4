"""The reference runtime's operators. Records are pushed; watermarks move at batch ends.

Before the first exchange every source partition is a *lane* with its own watermark,
like a parallel Flink subtask. Operators that need one input (windows, two-input
operators, sinks) combine their lanes in an :class:`Exchange`, once per batch end.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from lowwater.core.clock import Clock
from lowwater.core.errors import BadRecordError, ConfigurationError
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.watermarks import (
    CombinedWatermarkStatus,
    PartialWatermark,
    PartitionWatermarking,
    RecordingOutput,
    WatermarkEvent,
    WatermarkGeneratorContext,
    WatermarkStrategy,
)
from lowwater.core.windows import LateElement, SideOutput, WindowFired, WindowOperator
from lowwater.core.windows.aggregations import BuiltinAggregate
from lowwater.graph.sinks import Sink
from lowwater.graph.sources import Source, SourceBatch, SourceIdle, SourceItem, SourceRecord, SourceWatermark
from lowwater.graph.transformations import OutputTag, WindowTransformation
from lowwater.runtime.operator_inputs import combine_input_steps
from lowwater.runtime.records import Lane, LaneEvent, Record
from lowwater.runtime.restore import transfer_state
from lowwater.runtime.union_input import UnionInput
from lowwater.runtime.user_code import user_code_failed

__all__ = [
    "AssignerNode", "CoNode", "DeadLetters", "Node", "SideOutputNode", "SinkNode", "SourceNode",
    "StatelessNode", "UnionNode", "WindowNode",
]


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


class DeadLetters:
    """The job's dead-letter output: records an operator could not process because of their
    data (:class:`BadRecordError`), each as ``{"reason", "partition", "offset", "record"}``
    like the Spark engine's. ``rows`` is this batch's; ``count`` is the running total."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.count = 0

    def add(self, record: Record, error: BadRecordError) -> None:
        self.rows.append({"reason": error.reason, "partition": record.partition, "offset": record.offset,
                          "record": record.value})
        self.count += 1


class Node:
    """An operator instance. Subclasses override what they need."""

    def __init__(self, node_id: int, name: str) -> None:
        self.node_id = node_id
        self.name = name
        self.outputs: list[tuple[Node, int]] = []
        self.side_outputs: dict[OutputTag, list[tuple[Node, int]]] = {}
        self.dead = DeadLetters()
        """Shared by every node of a job (the compiler sets it)."""

    # records
    def on_record(self, record: Record, input_index: int) -> None:
        self.emit(record)

    def emit(self, record: Record) -> None:
        for node, idx in self.outputs:
            node.on_record(record, idx)

    def emit_side(self, tag: OutputTag, record: Record) -> None:
        for node, idx in self.side_outputs.get(tag, ()):
            node.on_record(record, idx)

    # watermarks
    def on_lane_event(self, input_index: int, lane: Lane, event: LaneEvent) -> None:
        self.emit_lane_event(lane, event)

    def emit_lane_event(self, lane: Lane, event: LaneEvent) -> None:
        for node, idx in self.outputs:
            node.on_lane_event(idx, lane, event)
        for consumers in self.side_outputs.values():
            for node, idx in consumers:
                node.on_lane_event(idx, lane, event)

    def on_start(self) -> None:
        """Announce lanes downstream."""

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        """Emit watermarks (in topological order, after every upstream node)."""

    def metrics(self) -> dict[str, Any]:
        return {}

    STATE: tuple[str, ...] = ()
    """The attributes that are data (restored after a restart); everything else is code or wiring."""

    def restore(self, old: Node) -> None:
        """Take ``old``'s state (from a checkpoint) into this node, built from the current code."""
        for name in self.STATE:
            setattr(self, name, getattr(old, name, getattr(self, name)))


class SourceNode(Node):
    def __init__(self, node_id: int, name: str, source: Source, index: int = 0) -> None:
        super().__init__(node_id, name)
        self.source = source
        self.index = index
        """The source's position among the job's sources: lanes are ``(index, partition)``,
        the same in every process, so restored state finds its lanes."""
        self.STATE = ("known", "_pending", "rows_in")
        self.known: set[int] = set()
        self._pending: list[tuple[int, LaneEvent]] = []
        self.rows_in = 0
        self.rows_in_batch = 0

    def lane(self, partition: int) -> Lane:
        return (self.index, partition)

    def on_start(self) -> None:
        for p in self.source.partitions():
            self._register(p)

    def _register(self, p: int) -> None:
        self.known.add(p)
        self.emit_lane_event(self.lane(p), LaneEvent("register"))

    def end(self) -> None:
        """This source is exhausted while others go on: like Flink, it sends MAX on every lane."""
        for p in sorted(self.known):
            self._pending.append((p, LaneEvent("watermark", MAX_TIMESTAMP)))

    def feed(self, batch: SourceBatch) -> None:
        self.begin_batch()
        for item in batch.items:
            self.feed_item(item)

    def begin_batch(self) -> None:
        self.rows_in_batch = 0

    def feed_item(self, item: SourceItem) -> None:
        """One item of the current batch (records are pushed downstream at once)."""
        if item.partition not in self.known:
            self._register(item.partition)
        if isinstance(item, SourceRecord):
            self.rows_in_batch += 1
            self.rows_in += 1
            record = Record(item.value, item.timestamp, self.lane(item.partition), item.partition, item.offset)
            if item.error is not None:  # stored, but not an element
                self.dead.add(record, BadRecordError(item.error))
                return
            self.emit(record)
        elif isinstance(item, SourceWatermark):
            self._pending.append((item.partition, LaneEvent("watermark", item.timestamp)))
        elif isinstance(item, SourceIdle):
            self._pending.append((item.partition, LaneEvent("idle")))

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        pending, self._pending = self._pending, []
        for p, ev in pending:
            self.emit_lane_event(self.lane(p), ev)
        if end_of_input:
            for p in sorted(self.known):
                self.emit_lane_event(self.lane(p), LaneEvent("watermark", MAX_TIMESTAMP))


class StatelessNode(Node):
    """map, filter or flat_map, lane by lane."""

    def __init__(self, node_id: int, name: str, kind: str, fn: Callable[[Any], Any]) -> None:
        super().__init__(node_id, name)
        self.kind = kind
        self.fn = fn

    def on_record(self, record: Record, input_index: int) -> None:
        try:
            if self.kind == "map":
                out = [self.fn(record.value)]
            elif self.kind == "filter":
                out = [record.value] if self.fn(record.value) else []
            else:
                out = list(self.fn(record.value) or ())
        except Exception as e:
            user_code_failed(e, f"{self.kind} {_fn_name(self.fn)}", record, on_bad=self.dead.add)
            return
        for v in out:
            self.emit(Record(v, record.timestamp, record.lane, record.partition, record.offset))


class _LaneOutput(RecordingOutput):
    r"""Only so that general-path checkpoints written before :class:`RecordingOutput` unpickle
    (their pending events were :class:`LaneEvent`\ s)."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        RecordingOutput.__init__(self, (WatermarkEvent(e.kind, e.timestamp) for e in state.get("events", ())))


@dataclass
class _LaneWatermarking:
    partition: PartitionWatermarking[Any]
    output: RecordingOutput = field(default_factory=RecordingOutput)


class AssignerNode(Node):
    """Timestamps and watermarks per lane; upstream event time is overridden (MAX passes)."""

    def __init__(self, node_id: int, name: str, strategy: WatermarkStrategy[Any], clock: Clock) -> None:
        super().__init__(node_id, name)
        self.strategy = strategy
        self.clock = clock
        self.lanes: dict[Lane, _LaneWatermarking] = {}

    def restore(self, old: Node) -> None:
        assert isinstance(old, AssignerNode)
        for lane, lw in old.lanes.items():
            fresh = self._lane(lane)  # the current strategy's assigner and generator
            transfer_state(lw.partition.assigner, fresh.partition.assigner)
            transfer_state(lw.partition.generator, fresh.partition.generator)
            fresh.output = RecordingOutput(lw.output.events)

    def _lane(self, lane: Lane) -> _LaneWatermarking:
        lw = self.lanes.get(lane)
        if lw is None:
            partition = lane[1] if isinstance(lane, tuple) else lane
            ctx = WatermarkGeneratorContext(partition=partition, clock=self.clock)
            lw = self.lanes[lane] = _LaneWatermarking(self.strategy.create_partition(ctx))
        return lw

    def on_record(self, record: Record, input_index: int) -> None:
        lw = self._lane(record.lane)
        try:
            ts = lw.partition.assigner.extract_timestamp(
                record.value, MIN_TIMESTAMP if record.timestamp is None else record.timestamp
            )
            ts = int(ts)
            lw.partition.generator.on_event(record.value, ts, lw.output)
        except Exception as e:
            user_code_failed(e, f"timestamp/watermark assignment ({self.strategy!r})", record, on_bad=self.dead.add)
            return
        record.timestamp = ts
        self.emit(record)

    def on_lane_event(self, input_index: int, lane: Lane, event: LaneEvent) -> None:
        if event.kind == "register":
            self._lane(lane)
            self.emit_lane_event(lane, event)
        elif event.kind == "watermark" and event.timestamp == MAX_TIMESTAMP:
            event.watermark_event().emit_to(self._lane(lane).output)

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        for lane, lw in self.lanes.items():
            if end_of_input:  # only the end-of-input MAX passes; no last periodic emit
                for ev in lw.output.take():
                    self.emit_lane_event(lane, LaneEvent.of(ev))
                continue
            try:
                lw.partition.generator.on_periodic_emit(lw.output)
            except Exception as e:
                user_code_failed(e, f"watermark generator ({self.strategy!r})",
                                 partition=lane[1] if isinstance(lane, tuple) else lane)
            for ev in lw.output.take():
                self.emit_lane_event(lane, LaneEvent.of(ev))


class UnionNode(Node):
    """Forwards the records and lanes of every input; consumers take the minimum."""


class SideOutputNode(Node):
    """One side output of a window operator; carries the operator's watermark."""


class _SingleLaneNode(Node):
    """A node with one output lane, fed by a :class:`UnionInput` per input (the sources that
    reach it), whose results combine as a two-input operator's (:mod:`.operator_inputs`)."""

    def __init__(self, node_id: int, name: str, inputs: int = 1) -> None:
        super().__init__(node_id, name)
        self.exchanges = [UnionInput() for _ in range(inputs)]
        self.out_lane: Lane = ("op", node_id)  # replaced by the compiler with the node's position
        self.valve = CombinedWatermarkStatus()
        self.partials = [PartialWatermark() for _ in range(inputs)]
        for p in self.partials:
            self.valve.add(p)
        self.idle = False
        self.watermark_history: list[int] = []
        """Every watermark the operator moved to, in order (bounded by ``CompiledJob.bound_histories``)."""
        self.bounded_history = False
        self.multi_step_batches: list[int] = []
        """Batch ends at which the operator's watermark moved in more than one step."""
        self.STATE = ("exchanges", "valve", "partials", "idle", "watermark_history", "multi_step_batches")

    def on_start(self) -> None:
        self.emit_lane_event(self.out_lane, LaneEvent("register"))

    def on_lane_event(self, input_index: int, lane: Lane, event: LaneEvent) -> None:
        self.exchanges[input_index].on_lane_event(lane, event)

    def combine_inputs(self, batch_id: int = -1) -> tuple[tuple[int, ...], bool]:
        """Combine each input's lanes, then the inputs; returns (the watermark steps, idle)."""
        results = [ex.combine() for ex in self.exchanges]
        r = combine_input_steps(self.valve, self.partials, results)
        if r.steps:
            if self.bounded_history:  # engines that run for months keep only the last one
                self.watermark_history[:] = [r.steps[-1]]
            else:
                self.watermark_history.extend(r.steps)
            if len(r.steps) > 1 and not self.bounded_history:
                self.multi_step_batches.append(batch_id)
        return r.steps, r.idle

    def forward_status(self, steps: tuple[int, ...], idle: bool) -> None:
        if steps:
            self.idle = False
            self.emit_lane_event(self.out_lane, LaneEvent("watermark", steps[-1]))
        if idle and not self.idle:
            self.idle = True
            self.emit_lane_event(self.out_lane, LaneEvent("idle"))
        elif not idle and self.idle:
            self.idle = False
            self.emit_lane_event(self.out_lane, LaneEvent("active"))

    @property
    def current_watermark(self) -> int:
        return self.valve.combined_watermark

    def metrics(self) -> dict[str, Any]:
        status: dict[Lane, tuple[int, bool]] = {}
        for ex in self.exchanges:
            status.update(ex.lane_status())
        label = _lane_labels(list(status))
        return {
            "combined_watermark": self.current_watermark,
            "partition_watermarks": {label[k]: v[0] for k, v in status.items()},
            "idle_partitions": sorted(label[k] for k, v in status.items() if v[1]),
            "source_watermarks": {str(g): w for ex in self.exchanges for g, (w, _) in ex.source_status().items()},
            "idle": self.valve.idle,
        }


class CoNode(_SingleLaneNode):
    """Two inputs, one function each; the watermark is the minimum of the inputs."""

    def __init__(
        self, node_id: int, name: str, fn1: Callable[[Any], Any], fn2: Callable[[Any], Any], flat: bool
    ) -> None:
        super().__init__(node_id, name, inputs=2)
        self.fns = (fn1, fn2)
        self.flat = flat

    def on_record(self, record: Record, input_index: int) -> None:
        fn = self.fns[input_index]
        try:
            out = list(fn(record.value) or ()) if self.flat else [fn(record.value)]
        except Exception as e:
            user_code_failed(e, f"{self.name} {_fn_name(fn)}", record, on_bad=self.dead.add)
            return
        for v in out:
            self.emit(Record(v, record.timestamp, self.out_lane))

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        self.forward_status(*self.combine_inputs(batch_id))


class WindowNode(_SingleLaneNode):
    """A keyed window operator behind an exchange over all its input lanes."""

    def __init__(self, node_id: int, t: WindowTransformation, clock: Clock) -> None:
        super().__init__(node_id, t.name)
        self.t = t
        self.clock = clock
        self.operator = WindowOperator(
            t.assigner, t.contents, trigger=t.trigger, allowed_lateness_ms=t.allowed_lateness_ms,
            window_function=t.window_function, clock=clock,
        )
        self.late_by_partition: dict[Hashable, int] = {}
        self.rows_in = 0
        self.rows_dead_lettered = 0
        self.STATE = (*self.STATE, "late_by_partition", "rows_in", "rows_dead_lettered")
        size = getattr(t.assigner, "size_ms", None)
        self._edge_margin_ms: int | None = None
        """As on the native Spark paths: timestamps this close to the ends of the 64-bit range have
        windows (or cleanup times) that cannot be represented, and are dead-lettered."""
        if isinstance(size, int) and self.operator.is_event_time:
            slide = getattr(t.assigner, "slide_ms", size)
            self._edge_margin_ms = size + slide + abs(getattr(t.assigner, "offset_ms", 0)) + t.allowed_lateness_ms + 1
        function = getattr(t.contents, "function", None)
        self._check_value: Callable[[Any], None] | None = (
            function.check if isinstance(function, BuiltinAggregate) and function.field else None
        )

    def restore(self, old: Node) -> None:
        assert isinstance(old, WindowNode)
        super().restore(old)
        self.operator.restore(old.operator.snapshot())

    @property
    def exchange(self) -> UnionInput:
        return self.exchanges[0]

    def on_record(self, record: Record, input_index: int) -> None:
        self.rows_in += 1
        try:
            key = self.t.key_selector(record.value)
            if self._check_value is not None:
                self._check_value(record.value)
        except Exception as e:
            user_code_failed(e, f"key_by {_fn_name(self.t.key_selector)}", record, on_bad=self._reject,
                             wrap_lowwater=True)
            return
        if record.timestamp is None and self.operator.is_event_time:
            raise ConfigurationError(
                "timestamp",
                f"record at partition {record.partition}, offset {record.offset} has no timestamp. "
                "Did you forget to call assign_timestamps_and_watermarks(...) or give from_source a "
                "WatermarkStrategy?",
            )
        ts = MIN_TIMESTAMP if record.timestamp is None else record.timestamp
        margin = self._edge_margin_ms
        if margin is not None and ts != MIN_TIMESTAMP and (ts > MAX_TIMESTAMP - margin or ts < MIN_TIMESTAMP + margin):
            self.rows_dead_lettered += 1
            self.dead.add(record, BadRecordError(BadRecordError.edge_timestamp(ts, margin)))
            return
        try:
            events = self.operator.process_element(key, record.value, ts)
        except Exception as e:  # a BadRecordError is raised by a user function on purpose
            user_code_failed(e, f"window function of {self.name}", record, on_bad=self._reject)
            return
        self._handle(events, record)

    def _reject(self, record: Record, e: BadRecordError) -> None:
        self.rows_dead_lettered += 1
        self.dead.add(record, e)

    def _handle(self, events: list[Any], record: Record | None = None) -> None:
        for ev in events:
            if isinstance(ev, WindowFired):
                ts = ev.window.max_timestamp()
                for out in ev.outputs:
                    self.emit(Record(out, ts, self.out_lane))
            elif isinstance(ev, LateElement):
                assert record is not None
                p = record.partition
                self.late_by_partition[p] = self.late_by_partition.get(p, 0) + 1
                if self.t.late_tag is not None:
                    self.emit_side(self.t.late_tag, Record(ev.element, ev.timestamp, self.out_lane,
                                                           record.partition, record.offset))
            elif isinstance(ev, SideOutput):
                self.emit_side(ev.tag, Record(ev.value, None, self.out_lane))

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        steps, idle = self.combine_inputs(batch_id)
        try:
            for watermark in steps:
                self._handle(self.operator.advance_watermark(watermark))
            self.forward_status(steps, idle)
            self._handle(self.operator.advance_processing_time(self.clock.now_ms()))
        except Exception as e:
            user_code_failed(e, f"window function of {self.name}")

    def metrics(self) -> dict[str, Any]:
        status = self.exchange.lane_status()
        label = _lane_labels(list(status))
        return {
            "combined_watermark": self.exchange.watermark_or_min(),
            "partition_watermarks": {label[k]: v[0] for k, v in status.items()},
            "idle_partitions": sorted(label[k] for k, v in status.items() if v[1]),
            "source_watermarks": {str(g): w for g, (w, _) in self.exchange.source_status().items()},
            "operator_rows_in": self.rows_in,
            "rows_windowed": self.operator.windowed_count,
            "rows_late": self.operator.late_count,
            "rows_unassigned": self.operator.unassigned_count,
            "operator_rows_dead_lettered": self.rows_dead_lettered,
            "rows_late_by_partition": {str(p): n for p, n in self.late_by_partition.items()},
            "windows_fired": self.operator.fired_count,
            "open_windows": self.operator.open_windows(),
            "state_rows": self.operator.state_size(),
        }


def _lane_labels(lanes: list[Lane]) -> dict[Lane, str]:
    """Partition numbers when all lanes come from one source, else ``node:partition``."""
    sources = {lane[0] for lane in lanes if isinstance(lane, tuple)}
    if len(sources) <= 1:
        return {lane: str(lane[1] if isinstance(lane, tuple) else lane) for lane in lanes}
    return {lane: (f"{lane[0]}:{lane[1]}" if isinstance(lane, tuple) else str(lane)) for lane in lanes}


class SinkNode(_SingleLaneNode):
    """Buffers a batch's rows and hands them to the sink at the batch end."""

    def __init__(self, node_id: int, name: str, sink: Sink) -> None:
        super().__init__(node_id, name)
        self.sink = sink
        self.rows: list[Any] = []

    def on_start(self) -> None:
        self.sink.open()

    def on_record(self, record: Record, input_index: int) -> None:
        self.rows.append(record.value)

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        self.combine_inputs(batch_id)
        rows, self.rows = self.rows, []
        self.sink.write_batch(batch_id, rows)
