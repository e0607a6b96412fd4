"""Appending to a partitioned log: one atomic segment file per call."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lowwater.core.errors import ConfigurationError
from lowwater.io.log.directory import (
    _atomic_write_bytes,
    _LogDirectory,
    log_root,
)
from lowwater.io.log.format import (
    MANIFEST_NAME,
    CorruptLogError,
    _as_int,
    _check_format,
    _check_partition,
    _pyarrow,
)
from lowwater.metrics.dead_letters import exact_json
from lowwater.util.files import atomic_write

__all__ = ["PartitionedLogWriter"]


def _json_object(value: Mapping[str, Any]) -> str:
    """``value`` as compact JSON; a finite ``Decimal`` is a JSON number with exactly its digits
    (``12345678901234567.89``), the text a ``DECIMAL`` field is read from, where the encoder refused
    it and a float rounded it. NaN, infinities and other values JSON has no kind for are refused."""
    return exact_json(dict(value), allow_nan=False)


class PartitionedLogWriter:
    """Append records to a partitioned log, one atomic segment file per call.

    Parameters
    ----------
    root : str or os.PathLike
        The log directory. Created if missing; an existing log is continued (offsets come
        from its segment files). An existing non-empty directory that is not a log is
        refused.
    format : {"jsonl", "parquet"}, optional
        Segment format of a new log (default ``"jsonl"``). For an existing log it must
        match the manifest, or be ``None`` to adopt it.
    fsync : bool, default True
        ``fsync`` every segment before publishing it, so a record a reader has seen
        survives a machine crash.

    Raises
    ------
    ConfigurationError
        ``format`` unknown or different from the existing log's; ``root`` a file or a
        non-empty directory that is not a log.

    Notes
    -----
    One writer per log at a time: offsets are derived from disk on every append, but two
    concurrent writers could both claim the same offsets.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        format: str | None = None,
        *,
        fsync: bool = True,
    ) -> None:
        if format is not None:
            _check_format(format)
        path = log_root(root)
        if path.exists() and not path.is_dir():
            raise ConfigurationError("root", f"{path} is a file, not a log directory")
        path.mkdir(parents=True, exist_ok=True)
        self._log = _LogDirectory(path)
        self.root = path
        self.fsync = fsync
        self._last_mtime_ns: int | None = None
        manifest = self._log.read_manifest()
        if manifest is not None:
            existing = str(manifest["format"])
            if format is not None and format != existing:
                raise ConfigurationError(
                    "format",
                    f"the log at {path} is written in {existing!r}, not {format!r}; "
                    "pass format=None to continue it",
                )
            self.format = existing
            return
        dirs = self._log.partition_dirs()
        if not dirs and any(not e.name.startswith(".") for e in os.scandir(path)):
            raise ConfigurationError(
                "root",
                f"{path} is not empty and not a lowwater log (no {MANIFEST_NAME}, no "
                "partition=<N> directories); use an empty or new directory",
            )
        self.format = format or "jsonl"
        self._log.write_manifest(self.format, dirs)

    def partitions(self) -> list[int]:
        """Known partitions, sorted."""
        return self._log.partitions()

    def end_offsets(self) -> dict[int, int]:
        """Next offset of every partition, derived from the segment files."""
        return {p: self._log.end_offset(p) for p in self._log.partitions()}

    def create_partition(self, partition: int) -> None:
        """Create ``partition=<N>`` and list it in the manifest (no-op if it exists)."""
        p = _check_partition(partition)
        self._log.partition_dir(p).mkdir(exist_ok=True)
        manifest = self._log.read_manifest()
        listed = [] if manifest is None else list(manifest["partitions"])
        if p not in listed:
            self._log.write_manifest(self.format, [*listed, p])

    def append(
        self,
        partition: int,
        values: Sequence[Mapping[str, Any]],
        timestamps: Sequence[int | None] | None = None,
    ) -> list[int]:
        """Append records as one new segment and return the offsets assigned to them.

        Parameters
        ----------
        partition : int
            Target partition, ``>= 0``; created if it does not exist.
        values : sequence of dict
            Payloads; each must be a JSON-serialisable mapping with string keys (a finite
            ``Decimal`` is written as a JSON number with exactly its digits).
        timestamps : sequence of int or None, optional
            Source timestamps in epoch ms, one per value (``None`` for "unknown").

        Returns
        -------
        list of int
            ``[end, end + 1, ..., end + len(values) - 1]`` where ``end`` is the
            partition's end offset before the call. Nothing is written for no values.

        Raises
        ------
        ConfigurationError
            A bad ``partition``, a value that is not a JSON object, ``timestamps`` of the
            wrong length or type.
        """
        p = _check_partition(partition)
        values = list(values)
        stamps = self._check_timestamps(values, timestamps)
        encoded: list[str] = []
        for k, value in enumerate(values):
            if not isinstance(value, Mapping):
                raise ConfigurationError(
                    "values", f"values[{k}] must be a dict, got {type(value).__name__}"
                )
            try:
                encoded.append(_json_object(value))
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(
                    "values", f"values[{k}] is not JSON-serialisable: {exc}"
                ) from exc
        self.create_partition(p)
        if not values:
            return []
        first = self._log.end_offset(p)
        name = f"segment-{first:020d}.{self.format}"
        directory = self._log.partition_dir(p)
        if (directory / name).exists():
            raise CorruptLogError(
                f"{directory / name} already exists but the end offset is {first}; "
                "is another writer running?"
            )
        offsets = list(range(first, first + len(values)))
        if self.format == "jsonl":
            lines = [
                f'{{"partition":{p},"offset":{o},"timestamp":{json.dumps(t)},"value":{v}}}\n'
                for o, t, v in zip(offsets, stamps, encoded, strict=True)
            ]
            _atomic_write_bytes(directory, name, "".join(lines).encode("utf-8"), fsync=self.fsync)
        else:
            self._write_parquet(directory, name, p, offsets, stamps, encoded)
        self._order(directory / name)
        return offsets

    def _order(self, path: Path) -> None:
        """Give ``path`` a modification time a whole millisecond after every segment written
        before it: Spark's file source reads new files in order of their mtime in ms, so
        segments written within one millisecond could otherwise be read out of order (once
        seen as a flaky test). Other writers' segments are found once, on the first append."""
        if self._last_mtime_ns is None:
            segments = self.root.glob("partition=*/segment-*")
            self._last_mtime_ns = max((q.stat().st_mtime_ns for q in segments if q != path), default=0)
        st = path.stat()
        want = max(st.st_mtime_ns, (self._last_mtime_ns // 1_000_000 + 1) * 1_000_000)
        if want != st.st_mtime_ns:
            os.utime(path, ns=(st.st_atime_ns, want))
        self._last_mtime_ns = want

    @staticmethod
    def _check_timestamps(
        values: list[Any], timestamps: Sequence[int | None] | None
    ) -> list[int | None]:
        if timestamps is None:
            return [None] * len(values)
        stamps = list(timestamps)
        if len(stamps) != len(values):
            raise ConfigurationError(
                "timestamps",
                f"need one timestamp per value: {len(stamps)} timestamps, {len(values)} values",
            )
        out: list[int | None] = []
        for k, t in enumerate(stamps):
            if t is None:
                out.append(None)
                continue
            ts = _as_int(t)
            if ts is None or not -(2**63) <= ts < 2**63:
                raise ConfigurationError(
                    "timestamps", f"timestamps[{k}] must be a 64-bit int (epoch ms) or None, got {t!r}"
                )
            out.append(ts)
        return out

    def _write_parquet(
        self,
        directory: Path,
        name: str,
        partition: int,
        offsets: list[int],
        stamps: list[int | None],
        encoded: list[str],
    ) -> None:
        pa, pq = _pyarrow()
        table = pa.table(
            {
                "partition": pa.array([partition] * len(offsets), type=pa.int32()),
                "offset": pa.array(offsets, type=pa.int64()),
                "timestamp": pa.array(stamps, type=pa.int64()),
                "value": pa.array(encoded, type=pa.string()),
            }
        )
        atomic_write(directory / name, lambda tmp: pq.write_table(table, tmp), fsync=self.fsync, unique_tmp=True)

    def __repr__(self) -> str:
        return f"PartitionedLogWriter({str(self.root)!r}, format={self.format!r})"
