"""A keyed window operator's node."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from lowwater.core.clock import Clock
from lowwater.core.errors import BadRecordError, ConfigurationError, blamed
from lowwater.core.keys import canonicalize_operator
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.windows import LateElement, SideOutput, WindowFired, WindowOperator
from lowwater.core.windows.aggregations import BuiltinAggregate
from lowwater.core.windows.session_operator import SessionWindowOperator
from lowwater.graph.transformations import (
    AssignTransformation,
    OutputTag,
    SourceTransformation,
    Transformation,
    WindowTransformation,
)
from lowwater.runtime.nodes.node import Node, _fn_name
from lowwater.runtime.nodes.single_lane import _lane_labels, _SingleLaneNode
from lowwater.runtime.records import LateRecord, Record
from lowwater.runtime.union_input import UnionInput
from lowwater.runtime.user_code import user_code_failed

__all__ = ["WindowNode"]


class WindowNode(_SingleLaneNode):
    """A keyed window operator behind an exchange over all its input lanes.

    ``operator`` runs ``t`` (built with ``clock``) in place of the generic
    :class:`~lowwater.core.windows.WindowOperator`, e.g. a
    :class:`~lowwater.core.windows.session_operator.SessionWindowOperator` where it applies.
    """

    def __init__(self, node_id: int, t: WindowTransformation, clock: Clock,
                 operator: WindowOperator | SessionWindowOperator | None = None) -> None:
        super().__init__(node_id, t.name)
        self.t = t
        self.clock = clock
        self.operator: WindowOperator | SessionWindowOperator = operator if operator is not None else WindowOperator(
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
        self._timestamped = _timestamped(t.input)
        """Whether a watermark strategy stamps every element: if so, one without a timestamp is a
        dead letter (its source had none); if not, the pipeline is missing one."""
        self._timestamp_origin = BadRecordError.timestamp_origin(timestamp_origins(t.input))
        """What a dead letter's reason names as its timestamp's origin: the source, or an assigner."""
        function = getattr(t.contents, "function", None)
        self._check_value: Callable[[Any], None] | None = (
            function.check if isinstance(function, BuiltinAggregate) and function.field else None
        )

    def restore(self, old: Node) -> None:
        assert isinstance(old, WindowNode)
        super().restore(old)
        self.operator.restore(old.operator.snapshot())
        canonicalize_operator(self.operator)  # its NaN keys, unpickled, are the elements' NaN again

    @property
    def exchange(self) -> UnionInput:
        return self.exchanges[0]

    def on_record(self, record: Record, input_index: int) -> None:
        self.rows_in += 1
        try:
            key = self.t.key_selector(record.value)
            hash(key)  # a list or a dict: the key selector's failure, not the window operator's
            if self._check_value is not None:
                self._check_value(record.value)
        except (Exception, SystemExit) as e:
            user_code_failed(e, f"key_by {_fn_name(self.t.key_selector)}", record, on_bad=self._reject,
                             wrap_lowwater=True)
            return
        ts = MIN_TIMESTAMP if record.timestamp is None else record.timestamp
        if ts == MIN_TIMESTAMP and self.operator.is_event_time:
            if not self._timestamped:
                raise ConfigurationError(
                    "timestamp",
                    f"record at partition {record.partition}, offset {record.offset} has no timestamp. "
                    "Did you forget to call assign_timestamps_and_watermarks(...) or give from_source a "
                    "WatermarkStrategy?",
                )
            # the source's timestamp is null or Flink's no-timestamp marker: as on the native path
            self._reject(record, BadRecordError(BadRecordError.no_timestamp(record.timestamp, self._timestamp_origin)))
            return
        margin = self._edge_margin_ms
        if margin is not None and ts != MIN_TIMESTAMP and (ts > MAX_TIMESTAMP - margin or ts < MIN_TIMESTAMP + margin):
            self.rows_dead_lettered += 1
            self.dead.add(record, BadRecordError(BadRecordError.edge_timestamp(ts, margin)))
            return
        try:
            events = self.operator.process_element(key, record.value, ts)
        except (Exception, SystemExit) as e:  # a BadRecordError is raised by a user function on purpose
            user_code_failed(e, f"{blamed(e, 'window function')} of {self.name}", record, on_bad=self._reject)
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
                    if type(out) is tuple and len(out) == 2 and isinstance(out[0], OutputTag):
                        # PyFlink's side output from a window function: ``yield tag, value``, as a
                        # process function's (it reached the main output as a tuple)
                        self.emit_side(out[0], Record(out[1], None, self.out_lane))
                    else:
                        self.emit(Record(out, ts, self.out_lane))
            elif isinstance(ev, LateElement):
                assert record is not None
                p = late_lane_label(record)
                self.late_by_partition[p] = self.late_by_partition.get(p, 0) + 1
                if self.t.late_tag is not None:
                    late = LateRecord(ev.element, ev.timestamp, self.out_lane, record.partition, record.offset,
                                      record.source, tuple(ev.windows))
                    self.emit_late(self.t.late_tag, late)
            elif isinstance(ev, SideOutput):
                self.emit_side(ev.tag, Record(ev.value, None, self.out_lane))

    def emit_late(self, tag: OutputTag, record: LateRecord) -> None:
        """A late element to the late side output: the element, as Flink's operator gives it, with
        the windows that rejected it (``record.rejected``), which the Spark engine adds, with the
        element's source position, to the late rows a DataFrame sink takes, as the native path does."""
        self.emit_side(tag, record)

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        self.end_batch_of(self.operator, self.clock, self._handle, batch_id, f"window function of {self.name}")

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
            "rows_late_by_partition": late_counts(self.late_by_partition),
            "windows_fired": self.operator.fired_count,
            "open_windows": self.operator.open_windows(),
            "state_rows": self.operator.state_size(),
        }


