"""The file-system view of a partitioned log shared by its reader and writer: the manifest,
the partition directories, the segments and their record counts."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lowwater.core.errors import ConfigurationError
from lowwater.io.fields import decode_json
from lowwater.io.log.format import (
    _MANIFEST_KIND,
    _MANIFEST_VERSION,
    _PARTITION_DIR,
    _SEGMENT_FILE,
    MANIFEST_NAME,
    CorruptLogError,
    LogRecord,
    _as_int,
    _bad,
    _check_format,
    _decode_line,
    _from_object,
    _pyarrow,
    _snippet,
)
from lowwater.util.files import atomic_write, is_uri


@dataclass(frozen=True)
class _Segment:
    first_offset: int
    path: Path
    fmt: str


class _LogDirectory:
    """Shared file-system view of a log: manifest, partitions, segments, record counts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # partition directory -> (its last segment counted, size, mtime_ns, complete records, has a
        # trailing partial line): one per partition, as only a partition's last segment is counted
        # (the end offset) and it changes as the log grows; keyed by segment, the cache held every
        # segment that was ever a last one, for as long as the query ran (session 41's soak probe)
        self._counts: dict[Path, tuple[Path, int, int, int, bool]] = {}

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
        cached = self._counts.get(segment.path.parent)
        if cached is not None and cached[:3] == (segment.path, st.st_size, st.st_mtime_ns):
            return cached[3], cached[4]
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
        self._counts[segment.path.parent] = (segment.path, st.st_size, st.st_mtime_ns, count, partial)
        return count, partial

    def end_offset(self, partition: int) -> int:
        """Next offset of a partition: first offset of the last segment + its records."""
        segments = self.segments(partition)
        if not segments:
            return 0
        last = segments[-1]
        return last.first_offset + self._count(last)[0]

    # reading ----------------------------------------------------------------

    def read_partition(self, partition: int, start: int, end: int, exact_numbers: bool = False) -> list[LogRecord]:
        """Records ``start <= offset < end`` of one partition; ``end`` <= the end offset. With
        ``exact_numbers``, a JSON number that is not an integer is a ``Decimal``, for a
        ``DECIMAL`` field (:func:`~lowwater.io.fields.decode_json`)."""
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
            out.extend(self._read_segment(partition, segment, seg_end, start, end, exact_numbers))
        return out

    def _read_segment(
        self, partition: int, segment: _Segment, seg_end: int | None, start: int, end: int,
        exact_numbers: bool = False,
    ) -> list[LogRecord]:
        """Decode the records of ``segment`` in ``[start, end)``.

        ``seg_end`` is the next segment's first offset, or ``None`` for the last segment.
        A closed segment must hold exactly ``seg_end - first_offset`` records.
        """
        first = segment.first_offset
        lines: list[bytes] = []
        columns: dict[str, list[Any]] = {}
        truncated_at = None
        # only the records asked for become Python objects (a reader that wants the first 200
        # records of a 250,000-record segment holds 200), while the whole segment is counted
        lo = max(start, first) - first
        if segment.fmt == "jsonl":
            data = segment.path.read_bytes()
            count = data.count(b"\n")
            if data and not data.endswith(b"\n") and seg_end is not None:
                # A closed segment's unterminated last line is a record: report it.
                truncated_at = first + count
                count += 1
            hi = max(lo, min(end, first + count) - first)
            if hi < min(count, 10_000):  # the head of the segment: cut it off first (no copy of the rest)
                cut = -1
                for _ in range(hi):
                    cut = data.index(b"\n", cut + 1)
                lines = data[:cut + 1].split(b"\n")[:hi]
            else:
                lines = data.split(b"\n", hi)[:hi]
        else:
            count, columns = self._read_parquet(segment, lo, end - first)
            hi = max(lo, min(end, first + count) - first)
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
        for k in range(lo, hi):
            if segment.fmt == "jsonl":
                record = _decode_line(partition, first + k, lines[k], exact_numbers)
                if first + k == truncated_at and record.error is not None:
                    record = _bad(
                        partition, first + k,
                        f"truncated line (no trailing newline) in a closed segment: "
                        f"{record.error}",
                    )
            else:
                record = self._decode_parquet_row(partition, first + k, columns, k - lo, exact_numbers)
            out.append(record)
        return out

    def _read_parquet(self, segment: _Segment, lo: int, hi: int) -> tuple[int, dict[str, list[Any]]]:
        """The segment's record count, and its rows ``[lo, hi)`` as columns of Python values."""
        pa, pq = _pyarrow()
        try:
            file = pq.ParquetFile(segment.path)
            count = int(file.metadata.num_rows)
            hi = min(hi, count)
            batches = []
            if hi > lo:
                got = 0
                for batch in file.iter_batches(batch_size=max(1, min(hi, 65_536))):
                    batches.append(batch)
                    got += batch.num_rows
                    if got >= hi:
                        break
            table = pa.Table.from_batches(batches, schema=file.schema_arrow).slice(lo, max(0, hi - lo))
            columns: dict[str, list[Any]] = table.to_pydict()
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise CorruptLogError(f"cannot read parquet segment {segment.path}: {exc}") from exc
        if "value" not in columns:
            raise CorruptLogError(
                f"parquet segment {segment.path} has no 'value' column: {sorted(columns)}"
            )
        return count, columns

    @staticmethod
    def _decode_parquet_row(
        partition: int, offset: int, columns: dict[str, list[Any]], k: int, exact_numbers: bool = False
    ) -> LogRecord:
        text = columns["value"][k]
        if not isinstance(text, str):
            return _bad(partition, offset, f"'value' must be JSON text, got {text!r}")
        try:
            value = decode_json(text) if exact_numbers else json.loads(text)
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


def log_root(root: str | os.PathLike[str]) -> Path:
    """The log's directory: a path, or a ``file:`` URI as Spark users write one
    (``file:///shared/log``). The log is files read with Python's file API where the reading
    runs (the driver, the executors), so any other scheme is refused by name: ``Path`` would
    take ``hdfs://nn/log`` for a relative directory named ``hdfs:`` and report it missing."""
    from urllib.parse import unquote, urlparse

    text = os.fspath(root)
    if not is_uri(text):
        return Path(text)
    scheme = text.partition(":")[0]
    if scheme.lower() != "file":
        raise ConfigurationError(
            "root", f"{text}: a partitioned log is a local or mounted directory, read with Python's file API "
                    f"on the driver and the executors, not a {scheme}: URI; give its path (or a file: URI), "
                    "or read a Kafka topic with KafkaSource")
    parsed = urlparse(text)
    if parsed.netloc not in ("", "localhost"):
        raise ConfigurationError("root", f"{text}: a file: URI of another host ({parsed.netloc}); give a local path")
    return Path(unquote(parsed.path))


def _open_existing_root(root: str | os.PathLike[str]) -> _LogDirectory:
    path = log_root(root)
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
