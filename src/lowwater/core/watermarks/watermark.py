"""The watermark and the output it is emitted to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP

__all__ = ["Watermark", "WatermarkOutput"]


@dataclass(frozen=True, order=True)
class Watermark:
    """``Watermark(t)``: no more elements with timestamp ``<= t`` are expected."""

    timestamp: int

    @staticmethod
    def max() -> Watermark:
        """The end-of-input watermark: every event-time window fires."""
        return Watermark(MAX_TIMESTAMP)

    @staticmethod
    def min() -> Watermark:
        return Watermark(MIN_TIMESTAMP)


def watermark_time(watermark: Watermark | int) -> int:
    """The time of what a generator emitted: a :class:`Watermark`, or its time as an ``int`` (as a
    source's ``emit_watermark`` takes it). Anything else is a ``TypeError`` that says what is wanted;
    an ``int`` failed as ``'int' object has no attribute 'timestamp'``."""
    if isinstance(watermark, Watermark):
        return watermark.timestamp
    if isinstance(watermark, int) and not isinstance(watermark, bool):
        return watermark
    raise TypeError(f"emit_watermark takes a Watermark (Watermark(t)) or an int of epoch milliseconds, "
                    f"got {watermark!r} ({type(watermark).__name__})")


class WatermarkOutput(Protocol):
    """Where a :class:`~lowwater.core.watermarks.generator.WatermarkGenerator` emits to."""

    def emit_watermark(self, watermark: Watermark | int) -> None:
        """Emit a watermark (or its time, an ``int``). Outputs ignore one that is not above the last."""

    def mark_idle(self) -> None:
        """Mark this output idle: it no longer holds back the combined watermark."""

    def mark_active(self) -> None:
        """Mark this output active again (emitting a watermark does this too)."""
