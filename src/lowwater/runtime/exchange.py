"""Combining one source's lanes (its partitions) into the source's watermark.

The reference runtime keeps one per source in front of each operator input
(:mod:`lowwater.runtime.union_input`); the native Spark path keeps one for its only source.
The minimum over non-idle partitions; the maximum when all are idle (Flink 2.3)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks import RecordingOutput, WatermarkEvent, WatermarkOutputMultiplexer
from lowwater.runtime.records import Lane, LaneEvent

__all__ = ["Exchange", "ExchangeResult", "became_active"]


@dataclass
class ExchangeResult:
    advanced_to: int | None
    idle: bool
    became_active: bool


def became_active(was_idle: bool, events: Iterable[WatermarkEvent]) -> bool:
    """Whether ``events``, emitted by an output that was idle (``was_idle``) or not, make it
    active again: a watermark or ``active`` after ``idle``."""
    became, idle = False, was_idle
    for event in events:
        became = became or (idle and event.kind != "idle")
        idle = event.kind == "idle"
    return became


class _Underlying(RecordingOutput):
    """Only so that general-path checkpoints written before :class:`RecordingOutput` unpickle
    (an exchange's and a union input's outputs): their ``emitted``/``became_active`` lived for
    one ``combine`` only; ``idle`` lasts."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.events = []
        self.idle = bool(state.get("idle", False))


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
        self._under = RecordingOutput()
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
        event.watermark_event().emit_to(self.mux.get_deferred_output(lane))

    def combine(self) -> ExchangeResult:
        was_idle = self._under.idle
        self._under.clear()
        self.mux.on_periodic_emit()
        emitted = self._under.watermarks
        advanced = emitted[-1] if emitted else None
        if advanced is not None:
            self.advanced_once = True
            if self.keep_history:
                self.history.append(advanced)
            else:  # bounded: state that lives for months must not grow per batch
                self.history[:] = [advanced]
        return ExchangeResult(advanced, self._under.idle, became_active(was_idle, self._under.events))

    @property
    def combined_watermark(self) -> int:
        return self.mux.combined_watermark

    def lane_status(self) -> dict[Lane, tuple[int, bool]]:
        """Each lane's watermark and idle flag."""
        return {lane: (self.mux.partial(lane).watermark, self.mux.partial(lane).idle) for lane in self.mux.output_ids()}

    def watermark_or_min(self) -> int:
        return self.combined_watermark if self.advanced_once or self.history else MIN_TIMESTAMP
