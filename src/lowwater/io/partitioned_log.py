"""The partitioned log: lowwater's embedded default source, a directory of growing segments.

Layout
------
::

    <root>/_partitions.json                                  the manifest
    <root>/partition=<N>/segment-<first_offset:020d>.jsonl   (or ``.parquet``)

* The manifest is ``{"kind": "lowwater.partitioned_log", "version": 1, "format": F,
  "partitions": [0, 1, ...]}`` with ``F`` in ``"jsonl" | "parquet"``. Partition
  directories that appear without being listed (another producer made them) are still
  found: the partitions of a log are the union of the manifest and the ``partition=<N>``
  directories (``N`` a canonical decimal int ``>= 0``; other names are ignored).
* A segment named ``segment-<F>`` holds the records with offsets ``F, F + 1, ...``:
  offsets are **positional**, dense and start at 0 in every partition, so record ``k``
  (0-based) of segment ``F`` has offset ``F + k``, and segment ``F`` ends where the next
  segment starts. The next offset of a partition (its *end offset*) is
  ``F_last + records(F_last)``.
* JSON-lines segments hold one UTF-8 JSON object per line, **every line ended by
  "\\n"**::

      {"partition": 0, "offset": 5, "timestamp": 1700000000000, "value": {...}}\\n

  ``timestamp`` is the source timestamp in epoch ms or ``null``; ``value`` is a JSON
  object. ``partition`` and ``offset`` are optional (external producers may leave them
  out); when present they must match the directory and the line's position.
* Parquet segments (written with pyarrow) have the columns ``partition: int32``,
  ``offset: int64``, ``timestamp: int64`` (nullable) and ``value: string`` (the JSON text
  of the object, so records need not share a schema).

Writing and reading
-------------------
:class:`PartitionedLogWriter` writes one new segment per :meth:`~PartitionedLogWriter.append`
call, atomically: to a hidden temporary file in the partition directory, then
``os.replace``. Readers therefore never see half a Parquet file or half a segment written
by lowwater. Offsets are derived from the files on disk, never from memory, so a writer
reopened on an existing root continues where the log ends. There must be at most one
writer per log at a time.

An external producer may instead append lines to the last JSON-lines segment of a
partition. A last line without its trailing ``"\\n"`` is treated as still being written:
it is neither counted in the end offset nor returned until the newline arrives.

Bad input never vanishes: a line that is not UTF-8, not JSON, not an object, or whose
``value``/``timestamp``/``offset``/``partition`` is wrong comes back as a
:class:`LogRecord` with ``value=None`` and ``error`` set to the reason, at its partition
and offset. Structural damage that cannot be pinned to one record (missing offsets between
segments, overlapping segments, an unreadable Parquet file) raises
:class:`CorruptLogError`.

Reads are deterministic: the same ``[start, end)`` range returns the same records every
time, which exactly-once replay relies on.
"""

from __future__ import annotations

import json
import operator
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lowwater.core.errors import ConfigurationError, LowwaterError
from lowwater.util.files import atomic_write

__all__ = [
    "FORMATS",
    "MANIFEST_NAME",
    "CorruptLogError",
    "LogRecord",
    "PartitionedLogReader",
    "PartitionedLogWriter",
]

FORMATS: tuple[str, ...] = ("jsonl", "parquet")
"""The segment formats a log can be written in."""

MANIFEST_NAME = "_partitions.json"
"""File name of the manifest at the root of a log."""

_MANIFEST_KIND = "lowwater.partitioned_log"
_MANIFEST_VERSION = 1
_PARTITION_DIR = re.compile(r"^partition=(0|[1-9][0-9]*)$")
_SEGMENT_FILE = re.compile(r"^segment-([0-9]{20})\.(jsonl|parquet)$")
_SNIPPET_CHARS = 120


