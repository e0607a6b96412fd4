"""The partitioned log: lowwater's embedded default source, a directory of growing segments.

In four modules: :mod:`.format` (records and their decoding), :mod:`.directory` (the
files), :mod:`.reader` and :mod:`.writer`.

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

from lowwater.io.log.format import FORMATS, MANIFEST_NAME, CorruptLogError, LogRecord
from lowwater.io.log.reader import PartitionedLogReader
from lowwater.io.log.writer import PartitionedLogWriter

__all__ = [
    "FORMATS",
    "MANIFEST_NAME",
    "CorruptLogError",
    "LogRecord",
    "PartitionedLogReader",
    "PartitionedLogWriter",
]
