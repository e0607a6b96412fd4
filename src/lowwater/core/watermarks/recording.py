"""A :class:`WatermarkOutput` that records what was emitted, to be replayed later.

Generators run where their rows are (a lane of the reference runtime, a Spark executor)
and emit into a ``RecordingOutput``; the events are then replayed, in order, into the
output that combines the lanes. Tests use it to see what a generator emitted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from lowwater.core.watermarks.event import WatermarkEvent
from lowwater.core.watermarks.watermark import Watermark, WatermarkOutput, watermark_time

__all__ = ["RecordingOutput"]


class RecordingOutput:
    """Records every call as a :class:`WatermarkEvent`, in order.

    >>> from lowwater.core.watermarks import BoundedOutOfOrdernessWatermarks
    >>> g, out = BoundedOutOfOrdernessWatermarks(3000), RecordingOutput()
    >>> g.on_event(None, 10_000, out); g.on_periodic_emit(out); out.watermarks
    [6999]
    >>> out.to_rows()
    [('watermark', 6999)]
    """

    idle: bool = False
    """Whether the last status call was ``mark_idle`` (kept by :meth:`clear`)."""

    def __init__(self, events: Iterable[WatermarkEvent] = ()) -> None:
        self.events: list[WatermarkEvent] = []
        for event in events:
            event.emit_to(self)

    def emit_watermark(self, watermark: Watermark | int) -> None:
        self.events.append(WatermarkEvent.watermark(watermark_time(watermark)))
        self.idle = False

    def mark_idle(self) -> None:
        self.events.append(WatermarkEvent.idle())
        self.idle = True

    def mark_active(self) -> None:
        self.events.append(WatermarkEvent.active())
        self.idle = False

    @property
    def watermarks(self) -> list[int]:
        """The emitted watermarks' timestamps, in order."""
        return [e.timestamp for e in self.events if e.kind == "watermark"]

    def replay(self, output: WatermarkOutput) -> None:
        """Make the recorded calls on ``output``, in order."""
        for event in self.events:
            event.emit_to(output)

    def take(self) -> list[WatermarkEvent]:
        """The recorded events; the record is empty afterwards."""
        events, self.events = self.events, []
        return events

    def clear(self) -> None:
        self.events.clear()

    def to_rows(self) -> list[tuple[str, int]]:
        """The wire form of the events (the control rows' ``[kind, timestamp]`` pairs)."""
        return [e.to_row() for e in self.events]

    @staticmethod
    def from_rows(rows: Iterable[Sequence[Any]]) -> RecordingOutput:
        """The output :meth:`to_rows` came from (its events; ``idle`` as they leave it)."""
        return RecordingOutput(WatermarkEvent.from_row(r) for r in rows)