class CorruptLogError(LowwaterError):
    """The log's files are inconsistent in a way no single record can report.

    Raised for missing offsets (a gap between segments), overlapping segments, two
    segments with the same first offset, or a Parquet segment that cannot be read.
    """


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record of a partitioned log.

    Attributes
    ----------
    partition : int
        Partition number, ``>= 0``.
    offset : int
        Position in the partition: dense, from 0, strictly increasing in file order.
    timestamp : int or None
        Source timestamp in epoch milliseconds, if the producer set one.
    value : dict or None
        The payload. ``None`` exactly when ``error`` is set.
    error : str or None
        Why the stored record could not be decoded; ``None`` for a good record.
    """

    partition: int
    offset: int
    timestamp: int | None
    value: dict[str, Any] | None
    error: str | None = None


# --------------------------------------------------------------------------- validation


def _as_int(x: object) -> int | None:
    if isinstance(x, bool):
        return None
    try:
        return operator.index(x)  # type: ignore[arg-type]
    except TypeError:
        return None


def _check_partition(partition: object, parameter: str = "partition") -> int:
    p = _as_int(partition)
    if p is None or p < 0:
        raise ConfigurationError(
            parameter, f"a partition must be an int >= 0, got {partition!r}"
        )
    return p


def _check_format(fmt: object) -> str:
    if fmt not in FORMATS:
        raise ConfigurationError(
            "format", f"unknown log format {fmt!r}; use one of {', '.join(FORMATS)}"
        )
    return str(fmt)


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
    except ImportError as exc:  # pragma: no cover - pyarrow ships with the spark extra
        raise ConfigurationError(
            "format", "parquet segments need pyarrow; pip install 'lowwater[spark]'"
        ) from exc
    return pa, pq


# --------------------------------------------------------------------------- decoding


def _snippet(raw: bytes | str) -> str:
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    if len(text) > _SNIPPET_CHARS:
        text = text[:_SNIPPET_CHARS] + "..."
    return repr(text)


def _bad(partition: int, offset: int, reason: str) -> LogRecord:
    return LogRecord(partition, offset, None, None, reason)


def _from_object(partition: int, offset: int, obj: object, raw: bytes | str) -> LogRecord:
    """Validate one decoded record object; a bad one becomes an error record."""
    if not isinstance(obj, dict):
        return _bad(
            partition, offset, f"record is a JSON {type(obj).__name__}, not an object: "
            f"{_snippet(raw)}"
        )
    if "value" not in obj:
        return _bad(partition, offset, f"record has no 'value' field: {_snippet(raw)}")
    value = obj["value"]
    if not isinstance(value, dict):
        return _bad(
            partition, offset,
            f"'value' must be a JSON object, got {type(value).__name__}: {_snippet(raw)}",
        )
    timestamp = obj.get("timestamp")
    if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, int)):
        return _bad(
            partition, offset,
            f"'timestamp' must be an int (epoch ms) or null, got {timestamp!r}",
        )
    stored_offset = obj.get("offset", offset)
    if stored_offset != offset or isinstance(stored_offset, bool):
        return _bad(
            partition, offset,
            f"stored offset {stored_offset!r} does not match position {offset}",
        )
    stored_partition = obj.get("partition", partition)
    if stored_partition != partition or isinstance(stored_partition, bool):
        return _bad(
            partition, offset,
            f"stored partition {stored_partition!r} does not match directory {partition}",
        )
    return LogRecord(partition, offset, timestamp, value)


def _decode_line(partition: int, offset: int, line: bytes) -> LogRecord:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _bad(partition, offset, f"line is not UTF-8 ({exc}): {_snippet(line)}")
    if not text.strip():
        return _bad(partition, offset, "empty line")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return _bad(partition, offset, f"invalid JSON ({exc}): {_snippet(text)}")
    except RecursionError:
        return _bad(partition, offset, f"JSON nested too deeply to decode: {_snippet(text)}")
    return _from_object(partition, offset, obj, text)


# --------------------------------------------------------------------------- directory


@dataclass(frozen=True)
class _Segment:
    first_offset: int
    path: Path
    fmt: str


class _LogDirectory:
    """Shared file-system view of a log: manifest, partitions, segments, record counts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # path -> (size, mtime_ns, complete records, has a trailing partial line)
        self._counts: dict[Path, tuple[int, int, int, bool]] = {}

    # manifest ---------------------------------------------------------------

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST_NAME

    def read_manifest(self) -> dict[str, Any] | None:
        path = self.manifest_path
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            manifest = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(
                "root", f"manifest {path} is not valid JSON ({exc}); restore or delete it"
            ) from exc
        if not isinstance(manifest, dict) or not isinstance(manifest.get("partitions"), list):
            raise ConfigurationError(
                "root", f"manifest {path} is not a lowwater log manifest: {_snippet(text)}"
            )
        _check_format(manifest.get("format"))
        return manifest

    def write_manifest(self, fmt: str, partitions: Sequence[int]) -> None:
        manifest = {
            "kind": _MANIFEST_KIND,
            "version": _MANIFEST_VERSION,
            "format": fmt,
            "partitions": sorted(set(partitions)),
        }
        data = (json.dumps(manifest, indent=2) + "\n").encode("utf-8")
        _atomic_write_bytes(self.root, MANIFEST_NAME, data, fsync=True)

    # partitions -------------------------------------------------------------

    def partition_dir(self, partition: int) -> Path:
        return self.root / f"partition={partition}"

    def partition_dirs(self) -> list[int]:
        found = []
        with os.scandir(self.root) as entries:
            for entry in entries:
                m = _PARTITION_DIR.match(entry.name)
                if m and entry.is_dir():
                    found.append(int(m.group(1)))
        return sorted(found)

    def partitions(self) -> list[int]:
        manifest = self.read_manifest()
        listed = [] if manifest is None else [_as_int(p) for p in manifest["partitions"]]
        known = {p for p in listed if p is not None and p >= 0}
        known.update(self.partition_dirs())
        return sorted(known)

    # segments ---------------------------------------------------------------

    def segments(self, partition: int) -> list[_Segment]:
        directory = self.partition_dir(partition)
        segments: dict[int, _Segment] = {}
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            return []
        for entry in entries:
            m = _SEGMENT_FILE.match(entry.name)
            if not m:
                continue  # temporary files, README, ... are not segments
            first = int(m.group(1))
            if first in segments:
                raise CorruptLogError(
                    f"two segments start at offset {first} in {directory}: "
                    f"{segments[first].path.name} and {entry.name}; remove one"
                )
            segments[first] = _Segment(first, Path(entry.path), m.group(2))
        return [segments[f] for f in sorted(segments)]

    def _count(self, segment: _Segment) -> tuple[int, bool]:
        """(complete records, has a trailing partial line) of a segment, cached by size."""
        st = segment.path.stat()
        cached = self._counts.get(segment.path)
        if cached is not None and cached[:2] == (st.st_size, st.st_mtime_ns):
            return cached[2], cached[3]
        if segment.fmt == "jsonl":
            data = segment.path.read_bytes()
            count, partial = data.count(b"\n"), bool(data) and not data.endswith(b"\n")
        else:
            _, pq = _pyarrow()
            try:
                count, partial = pq.read_metadata(segment.path).num_rows, False
            except Exception as exc:  # pyarrow raises several types for a damaged file
                raise CorruptLogError(
                    f"cannot read parquet segment {segment.path}: {exc}"
                ) from exc
        self._counts[segment.path] = (st.st_size, st.st_mtime_ns, count, partial)
        return count, partial

    def end_offset(self, partition: int) -> int:
        """Next offset of a partition: first offset of the last segment + its records."""
        segments = self.segments(partition)
        if not segments:
            return 0
        last = segments[-1]
        return last.first_offset + self._count(last)[0]

    # reading ----------------------------------------------------------------

    def read_partition(self, partition: int, start: int, end: int) -> list[LogRecord]:
        """Records ``start <= offset < end`` of one partition; ``end`` <= the end offset."""
        segments = self.segments(partition)
        if start >= end:
            return []
        if not segments or segments[0].first_offset > start:
            first = segments[0].first_offset if segments else 0
            raise CorruptLogError(
                f"offsets {start}..{first - 1} of partition {partition} are missing: the "
                f"first segment in {self.partition_dir(partition)} starts at {first}"
            )
        out: list[LogRecord] = []
        for i, segment in enumerate(segments):
            is_last = i == len(segments) - 1
            seg_end = None if is_last else segments[i + 1].first_offset
            if seg_end is not None and seg_end <= start:
                continue
            if segment.first_offset >= end:
                break
            out.extend(self._read_segment(partition, segment, seg_end, start, end))
        return out

    def _read_segment(
        self, partition: int, segment: _Segment, seg_end: int | None, start: int, end: int
    ) -> list[LogRecord]:
        """Decode the records of ``segment`` in ``[start, end)``.

        ``seg_end`` is the next segment's first offset, or ``None`` for the last segment.
        A closed segment must hold exactly ``seg_end - first_offset`` records.
        """
        first = segment.first_offset
        lines: list[bytes] = []
        columns: dict[str, list[Any]] = {}
        truncated_at = None
        if segment.fmt == "jsonl":
            lines = segment.path.read_bytes().split(b"\n")
            tail = lines.pop()  # b"" when the file ends with "\n"
            if tail and seg_end is not None:
                # A closed segment's unterminated last line is a record: report it.
                truncated_at = first + len(lines)
                lines.append(tail)
            count = len(lines)
        else:
            columns = self._read_parquet(segment)
            count = len(columns["value"])
        if seg_end is not None and count != seg_end - first:
            what = "missing" if count < seg_end - first else "overlapping"
            raise CorruptLogError(
                f"segment {segment.path} holds {count} records but the next segment starts "
                f"at offset {seg_end} (expected {seg_end - first}): offsets are {what}"
            )
        if seg_end is None and first + count < end:
            raise CorruptLogError(
                f"segment {segment.path} shrank to {count} records while being read"
            )
        out = []
        for k in range(max(start, first) - first, min(end, first + count) - first):
            if segment.fmt == "jsonl":
                record = _decode_line(partition, first + k, lines[k])
                if first + k == truncated_at and record.error is not None:
                    record = _bad(
                        partition, first + k,
                        f"truncated line (no trailing newline) in a closed segment: "
                        f"{record.error}",
                    )
            else:
                record = self._decode_parquet_row(partition, first + k, columns, k)
            out.append(record)
        return out

    def _read_parquet(self, segment: _Segment) -> dict[str, list[Any]]:
        _, pq = _pyarrow()
        try:
            columns: dict[str, list[Any]] = pq.read_table(segment.path).to_pydict()
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise CorruptLogError(f"cannot read parquet segment {segment.path}: {exc}") from exc
        if "value" not in columns:
            raise CorruptLogError(
                f"parquet segment {segment.path} has no 'value' column: {sorted(columns)}"
            )
        return columns

    @staticmethod
    def _decode_parquet_row(
        partition: int, offset: int, columns: dict[str, list[Any]], k: int
    ) -> LogRecord:
        text = columns["value"][k]
        if not isinstance(text, str):
            return _bad(partition, offset, f"'value' must be JSON text, got {text!r}")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return _bad(partition, offset, f"invalid JSON in 'value' ({exc}): {_snippet(text)}")
        except RecursionError:
            return _bad(partition, offset, f"JSON in 'value' nested too deeply to decode: {_snippet(text)}")
        obj: dict[str, Any] = {"value": value}
        for name in ("timestamp", "offset", "partition"):
            if name in columns and columns[name][k] is not None:
                obj[name] = columns[name][k]
        return _from_object(partition, offset, obj, text)


