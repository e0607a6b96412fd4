"""An operator input fed by several upstream channels (Flink's ``StatusWatermarkValve``).

This is how a union reaches its consumer in Flink: each united source is one channel of
the consumer's input, and the valve decides what the consumer sees. It differs from
:class:`~lowwater.core.watermarks.combined.CombinedWatermarkStatus` (used for the splits
of one source and for the two inputs of a two-input operator) in two ways:

* a channel that becomes active again is *unaligned* until its watermark reaches the
  valve's last output watermark: until then it does not hold the output back;
* when the last active channel goes idle, the maximum over all channels is flushed only
  if that channel's watermark equals the last output watermark.
"""

from __future__ import annotations

from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks.watermark import Watermark, WatermarkOutput

__all__ = ["StatusWatermarkValve"]


class _Channel:
    __slots__ = ("aligned", "idle", "watermark")

    def __init__(self) -> None:
        self.watermark = MIN_TIMESTAMP
        self.idle = False
        self.aligned = True


class StatusWatermarkValve:
    """Watermarks and idleness of ``channels`` inputs, forwarded to ``output``.

    * The output watermark is the minimum over the *aligned* channels (active ones whose
      watermark has caught up with the output); it only advances.
    * A watermark on an idle channel, or while every channel is idle, is ignored.
    * When every channel is idle the output is marked idle, after flushing the maximum
      watermark if the channel that went idle last held the output watermark.

    >>> from lowwater.core.watermarks.recording import RecordingOutput
    >>> out = RecordingOutput(); v = StatusWatermarkValve(2)
    >>> v.input_watermark(0, 10, out); v.input_watermark(1, 4, out); out.watermarks
    [4]
    >>> v.input_idle(1, out); out.watermarks
    [4, 10]
    """

    def __init__(self, channels: int) -> None:
        self.channels = [_Channel() for _ in range(channels)]
        self.last_output_watermark = MIN_TIMESTAMP
        self.idle = False

    def add_channel(self) -> int:
        """A new channel (its watermark ``MIN``, active, aligned); returns its index."""
        self.channels.append(_Channel())
        return len(self.channels) - 1

    def input_watermark(self, channel: int, watermark: int, output: WatermarkOutput) -> None:
        c = self.channels[channel]
        if self.idle or c.idle or watermark <= c.watermark:
            return
        c.watermark = watermark
        if not c.aligned and watermark >= self.last_output_watermark:
            c.aligned = True
        self._output_new_minimum(output)

    def input_idle(self, channel: int, output: WatermarkOutput) -> None:
        c = self.channels[channel]
        if c.idle:
            return
        c.idle = True
        c.aligned = False
        if all(ch.idle for ch in self.channels):
            if c.watermark == self.last_output_watermark:
                maximum = max(ch.watermark for ch in self.channels)
                if maximum > self.last_output_watermark:
                    self.last_output_watermark = maximum
                    output.emit_watermark(Watermark(maximum))
            self.idle = True
            output.mark_idle()
        elif c.watermark == self.last_output_watermark:
            self._output_new_minimum(output)

    def input_active(self, channel: int, output: WatermarkOutput) -> None:
        c = self.channels[channel]
        if not c.idle:
            return
        c.idle = False
        if c.watermark >= self.last_output_watermark:
            c.aligned = True
        if self.idle:
            self.idle = False
            output.mark_active()

    def _output_new_minimum(self, output: WatermarkOutput) -> None:
        aligned = [c.watermark for c in self.channels if c.aligned]
        if aligned and min(aligned) > self.last_output_watermark:
            self.last_output_watermark = min(aligned)
            output.emit_watermark(Watermark(self.last_output_watermark))