def _timestamped(t: Transformation) -> bool:
    """Whether every way into ``t`` passes a watermark strategy (a source's, or
    ``assign_timestamps_and_watermarks``) or a window, whose results carry its end's timestamp."""
    if isinstance(t, AssignTransformation | WindowTransformation):
        return True
    if isinstance(t, SourceTransformation):
        return t.strategy is not None
    return bool(t.inputs) and all(_timestamped(i) for i in t.inputs)


def timestamp_origins(t: Transformation) -> set[str | None]:
    """Where the timestamps of the elements into ``t`` come from, one origin per way in: the
    watermark strategy nearest upstream on each (:attr:`WatermarkStrategy.timestamp_origin`), or the
    strategy before it where that one keeps the record's timestamp. A window's results carry its
    end, never a timestamp a window rejects: they add none."""
    if isinstance(t, WindowTransformation):
        return set()
    if isinstance(t, AssignTransformation):
        origin = t.strategy.timestamp_origin
        return timestamp_origins(t.input) if origin is None else {origin}
    if isinstance(t, SourceTransformation):
        return {None if t.strategy is None else t.strategy.timestamp_origin}
    return set().union(*(timestamp_origins(i) for i in t.inputs))


def late_lane_label(record: Record) -> str:
    """Where a late element came from, named as ``partition_watermarks`` names its lane: the
    partition, or ``source:partition`` in a job with several sources (a record then carries its
    source's name), whose partition numbers alone would merge two sources' counts."""
    lane = record.lane
    if record.source is not None and isinstance(lane, tuple):
        return f"{lane[0]}:{record.partition}"
    return str(record.partition)


def late_counts(by_lane: dict[Any, int]) -> dict[str, int]:
    """Late counts by lane label (a state kept before the labels may have a partition number)."""
    out: dict[str, int] = {}
    for p, n in by_lane.items():
        out[str(p)] = out.get(str(p), 0) + n
    return out