def _atomic_write_bytes(directory: Path, name: str, data: bytes, *, fsync: bool) -> None:
    """Write ``directory/name`` via a hidden temporary file and ``os.replace``."""
    atomic_write(directory / name, data, fsync=fsync, unique_tmp=True)


def _open_existing_root(root: str | os.PathLike[str]) -> _LogDirectory:
    path = Path(root)
    if not path.exists():
        raise ConfigurationError(
            "root", f"log directory {path} does not exist; create it with PartitionedLogWriter"
        )
    if not path.is_dir():
        raise ConfigurationError("root", f"{path} is a file, not a log directory")
    log = _LogDirectory(path)
    if log.read_manifest() is None and not log.partition_dirs():
        raise ConfigurationError(
            "root",
            f"{path} is not a lowwater log: it has neither {MANIFEST_NAME} nor "
            "partition=<N> directories",
        )
    return log


# --------------------------------------------------------------------------- public API


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
                out.extend(self._log.read_partition(partition, start, end))
        return out

    def __repr__(self) -> str:
        return f"PartitionedLogReader({str(self.root)!r})"


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
        path = Path(root)
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
            Payloads; each must be a JSON-serialisable mapping with string keys.
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
                encoded.append(json.dumps(dict(value), allow_nan=False, separators=(",", ":")))
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
            if ts is None:
                raise ConfigurationError(
                    "timestamps", f"timestamps[{k}] must be an int (epoch ms) or None, got {t!r}"
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
