"""The watermark and the output it is emitted to."""

from __future__ import annotations

import numbers
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
    source's ``emit_watermark`` takes it), an integer in the signed 64-bit range either way (DESIGN.md
    section 1). Anything else is a ``TypeError``, and a time past 64 bits a ``ValueError``, that says
    what is wanted: an ``int`` failed as ``'int' object has no attribute 'timestamp'``; a
    ``Watermark("25000")`` was a watermark of text, and ``Watermark(2**63)`` reached the checkpoint,
    where every later batch failed reading it back (a user probe, session 64).

    >>> watermark_time(Watermark(2**63))
    Traceback (most recent call last):
    ...
    ValueError: a watermark is epoch milliseconds in the signed 64-bit range, got 9223372036854775808
    """
    time = watermark.timestamp if isinstance(watermark, Watermark) else watermark
    if not isinstance(time, numbers.Integral) or isinstance(time, bool):
        what = f"Watermark({time!r})" if isinstance(watermark, Watermark) else repr(watermark)
        raise TypeError(f"emit_watermark takes a Watermark (Watermark(t)) or an int of epoch milliseconds, "
                        f"got {what} ({type(time).__name__})")
    if not MIN_TIMESTAMP <= time <= MAX_TIMESTAMP:
        raise ValueError(f"a watermark is epoch milliseconds in the signed 64-bit range, got {time}")
    return int(time)


class WatermarkOutput(Protocol):
    """Where a :class:`~lowwater.core.watermarks.generator.WatermarkGenerator` emits to."""

    def emit_watermark(self, watermark: Watermark | int) -> None:
        """Emit a watermark (or its time, an ``int``). Outputs ignore one that is not above the last."""

    def mark_idle(self) -> None:
        """Mark this output idle: it no longer holds back the combined watermark."""

    def mark_active(self) -> None:
        """Mark this output active again (emitting a watermark does this too)."""
