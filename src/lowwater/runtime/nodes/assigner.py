"""Timestamps and watermarks, per lane: a watermark strategy's node."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lowwater.core.clock import Clock
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.watermarks import (
    PartitionWatermarking,
    RecordingOutput,
    WatermarkEvent,
    WatermarkGeneratorContext,
    WatermarkStrategy,
)
from lowwater.core.watermarks.assigner import assigned_timestamp, timestamp_or_none
from lowwater.runtime.nodes.node import Node
from lowwater.runtime.records import Lane, LaneEvent, Record
from lowwater.runtime.restore import transfer_state
from lowwater.runtime.user_code import user_code_failed

__all__ = ["AssignerNode"]


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
            ts = assigned_timestamp(lw.partition.assigner.extract_timestamp(
                record.value, MIN_TIMESTAMP if record.timestamp is None else record.timestamp
            ), lw.partition.assigner)
            lw.partition.generator.on_event(record.value, ts, lw.output)
        except (Exception, SystemExit) as e:
            user_code_failed(e, f"timestamp/watermark assignment ({self.strategy!r})", record, on_bad=self.dead.add)
            return
        record.timestamp = timestamp_or_none(record.timestamp, ts)
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
            except (Exception, SystemExit) as e:
                user_code_failed(e, f"watermark generator ({self.strategy!r})",
                                 partition=lane[1] if isinstance(lane, tuple) else lane)
            for ev in lw.output.take():
                self.emit_lane_event(lane, LaneEvent.of(ev))
