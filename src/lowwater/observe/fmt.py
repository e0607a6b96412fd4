"""Watermarks, times, durations and sizes as people read them."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP

__all__ = ["EPOCH_LIKE_MS", "fmt_bytes", "fmt_duration", "fmt_time", "fmt_watermark", "partition_order"]

#: Timestamps at or above this (1973) are shown as UTC date-times, smaller ones as plain milliseconds.
EPOCH_LIKE_MS = 10**11


def fmt_time(ms: int | None) -> str:
    """``2023-11-14 22:13:20.500 UTC`` for epoch-like milliseconds, else the number itself. The zone
    is part of the text: a reader whose Spark session runs in another zone took it for theirs."""
    if ms is None:
        return "-"
    if abs(ms) < EPOCH_LIKE_MS:
        return str(ms)
    try:
        t = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    text = t.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{ms % 1000:03d}" if ms % 1000 else "") + " UTC"


def fmt_watermark(ms: int | None) -> str:
    if ms is None:
        return "-"
    if ms == MIN_TIMESTAMP:
        return "none yet"
    if ms == MAX_TIMESTAMP:
        return "MAX (end of input)"
    return fmt_time(ms)


def fmt_duration(ms: float | None) -> str:
    """``850 ms``, ``12.5 s``, ``3.0 min``, ``2.1 h``, ``4.0 d``; negative durations keep their sign."""
    if ms is None:
        return "-"
    sign, a = ("-" if ms < 0 else ""), abs(ms)
    if a < 1000:
        return f"{sign}{a:.0f} ms"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000)):
        if a >= 2 * size:
            return f"{sign}{a / size:.1f} {unit}"
    return f"{sign}{a / 1000:.1f} s"


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


def partition_order(name: str) -> tuple[str, int, str]:
    """The order partitions are listed in: by what precedes their number (a source's label, a
    Kafka topic), then by the number (``2`` before ``10``, ``clicks-1`` before ``views-0``).

    >>> sorted(["10", "2", "views-0", "clicks-1", "clicks-0", "files:3"], key=partition_order)
    ['2', '10', 'clicks-0', 'clicks-1', 'files:3', 'views-0']
    """
    m = _TRAILING_NUMBER.match(name)
    return (m[1], int(m[2]), name) if m else (name, -1, name)
