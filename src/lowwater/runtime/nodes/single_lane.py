"""The base of the operators with one output lane (windows, two-input operators, sinks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lowwater.core.clock import Clock
from lowwater.core.watermarks import (
    CombinedWatermarkStatus,
    PartialWatermark,
)
from lowwater.runtime.nodes.node import Node
from lowwater.runtime.operator_inputs import combine_input_steps
from lowwater.runtime.records import Lane, LaneEvent
from lowwater.runtime.union_input import UnionInput
from lowwater.runtime.user_code import user_code_failed

__all__: list[str] = []


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

    def end_batch_of(self, operator: Any, clock: Clock, handle: Callable[[Any], None], batch_id: int,
                     user_code: str) -> None:
        """A keyed operator's batch end: every watermark step the inputs make, the status, then
        processing time; ``handle`` takes what each step emits. A raising user function is
        reported as ``user_code``."""
        steps, idle = self.combine_inputs(batch_id)
        try:
            for watermark in steps:
                handle(operator.advance_watermark(watermark))
            self.forward_status(steps, idle)
            handle(operator.advance_processing_time(clock.now_ms()))
        except (Exception, SystemExit) as e:
            user_code_failed(e, user_code)

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


def _lane_labels(lanes: list[Lane]) -> dict[Lane, str]:
    """Partition numbers when all lanes come from one source, else ``node:partition``."""
    sources = {lane[0] for lane in lanes if isinstance(lane, tuple)}
    if len(sources) <= 1:
        return {lane: str(lane[1] if isinstance(lane, tuple) else lane) for lane in lanes}
    return {lane: (f"{lane[0]}:{lane[1]}" if isinstance(lane, tuple) else str(lane)) for lane in lanes}
