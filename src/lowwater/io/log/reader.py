"""Reading a partitioned log by offset range (deterministic, for exactly-once replay)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from lowwater.core.errors import ConfigurationError
from lowwater.io.log.directory import (
    _open_existing_root,
)
from lowwater.io.log.format import (
    LogRecord,
    _as_int,
    _check_partition,
)

__all__ = ["PartitionedLogReader"]


class PartitionedLogReader:
    """Read a partitioned log by offset range.

    Parameters
    ----------
    root : str or os.PathLike
        The log directory. It must exist and hold a manifest or ``partition=<N>``
        directories.

    Raises
    ------
    ConfigurationError
        ``root`` is missing, not a directory or not a lowwater log; ``format`` when the
        manifest names an unknown format.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._log = _open_existing_root(root)
        self.root = self._log.root

    def partitions(self) -> list[int]:
        """Known partitions, sorted; re-read from disk on every call so new ones appear."""
        return self._log.partitions()

    def end_offsets(self) -> dict[int, int]:
        """Next offset of every partition (number of complete records), from disk."""
        return {p: self._log.end_offset(p) for p in self._log.partitions()}

    def segment_files(self, partition: int) -> list[tuple[int, Path]]:
        """``(first_offset, path)`` of a partition's segments, ascending."""
        return [(segment.first_offset, segment.path) for segment in self._log.segments(_check_partition(partition))]

    def segment_starts(self, partition: int) -> list[int]:
        """First offsets of a partition's segments, ascending (empty for an unknown partition)."""
        return [segment.first_offset for segment in self._log.segments(_check_partition(partition))]

    def read(
        self,
        start_offsets: Mapping[int, int],
        end_offsets: Mapping[int, int] | None = None,
        max_records_per_partition: int | None = None,
        exact_numbers: bool = False,
    ) -> list[LogRecord]:
        """Records with ``start <= offset < end`` in ``(partition, offset)`` order.

        Parameters
        ----------
        start_offsets : mapping of partition to offset
            Partitions to read and the first offset of each (inclusive). Partitions not
            listed are not read.
        end_offsets : mapping of partition to offset, optional
            Exclusive end per partition; a partition not listed (or ``None``) reads up to
            the current end offset. An end beyond the current end offset is clipped to it:
            records are never invented.
        max_records_per_partition : int, optional
            At most this many records per partition: ``end = min(end, start + max)``.
        exact_numbers : bool
            Decode a JSON number that is not an integer as the ``Decimal`` it says, which a
            ``DECIMAL`` field is read from (:func:`~lowwater.io.fields.decode_json`), not as a float.

        Returns
        -------
        list of LogRecord
            For a fixed ``[start, end)`` that is already written, the same records on
            every call. Undecodable records are returned with ``value=None`` and ``error``.

        Raises
        ------
        ConfigurationError
            A negative or non-int offset or partition, an unknown partition, an end below
            its start, or a negative ``max_records_per_partition``.
        CorruptLogError
            The segments of a partition being read do not line up.
        """
        if max_records_per_partition is not None:
            limit = _as_int(max_records_per_partition)
            if limit is None or limit < 0:
                raise ConfigurationError(
                    "max_records_per_partition",
                    f"must be an int >= 0 or None, got {max_records_per_partition!r}",
                )
        known = set(self._log.partitions())
        out: list[LogRecord] = []
        requested = sorted(
            (_check_partition(p, "start_offsets"), s) for p, s in start_offsets.items()
        )
        for partition, raw_start in requested:
            if partition not in known:
                raise ConfigurationError(
                    "start_offsets",
                    f"partition {partition} is not in the log at {self.root}; "
                    f"known partitions: {sorted(known)}",
                )
            start = _as_int(raw_start)
            if start is None or start < 0:
                raise ConfigurationError(
                    "start_offsets",
                    f"offset of partition {partition} must be an int >= 0, got {raw_start!r}",
                )
            end = self._log.end_offset(partition)
            if end_offsets is not None and partition in end_offsets:
                requested_end = _as_int(end_offsets[partition])
                if requested_end is None or requested_end < start:
                    raise ConfigurationError(
                        "end_offsets",
                        f"end of partition {partition} must be an int >= its start {start}, "
                        f"got {end_offsets[partition]!r}",
                    )
                end = min(end, requested_end)
            if max_records_per_partition is not None:
                end = min(end, start + max_records_per_partition)
            if end > start:
                out.extend(self._log.read_partition(partition, start, end, exact_numbers))
        return out

    def __repr__(self) -> str:
        return f"PartitionedLogReader({str(self.root)!r})"
