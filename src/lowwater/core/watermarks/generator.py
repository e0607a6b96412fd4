"""The watermark generator interface (Flink's ``WatermarkGenerator``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from lowwater.core.watermarks.watermark import WatermarkOutput

__all__ = ["WatermarkGenerator"]

T = TypeVar("T")


class WatermarkGenerator(ABC, Generic[T]):
    """Generates watermarks for one source partition.

    ``on_event`` sees every element with its extracted timestamp and may emit
    (punctuated generators). ``on_periodic_emit`` runs every auto-watermark interval;
    on Spark and in the reference runtime, at the end of each micro-batch.
    Generators hold plain state and are pickled between micro-batches.
    """

    @abstractmethod
    def on_event(self, event: T, event_timestamp: int, output: WatermarkOutput) -> None:
        """Called for every element."""

    @abstractmethod
    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Called periodically; may emit a watermark."""
