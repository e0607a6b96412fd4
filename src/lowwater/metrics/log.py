"""The metrics log: one JSON line per micro-batch in ``<checkpoint>/lowwater/metrics.jsonl``.

Each line holds what one batch did, with the same meaning on every path (a
:class:`~lowwater.metrics.line.MetricsLine`, written and read as JSON)::

    {"batch_id": 7, "processing_time_ms": 1700000035000, "end_of_input": false, "path": "native",
     "watermark_before": 1699999994999,            # what this batch's elements were judged against
     "combined_watermark": 1699999999999,          # min over non-idle partitions, after the batch
     "partition_watermarks": {"0": 1700000029999, "1": 1699999999999},
     "idle_partitions": ["3"],
     "rows_in": 16000, "rows_late": 12, "rows_late_by_partition": {"0": 5, "2": 7},
     "rows_dead_lettered": 0, "rows_windowed": 15988, "rows_unassigned": 0, "direct": true,
     "operator_rows_in": 0, "operator_rows_dead_lettered": 0,   # general path, when not direct
     "windows_fired": 150, "open_windows": 400, "open_window_starts": 2,
     "state_rows": 400, "state_bytes": 81234, "duration_ms": 812}

``windows_fired`` counts the window results, one per key and window firing (re-firings of
late-but-allowed elements included), whether or not a sink takes them.
``open_windows`` (per key) is ``null`` on the native paths, whose driver keeps only the open
window *starts* (``open_window_starts``); the per-key contents are files on the executors'
side. Counters (``rows_*``, ``windows_fired``) are for this batch alone; a reader sums lines for
totals. Every row read is accounted for (:mod:`lowwater.metrics.accounting`):
``rows_in = rows_windowed + rows_late + rows_dead_lettered + rows_unassigned`` summed over
the batches, where ``direct`` (the window operator is fed straight from the source); with
a map, filter or flat_map before it, the same holds for ``operator_rows_in`` and
``operator_rows_dead_lettered``. Watermarks are epoch milliseconds (``-2**63``: none yet, ``2**63 - 1``: end of input).

Replays. Spark re-runs a batch it had not committed (after a crash, say), and the engine
then rewrites that batch's state and output. The log is append-only, so a replayed batch
appends a second line with the same ``batch_id``: **readers keep the last line per batch
id** (:meth:`MetricsLog.read`), which is the run whose state Spark committed. A line torn
by a crash in mid-write is skipped, and the next append starts on a fresh line. Appending
costs one small write per batch, and nothing is ever rewritten in place; the per-batch
records in ``batches/<id>.json`` hold the same line (``"line"``, next to the processor's raw
``"metrics"``), so :meth:`MetricsLog.compact` (rewrite deduplicated, atomically) is safe at any time a job
is not running.

Retention. A stream runs for weeks, and a line is about 0.7 KB (12 MB a day at a 5-second
trigger). Every :data:`FOLD_EVERY` batches the engine folds all but the newest
:data:`KEEP_LINES` lines into one (:meth:`MetricsLog.fold`): ``folded_from`` to ``batch_id``,
its counters summed (:func:`~lowwater.metrics.line.fold_lines`), so totals, accounting and
``lowwater status`` still cover every batch, and plots show the newest batches one by one. An
end-of-input line is never folded. Followers (live progress, the listener) find the rewritten
file and go on after the last line they read.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from lowwater.core.errors import LowwaterError
from lowwater.metrics.line import MetricsLine, before_line, fold_lines, running_totals
from lowwater.util.files import atomic_write

__all__ = [
    "FOLD_EVERY",
    "KEEP_LINES",
    "METRICS_FILE",
    "CheckpointError",
    "MetricsFollower",
    "MetricsLine",
    "MetricsLog",
    "lines_from_records",
    "read_checkpoint",
    "through",
]

log = logging.getLogger("lowwater.observe")

METRICS_FILE = "metrics.jsonl"

KEEP_LINES = 10_000
"""How many of the newest batches keep a line of their own in the metrics log (at a 5-second
trigger, 14 hours; the file stays under about 8 MB)."""

FOLD_EVERY = 1_000
"""The engine folds the log every this many batches (a rewrite of at most
``KEEP_LINES + FOLD_EVERY`` lines)."""


class CheckpointError(LowwaterError):
    """A directory is missing, or is not a lowwater checkpoint."""


class MetricsLog:
    """``<checkpoint>/lowwater/metrics.jsonl``: append one line per batch, read deduplicated."""

    def __init__(self, checkpoint: str | os.PathLike[str]) -> None:
        self.path = Path(checkpoint) / "lowwater" / METRICS_FILE

    def exists(self) -> bool:
        return self.path.is_file()

    def append(self, line: MetricsLine) -> None:
        data = (json.dumps(line.to_json(), sort_keys=True, default=str) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as f:
            if f.tell() > 0 and not _ends_with_newline(self.path):
                data = b"\n" + data  # isolate a line torn by an earlier crash
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def raw_lines(self) -> Iterator[dict[str, Any]]:
        """Every well-formed line, in file order (replays included)."""
        if not self.exists():
            return
        with open(self.path, "rb") as f:
            for i, raw in enumerate(f, 1):
                line = _parse(raw, self.path, i)
                if line is not None:
                    yield line

    def records(self) -> list[MetricsLine]:
        """One line per batch id (the last written wins: a replay replaces its first run), by batch id."""
        latest: dict[int, dict[str, Any]] = {}
        for line in self.raw_lines():
            latest[int(line["batch_id"])] = line
        return [MetricsLine.from_json(latest[b]) for b in sorted(latest)]

    def read(self) -> list[dict[str, Any]]:
        """:meth:`records` as JSON objects (an older line with every field of today's)."""
        return [line.to_json() for line in self.records()]

    def compact(self) -> None:
        """Rewrite the log deduplicated (atomically). Only while no job writes to it."""
        self._rewrite(self.read())

    def fold(self, keep: int = KEEP_LINES) -> bool:
        """Rewrite the log (atomically) with the lines of the newest ``keep`` batches as they are,
        and one line for all the older ones (:func:`~lowwater.metrics.line.fold_lines`); an
        end-of-input line stays as it is. By the job that appends to it, between two appends;
        ``False`` where there was nothing to fold."""
        if keep < 1:
            raise ValueError(f"keep is at least 1, not {keep}")
        records = self.records()
        old = [x for x in records[:-keep] if not x.end_of_input]
        if all(x.folded_from is not None for x in old):  # nothing, or only what a fold made before
            return False
        folded = fold_lines(old)
        kept = [x for x in records if x.end_of_input or x.batch_id > folded.batch_id]
        self._rewrite([line.to_json() for line in sorted([folded, *kept], key=lambda x: x.batch_id)])
        return True

    def _rewrite(self, lines: list[dict[str, Any]]) -> None:
        atomic_write(self.path, "".join(json.dumps(x, sort_keys=True, default=str) + "\n" for x in lines), fsync=True)

    def follow(self, from_end: bool = False) -> MetricsFollower:
        return MetricsFollower(self.path, from_end=from_end)


class MetricsFollower:
    """Reads the lines appended since the last :meth:`poll` (for live progress and listeners)."""

    def __init__(self, path: Path, from_end: bool = False) -> None:
        self.path = path
        self.offset = path.stat().st_size if from_end and path.exists() else 0
        self._file = _identity(path)
        self._partial = b""
        self._last: int | None = None
        """The batch id of the last line read: a rewritten log is read again after it."""

    def poll(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        skip_through = None
        if _identity(self.path) != self._file:  # folded or compacted: a new file, the lines read are in it
            self._file, self.offset, self._partial, skip_through = _identity(self.path), 0, b"", self._last
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        self.offset += len(chunk)
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        lines = [x for x in (_parse(raw, self.path, None) for raw in complete) if x is not None]
        if skip_through is not None:
            lines = [x for x in lines if x["batch_id"] > skip_through]
        if lines:
            self._last = lines[-1]["batch_id"]
        return lines


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` is (device, inode): an atomic rewrite makes another one."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def _parse(raw: bytes, path: Path, number: int | None) -> dict[str, Any] | None:
    raw = raw.strip()
    if not raw:
        return None
    try:
        line = json.loads(raw)
    except ValueError:
        log.warning("%s%s: skipping a line that is not JSON (torn by a crash?)", path,
                    f":{number}" if number else "")
        return None
    if not isinstance(line, dict) or not isinstance(line.get("batch_id"), int):
        log.warning("%s%s: skipping a line without a batch_id", path, f":{number}" if number else "")
        return None
    return line


def lines_from_records(records: Iterable[Mapping[str, Any]], path: str | None = None) -> list[dict[str, Any]]:
    """Metrics lines from batch records alone (object stores, where no log is appended, and
    checkpoints written before the log existed). Where the oldest record keeps the fold of every
    batch through its own (``"through"``), the batches before it, whose records were deleted
    (:data:`~lowwater.spark.state.KEEP_BATCH_RECORDS`), come first as one folded line.

    A record holds its line (``"line"``). A record older than that holds only the raw
    metrics of the path that wrote it (``path``, recorded in the checkpoint's
    ``pipeline.json``), which say how its counters are kept (:func:`~lowwater.metrics.line.running_totals`).
    """
    by_id = {int(r["batch_id"]): r for r in records if "metrics" in r or "line" in r}
    out = []
    if by_id and "through" in by_id[min(by_id)] and "line" in by_id[min(by_id)]:  # the deleted records' batches
        oldest = by_id[min(by_id)]
        earlier = before_line(MetricsLine.from_json(oldest["through"]), MetricsLine.from_json(oldest["line"]))
        if earlier is not None:
            out.append(earlier.to_json())
    for b in sorted(by_id):
        r = by_id[b]
        if "line" in r:
            out.append(MetricsLine.from_json(r["line"]).to_json())
            continue
        previous = by_id.get(b - 1)
        before = (previous.get("metrics") or {}) if previous is not None else ({} if b == 0 else None)
        out.append(MetricsLine.of_record(r, before, running=running_totals(path), path=path).to_json())
    return out


def through(line: MetricsLine, previous: Mapping[str, Any] | None) -> MetricsLine:
    """What a batch record keeps beside its line: the fold of every batch through it, from the
    previous batch's (``None``: none known, the count starts here)."""
    return fold_lines([MetricsLine.from_json(previous), line] if previous is not None else [line])


def read_checkpoint(checkpoint: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The metrics lines of a checkpoint, one per batch, with clear errors for what is not one."""
    root = Path(checkpoint)
    if not root.exists():
        raise CheckpointError(f"no such directory: {root}; hint: pass the checkpoint location of a lowwater job "
                              "(`lowwater run --checkpoint DIR`, or SparkRuntime(checkpoint_location)); on a "
                              "cluster whose fs.defaultFS is HDFS a plain path is there: pass the URI `lowwater "
                              "run` printed (hdfs://...)")
    if not root.is_dir():
        raise CheckpointError(f"{root} is a file, not a checkpoint directory; hint: pass the directory given as "
                              "the job's checkpoint location")
    mlog = MetricsLog(root)
    if mlog.exists():
        return mlog.read()
    batches = root / "lowwater" / "batches"
    if batches.is_dir():
        records = []
        for p in sorted(batches.glob("*.json"), key=lambda q: int(q.stem) if q.stem.isdigit() else -1):
            try:
                records.append(json.loads(p.read_text()))
            except ValueError:
                log.warning("%s: not JSON, skipped", p)
        return lines_from_records(records, _recorded_path(root))
    inner = [p.parent.parent for p in root.glob("*/lowwater/batches")]
    if (root.parent / "lowwater").is_dir():  # <checkpoint>/lowwater or <checkpoint>/spark was given
        inner = [root.parent]
    hint = (f"did you mean {inner[0]}?" if inner else
            "pass the checkpoint location of a lowwater job (it holds a lowwater/ directory)")
    raise CheckpointError(f"{root} is not a lowwater checkpoint (no lowwater/{METRICS_FILE}); hint: {hint}")


def _recorded_path(checkpoint: Path) -> str | None:
    """The engine path a checkpoint was claimed by (``<checkpoint>/lowwater/pipeline.json``)."""
    try:
        recorded = json.loads((checkpoint / "lowwater" / "pipeline.json").read_text())
    except (OSError, ValueError):
        return None
    path = recorded.get("path") if isinstance(recorded, dict) else None
    return path if isinstance(path, str) else None
