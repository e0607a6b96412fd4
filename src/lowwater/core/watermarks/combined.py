"""Combining partial watermarks (Flink's ``CombinedWatermarkStatus``)."""

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
    """The minimum over non-idle partial watermarks, which only advances.

    * With no inputs, nothing is emitted.
    * If every input is idle, the combination is idle and no watermark is emitted.
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
        """Recompute; True when the combined watermark advanced."""
        if not self.partials:
            return False
        minimum: int | None = None
        for p in self.partials:
            if not p.idle and (minimum is None or p.watermark < minimum):
                minimum = p.watermark
        self.idle = minimum is None
        if minimum is not None and minimum > self.combined_watermark:
            self.combined_watermark = minimum
            return True
        return False
