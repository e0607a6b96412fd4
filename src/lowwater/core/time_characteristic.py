"""Which notion of time drives windows (Flink's ``TimeCharacteristic``)."""

from __future__ import annotations

import enum

__all__ = ["TimeCharacteristic"]


class TimeCharacteristic(enum.Enum):
    """``EVENT_TIME``: timestamps from the data or its source, watermarks from a strategy.
    ``INGESTION_TIME``: the timestamp is the clock when the record enters the source;
    watermarks are automatic and ascending (``ts - 1``).
    ``PROCESSING_TIME``: the operator's clock; ``time_window`` uses processing-time windows.
    """

    EVENT_TIME = "event_time"
    INGESTION_TIME = "ingestion_time"
    PROCESSING_TIME = "processing_time"
