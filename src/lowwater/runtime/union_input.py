"""One operator input: the lanes of every source that reaches it, combined as in Flink.

Each source is one Flink source task: its partitions (lanes) combine in the source's own
:class:`~lowwater.runtime.exchange.Exchange` (Flink's ``WatermarkOutputMultiplexer``;
the maximum when all of them are idle). The sources of a union then meet in a
:class:`~lowwater.core.watermarks.StatusWatermarkValve`, one channel per source. With a
single source the valve passes the source's watermark and idleness through unchanged.

Once per batch end every source emits first (``ACTIVE`` if it was idle, its watermark
if that rose, ``IDLE`` if it ends the batch idle, in this order), then the valve is fed:
the sources that end the batch active by ascending watermark, then those that end it
idle, in source order. Only the last watermark the valve emits reaches the operator.
"""

from __future__ import annotations

from collections.abc import Hashable

from lowwater.core.watermarks import RecordingOutput, StatusWatermarkValve
from lowwater.runtime.exchange import Exchange, ExchangeResult, _Underlying, became_active
from lowwater.runtime.records import Lane, LaneEvent

__all__ = ["UnionInput"]


_ValveOutput = _Underlying
"""Only so that general-path checkpoints written before :class:`RecordingOutput` unpickle
(the valve's output then kept its own ``emitted``, ``idle`` and ``became_active``)."""


def _group(lane: Lane) -> Hashable:
    """The source a lane belongs to (``lane[0]`` of ``(source, partition)``); an operator's
    output lane ``("op", position)`` is a source of its own."""
    if isinstance(lane, tuple):
        return lane if lane[0] == "op" else lane[0]
    return None


class UnionInput:
    """Per-source exchanges feeding one valve; :meth:`combine` runs once per batch end."""

    def __init__(self, keep_history: bool = True) -> None:
        self.sources: dict[Hashable, Exchange] = {}
        self.channel: dict[Hashable, int] = {}
        self.valve = StatusWatermarkValve(0)
        self._out = RecordingOutput()
        self.history: list[int] = []
        self.keep_history = keep_history
        self.advanced_once = False

    def on_lane_event(self, lane: Lane, event: LaneEvent) -> None:
        g = _group(lane)
        if g not in self.sources:
            self.sources[g] = Exchange(keep_history=False)
            self.channel[g] = self.valve.add_channel()
        self.sources[g].on_lane_event(lane, event)

    def combine(self) -> ExchangeResult:
        """Every source combines its partitions once; then the valve, in the stated order."""
        results = {g: ex.combine() for g, ex in self.sources.items()}
        order = list(self.sources)
        active = sorted((g for g in order if not results[g].idle), key=lambda g: self.sources[g].combined_watermark)
        idle = [g for g in order if results[g].idle]
        out = self._out
        was_idle = out.idle
        out.clear()
        for g in (*active, *idle):
            r, ch = results[g], self.channel[g]
            if r.became_active or not r.idle:
                self.valve.input_active(ch, out)
            if r.advanced_to is not None:
                self.valve.input_watermark(ch, r.advanced_to, out)
            if r.idle:
                self.valve.input_idle(ch, out)
        emitted = out.watermarks
        advanced = emitted[-1] if emitted else None
        if advanced is not None:
            self.advanced_once = True
            if self.keep_history:
                self.history.append(advanced)
            else:
                self.history[:] = [advanced]
        return ExchangeResult(advanced, self.valve.idle, became_active(was_idle, out.events))

    @property
    def combined_watermark(self) -> int:
        return self.valve.last_output_watermark

    def watermark_or_min(self) -> int:
        return self.valve.last_output_watermark

    def lane_status(self) -> dict[Lane, tuple[int, bool]]:
        """Each lane's watermark and idle flag."""
        out: dict[Lane, tuple[int, bool]] = {}
        for ex in self.sources.values():
            out.update(ex.lane_status())
        return out

    def source_status(self) -> dict[Hashable, tuple[int, bool]]:
        """Each source's combined watermark and idle flag."""
        return {g: (ex.combined_watermark, ex.mux.idle) for g, ex in self.sources.items()}


