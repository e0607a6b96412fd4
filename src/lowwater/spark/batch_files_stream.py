"""A :class:`~lowwater.spark.sources.BatchFilesSource` directory as a streaming DataFrame.

Spark's JSON file source read these files before, by its own rules: a value of another type
than its field's became null, a number given for a ``STRING`` field became its text, a
``DECIMAL`` was rounded. The reference runtime read the same lines with ``json.loads`` and no
check, so the two runtimes saw different elements in one file (a user probe, session 56).

Now Spark's binary file source hands each file's bytes, whole, to the very function the
reference runtime reads a file with (:func:`~lowwater.io.batch_files.read_batch_data`: the
rules of :mod:`lowwater.io.fields`, a value that is not its type a dead letter with its reason
in ``_corrupt``), in ``mapInArrow`` on an executor. One file is one micro-batch
(``maxFilesPerTrigger=1``; Spark takes new files in modification-time order, which
:meth:`BatchFilesSource.write` sets to the name order), so a restart replays the same batches
and an empty file is an empty micro-batch.

A Python streaming data source did the same with offsets of its own, and the shared scenarios
on Spark took 31% longer: every query started a Python process for the source's offsets.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from lowwater.io.arrow_records import elements_to_arrow
from lowwater.io.batch_files import FILE_GLOB, read_batch_data
from lowwater.spark.log_stream import schema_ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["batch_files_stream"]

_BINARY_FILE = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
"""The binary file source's schema (a streaming read takes none of its own)."""


def batch_files_stream(spark: SparkSession, directory: str, fields: Sequence[tuple[str, str]]) -> DataFrame:
    """The batch files in ``directory`` as a streaming DataFrame: the standard columns, the
    declared ``fields`` (canonical, :func:`~lowwater.io.fields.parse_fields`) and ``_corrupt``."""
    files = (spark.readStream.format("binaryFile").schema(_BINARY_FILE).option("maxFilesPerTrigger", 1)
             .option("pathGlobFilter", FILE_GLOB).load(directory).select("path", "content"))
    declared = [(str(n), str(t)) for n, t in fields]

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist(),
                                     strict=True):
                rows = [(r.partition, r.offset, r.timestamp, seq, r.value, r.error)
                        for r, seq in read_batch_data(content, path, declared)]
                yield elements_to_arrow(rows, declared)

    return files.mapInArrow(read, schema_ddl(declared))
