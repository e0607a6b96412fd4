"""One watermark-status change, as a value: a watermark, idle or active.

Every path records what a generator emitted as these events and replays them into the
output that combines them (:class:`~lowwater.core.watermarks.recording.RecordingOutput`).
On the wire (the Spark paths' control rows) an event is the pair ``(kind, timestamp)``;
``idle`` and ``active`` carry timestamp ``0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lowwater.core.watermarks.watermark import Watermark, WatermarkOutput

__all__ = ["WatermarkEvent", "WatermarkEventKind"]

WatermarkEventKind = Literal["watermark", "idle", "active"]
_KINDS: tuple[str, ...] = get_args(WatermarkEventKind)


@dataclass(frozen=True, slots=True)
class WatermarkEvent:
    """``WatermarkEvent("watermark", t)``, ``WatermarkEvent("idle")`` or ``WatermarkEvent("active")``.

    >>> from lowwater.core.watermarks.recording import RecordingOutput
    >>> out = RecordingOutput()
    >>> WatermarkEvent.watermark(7).emit_to(out); WatermarkEvent.idle().emit_to(out)
    >>> [e.to_row() for e in out.events]
    [('watermark', 7), ('idle', 0)]
    """

    kind: WatermarkEventKind
    timestamp: int = 0
    """The watermark's timestamp (milliseconds); ``0`` for ``idle`` and ``active``."""

    @staticmethod
    def watermark(timestamp: int) -> WatermarkEvent:
        return WatermarkEvent("watermark", timestamp)

    @staticmethod
    def idle() -> WatermarkEvent:
        return WatermarkEvent("idle")

    @staticmethod
    def active() -> WatermarkEvent:
        return WatermarkEvent("active")

    def emit_to(self, output: WatermarkOutput) -> None:
        """Call the output method this event records."""
        if self.kind == "watermark":
            output.emit_watermark(Watermark(self.timestamp))
        elif self.kind == "idle":
            output.mark_idle()
        else:
            output.mark_active()

    def to_row(self) -> tuple[str, int]:
        """The wire form: ``(kind, timestamp)`` (a JSON list ``[kind, timestamp]``)."""
        return (self.kind, self.timestamp)

    @staticmethod
    def from_row(row: Sequence[Any]) -> WatermarkEvent:
        """The event :meth:`to_row` made (also from its JSON list)."""
        kind, timestamp = row
        if kind not in _KINDS:
            raise ValueError(f"unknown watermark event kind {kind!r}; expected one of {', '.join(_KINDS)}")
        return WatermarkEvent(kind, int(timestamp))
