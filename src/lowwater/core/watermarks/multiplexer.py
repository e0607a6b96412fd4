"""Per-partition watermarks combined by their minimum (Flink's ``WatermarkOutputMultiplexer``)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator

from lowwater.core.watermarks.combined import CombinedWatermarkStatus, PartialWatermark
from lowwater.core.watermarks.watermark import Watermark, WatermarkOutput, watermark_time

__all__ = ["WatermarkOutputMultiplexer"]


class WatermarkOutputMultiplexer:
    """Combines the watermark and idleness updates of several partitions.

    Register an output per partition, then emit to its *immediate* output (the combined
    watermark may be forwarded at once) or its *deferred* output (only recorded until
    :meth:`on_periodic_emit` combines everything once). The combined watermark is the
    minimum over non-idle outputs and never regresses. When every output is idle it is the
    maximum over all outputs (Flink 2.3), emitted if that advances it, and then the
    underlying output is marked idle. Nothing is emitted with no outputs at all. Towards
    the underlying output the order is always: ``mark_active`` (if it was idle and is not
    any more), the watermark (if it advanced), ``mark_idle`` (if every output is idle).

    >>> from lowwater.core.watermarks.recording import RecordingOutput
    >>> under = RecordingOutput(); m = WatermarkOutputMultiplexer(under)
    >>> m.register_new_output(0); m.register_new_output(1)
    >>> m.get_deferred_output(0).emit_watermark(Watermark(10))
    >>> m.get_deferred_output(1).emit_watermark(Watermark(4))
    >>> m.on_periodic_emit(); under.watermarks
    [4]
    """

    def __init__(self, underlying: WatermarkOutput) -> None:
        self.underlying = underlying
        self.status = CombinedWatermarkStatus()
        self._outputs: dict[Hashable, PartialWatermark] = {}
        self._underlying_idle = False

    # -- registration ---------------------------------------------------------------
    def register_new_output(self, output_id: Hashable) -> None:
        if output_id in self._outputs:
            raise ValueError(f"Already contains an output for ID {output_id!r}")
        partial = PartialWatermark()
        self._outputs[output_id] = partial
        self.status.add(partial)

    def unregister_output(self, output_id: Hashable) -> bool:
        partial = self._outputs.pop(output_id, None)
        if partial is None:
            return False
        self.status.remove(partial)
        return True

    def __contains__(self, output_id: Hashable) -> bool:
        return output_id in self._outputs

    def output_ids(self) -> Iterator[Hashable]:
        return iter(self._outputs)

    def partial(self, output_id: Hashable) -> PartialWatermark:
        return self._lookup(output_id)

    def get_immediate_output(self, output_id: Hashable) -> WatermarkOutput:
        return _ImmediateOutput(self, self._lookup(output_id))

    def get_deferred_output(self, output_id: Hashable) -> WatermarkOutput:
        return _DeferredOutput(self._lookup(output_id))

    # -- combining ------------------------------------------------------------------
    @property
    def combined_watermark(self) -> int:
        return self.status.combined_watermark

    @property
    def idle(self) -> bool:
        return self.status.idle

    def on_periodic_emit(self) -> None:
        """Combine all outstanding deferred updates once."""
        self._update_combined_watermark()

    def _update_combined_watermark(self) -> None:
        advanced = self.status.update_combined_watermark()
        if self._underlying_idle and (advanced or not self.status.idle):
            self._underlying_idle = False
            self.underlying.mark_active()
        if advanced:
            self.underlying.emit_watermark(Watermark(self.status.combined_watermark))
        if self.status.idle and not self._underlying_idle:
            self._underlying_idle = True
            self.underlying.mark_idle()

    def _lookup(self, output_id: Hashable) -> PartialWatermark:
        try:
            return self._outputs[output_id]
        except KeyError:
            raise ValueError(f"no output registered under id {output_id!r}") from None


class _ImmediateOutput:
    def __init__(self, mux: WatermarkOutputMultiplexer, state: PartialWatermark) -> None:
        self._mux = mux
        self._state = state

    def emit_watermark(self, watermark: Watermark | int) -> None:
        was_idle = self._state.idle
        time = watermark_time(watermark)
        updated = self._state.set_watermark(time)
        if (updated and time > self._mux.combined_watermark) or was_idle:
            self._mux._update_combined_watermark()

    def mark_idle(self) -> None:
        self._state.idle = True
        self._mux._update_combined_watermark()

    def mark_active(self) -> None:
        self._state.idle = False
        self._mux._update_combined_watermark()


class _DeferredOutput:
    def __init__(self, state: PartialWatermark) -> None:
        self._state = state

    def emit_watermark(self, watermark: Watermark | int) -> None:
        self._state.set_watermark(watermark_time(watermark))

    def mark_idle(self) -> None:
        self._state.idle = True

    def mark_active(self) -> None:
        self._state.idle = False
