"""What one micro-batch of a partitioned log is: the same cut on every runtime.

A batch starts where the previous one ended and takes, per partition, the next records
up to the end offset that is available when the batch is planned, and at most

* ``records_per_batch`` records, and
* the rest of ``segments_per_batch`` segments (the segment holding the start counts as
  the first),

whichever ends sooner (``None``: no limit of that kind). Positions are record offsets,
dense from 0 per partition, so a batch is a ``{partition: end_offset}`` map. The
reference runtime and the Spark source both plan with :meth:`LogBatching.next_end`; on
Spark the ends are written to Spark's offset log before the batch runs, so a restart
replays exactly the batches an uninterrupted run saw.

>>> LogBatching(records_per_batch=2).cut({0: 0, 1: 5}, {0: 3, 1: 5, 2: 1}, segment_starts=lambda p: [0])
{0: 2, 1: 5, 2: 1}
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lowwater.core.errors import ConfigurationError
from lowwater.io.log import PartitionedLogReader

__all__ = ["LogBatching"]


@dataclass(frozen=True)
class LogBatching:
    """Limits of one micro-batch of a partitioned log, per partition (see the module)."""

    records_per_batch: int | None = 1000
    segments_per_batch: int | None = None

    def __post_init__(self) -> None:
        for name in ("records_per_batch", "segments_per_batch"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ConfigurationError(name, f"must be an int >= 1 or None, got {v!r}")

    def cut(self, start: Mapping[int, int], available: Mapping[int, int],
            segment_starts: Callable[[int], list[int]]) -> dict[int, int]:
        """The end offset of the next batch of every available partition.

        ``start`` maps partitions to the end of the previous batch (absent: 0);
        ``available`` to their current end offsets; ``segment_starts(p)`` gives a
        partition's segment first offsets, ascending.
        """
        out: dict[int, int] = {}
        for p in sorted(available):
            s = start.get(p, 0)
            e = available[p]
            if e > s and self.records_per_batch is not None:
                e = min(e, s + self.records_per_batch)
            if e > s and self.segments_per_batch is not None:
                starts = segment_starts(p)
                i = bisect.bisect_right(starts, s) - 1
                if i + self.segments_per_batch < len(starts):
                    e = min(e, starts[i + self.segments_per_batch])
            out[p] = max(e, s)
        return out

    def next_end(self, reader: PartitionedLogReader, start: Mapping[int, int],
                 available: Mapping[int, int] | None = None) -> dict[int, int]:
        """:meth:`cut` against the log on disk (``available``: its end offsets now)."""
        ends = reader.end_offsets() if available is None else available
        return self.cut(start, ends, reader.segment_starts)
