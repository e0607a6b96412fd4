"""Combining partial watermarks (Flink 2.3's ``CombinedWatermarkStatus``)."""

from __future__ import annotations

from lowwater.core.time import MIN_TIMESTAMP

__all__ = ["CombinedWatermarkStatus", "PartialWatermark"]


class PartialWatermark:
    """One input's watermark and idle flag. Its watermark never regresses."""

    __slots__ = ("idle", "watermark")

    def __init__(self) -> None:
        self.watermark = MIN_TIMESTAMP
        self.idle = False

    def set_watermark(self, watermark: int) -> bool:
        """Set the watermark (clearing idleness); True when it advanced."""
        self.idle = False
        if watermark > self.watermark:
            self.watermark = watermark
            return True
        return False

    def __repr__(self) -> str:
        return f"PartialWatermark({self.watermark}{', idle' if self.idle else ''})"


class CombinedWatermarkStatus:
    """The combined watermark of several inputs, which only advances.

    * While some input is active: the minimum over the active inputs' watermarks.
    * When every input is idle: the maximum over *all* inputs' watermarks (Flink 2.3
      flushes them, so the order in which inputs went idle does not matter), and the
      combination is idle.
    * With no inputs, nothing is emitted.

    >>> s = CombinedWatermarkStatus(); a, b = PartialWatermark(), PartialWatermark()
    >>> s.add(a); s.add(b)
    >>> _ = a.set_watermark(5), b.set_watermark(9)
    >>> s.update_combined_watermark(), s.combined_watermark
    (True, 5)
    >>> a.idle = b.idle = True
    >>> s.update_combined_watermark(), s.combined_watermark, s.idle
    (True, 9, True)
    """

    def __init__(self) -> None:
        self.partials: list[PartialWatermark] = []
        self.combined_watermark = MIN_TIMESTAMP
        self.idle = False

    def add(self, partial: PartialWatermark) -> None:
        self.partials.append(partial)

    def remove(self, partial: PartialWatermark) -> bool:
        try:
            self.partials.remove(partial)
        except ValueError:
            return False
        return True

    def update_combined_watermark(self) -> bool:
        """Recompute; True when the combined watermark advanced (``idle`` is updated too)."""
        if not self.partials:
            return False
        minimum_active: int | None = None
        maximum = MIN_TIMESTAMP
        for p in self.partials:
            maximum = max(maximum, p.watermark)
            if not p.idle and (minimum_active is None or p.watermark < minimum_active):
                minimum_active = p.watermark
        self.idle = minimum_active is None
        candidate = maximum if minimum_active is None else minimum_active
        if candidate > self.combined_watermark:
            self.combined_watermark = candidate
            return True
        return False
