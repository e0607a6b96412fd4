"""Processing-time lag watermarks (Flink's ``TimeLagWatermarkGenerator`` example)."""

from __future__ import annotations

from typing import Any

from lowwater.core.clock import Clock
from lowwater.core.errors import ConfigurationError
from lowwater.core.watermarks.generator import WatermarkGenerator
from lowwater.core.watermarks.watermark import Watermark, WatermarkOutput

__all__ = ["TimeLagWatermarkGenerator"]


class TimeLagWatermarkGenerator(WatermarkGenerator[Any]):
    """Watermark ``now - lag`` at each periodic emit, from the injected clock (no ``- 1``).

    It ignores the elements, so it advances with no data arriving.

    >>> from lowwater.core.clock import ManualClock
    >>> from lowwater.core.watermarks.recording import RecordingOutput
    >>> g, out = TimeLagWatermarkGenerator(5000, ManualClock(12_000)), RecordingOutput()
    >>> g.on_periodic_emit(out); out.watermarks
    [7000]
    """

    def __init__(self, max_time_lag_ms: int, clock: Clock) -> None:
        if max_time_lag_ms < 0:
            raise ConfigurationError("lag", f"must be >= 0 ms, got {max_time_lag_ms}")
        self.max_time_lag_ms = max_time_lag_ms
        self.clock = clock

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        pass

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(self.clock.now_ms() - self.max_time_lag_ms))

    def __repr__(self) -> str:
        return f"TimeLagWatermarkGenerator({self.max_time_lag_ms} ms)"
