"""Bounded out-of-orderness watermarks (Flink's ``BoundedOutOfOrdernessWatermarks``)."""

from __future__ import annotations

from typing import Any

from lowwater.core.errors import ConfigurationError
from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks.generator import WatermarkGenerator
from lowwater.core.watermarks.watermark import Watermark, WatermarkOutput

__all__ = ["AscendingTimestampsWatermarks", "BoundedOutOfOrdernessWatermarks"]


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator[Any]):
    """Watermark ``max_ts - B - 1`` at each periodic emit; ``MIN`` before any event.

    The ``- 1`` means an element with timestamp exactly ``max_ts - B`` is still on time.

    >>> from lowwater.core.watermarks.recording import RecordingOutput
    >>> g, out = BoundedOutOfOrdernessWatermarks(3000), RecordingOutput()
    >>> g.on_event(None, 10_000, out); g.on_periodic_emit(out); out.watermarks
    [6999]
    """

    def __init__(self, max_out_of_orderness_ms: int) -> None:
        if max_out_of_orderness_ms < 0:
            raise ConfigurationError(
                "max_out_of_orderness",
                f"must be >= 0 ms, got {max_out_of_orderness_ms}",
            )
        self.max_out_of_orderness_ms = max_out_of_orderness_ms
        # Start so that the lowest watermark is MIN_TIMESTAMP.
        self.max_timestamp = MIN_TIMESTAMP + max_out_of_orderness_ms + 1

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        if event_timestamp > self.max_timestamp:
            self.max_timestamp = event_timestamp

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(self.max_timestamp - self.max_out_of_orderness_ms - 1))

    def __repr__(self) -> str:
        return f"BoundedOutOfOrdernessWatermarks({self.max_out_of_orderness_ms} ms)"


class AscendingTimestampsWatermarks(BoundedOutOfOrdernessWatermarks):
    """Monotonous timestamps: bounded out-of-orderness with ``B = 0`` (``max_ts - 1``)."""

    def __init__(self) -> None:
        super().__init__(0)

    def __repr__(self) -> str:
        return "AscendingTimestampsWatermarks()"
