"""Combining one source's lanes (its partitions) into the source's watermark.

The reference runtime keeps one per source in front of each operator input
(:mod:`lowwater.runtime.union_input`); the native Spark path keeps one for its only source.
The minimum over non-idle partitions; the maximum when all are idle (Flink 2.3)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks import Watermark, WatermarkOutputMultiplexer
from lowwater.runtime.records import Lane, LaneEvent

__all__ = ["Exchange", "ExchangeResult"]


@dataclass
class ExchangeResult:
    advanced_to: int | None
    idle: bool
    became_active: bool


@dataclass
class _Underlying:
    emitted: list[int] = field(default_factory=list)
    idle: bool = False
    became_active: bool = False

    def emit_watermark(self, watermark: Watermark) -> None:
        self.emitted.append(watermark.timestamp)
        self.became_active = self.became_active or self.idle
        self.idle = False

    def mark_idle(self) -> None:
        self.idle = True

    def mark_active(self) -> None:
        self.became_active = self.became_active or self.idle
        self.idle = False


class Exchange:
    """Applies lane events to deferred per-lane outputs; :meth:`combine` runs once per batch end.

    Combining once, after every lane has emitted, is Flink's periodic emission: no
    intermediate minimum (from a partly updated set of lanes) reaches the operator.
    """

    keep_history = True
    """Whether :attr:`history` records every combined watermark (the reference runtime's
    ``JobResult``); a long-running engine turns it off, keeping only the last one."""
    advanced_once = False

    def __init__(self, keep_history: bool = True) -> None:
        self._under = _Underlying()
        self.mux = WatermarkOutputMultiplexer(self._under)
        self.history: list[int] = []
        self.keep_history = keep_history

    def on_lane_event(self, lane: Lane, event: LaneEvent) -> None:
        if event.kind == "register":
            if lane not in self.mux:
                self.mux.register_new_output(lane)
            return
        if lane not in self.mux:
            self.mux.register_new_output(lane)
        out = self.mux.get_deferred_output(lane)
        if event.kind == "watermark":
            out.emit_watermark(Watermark(event.timestamp))
        elif event.kind == "idle":
            out.mark_idle()
        elif event.kind == "active":
            out.mark_active()

    def combine(self) -> ExchangeResult:
        self._under.emitted.clear()
        self._under.became_active = False
        self.mux.on_periodic_emit()
        advanced = self._under.emitted[-1] if self._under.emitted else None
        if advanced is not None:
            self.advanced_once = True
            if self.keep_history:
                self.history.append(advanced)
            else:  # bounded: state that lives for months must not grow per batch
                self.history[:] = [advanced]
        return ExchangeResult(advanced, self._under.idle, self._under.became_active)

    @property
    def combined_watermark(self) -> int:
        return self.mux.combined_watermark

    def lane_status(self) -> dict[Lane, tuple[int, bool]]:
        """Each lane's watermark and idle flag."""
        return {lane: (self.mux.partial(lane).watermark, self.mux.partial(lane).idle) for lane in self.mux.output_ids()}

    def watermark_or_min(self) -> int:
        return self.combined_watermark if self.advanced_once or self.history else MIN_TIMESTAMP
