"""What flows between the reference runtime's nodes: records and lane events."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal

from lowwater.core.watermarks import WatermarkEvent

__all__ = ["Lane", "LaneEvent", "LateRecord", "Record"]

Lane = Hashable
"""One parallel path through the pipeline: ``(source node id, partition)`` before an
exchange, ``(operator node id, 0)`` after one. Each lane has its own watermark."""


@dataclass(slots=True)
class Record:
    value: Any
    timestamp: int | None
    lane: Lane
    partition: int | None = None
    offset: int | None = None
    source: str | None = None
    """The name of the source it was read from, in a job with several sources (None in a job with
    one): a dead letter's partition and offset alone do not say whose they are."""


@dataclass(slots=True)
class LateRecord(Record):
    """A late element on its way to the late side output, with the windows that rejected it
    (Flink's operator gives the element alone: a sink that takes rows gets ``value``; the
    Spark engine's DataFrame sinks also get where it came from and these windows)."""

    rejected: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class LaneEvent:
    """A :class:`~lowwater.core.watermarks.WatermarkEvent` on a lane, or ``register``: a new lane."""

    kind: Literal["watermark", "idle", "active", "register"]
    timestamp: int = 0

    @staticmethod
    def of(event: WatermarkEvent) -> LaneEvent:
        return LaneEvent(event.kind, event.timestamp)

    def watermark_event(self) -> WatermarkEvent:
        """The watermark-status change this is (a ``register`` is none)."""
        if self.kind == "register":
            raise ValueError("a lane registration is not a watermark event")
        return WatermarkEvent(self.kind, self.timestamp)
