"""A :class:`~lowwater.spark.sources.BatchFilesSource` directory as a PySpark Python streaming data source.

Spark's JSON file source read these files before, by its own rules: a value of another type
than its field's became null, a number given for a ``STRING`` field became its text, a
``DECIMAL`` was rounded, and a ``TIMESTAMP`` was Spark's. The reference runtime read the same
lines with ``json.loads`` and no check, so the two runtimes saw different elements in one file
(a user probe, session 56). This source reads a file with the very function the reference
runtime does (:func:`~lowwater.io.batch_files.read_batch_file`: the rules of :mod:`lowwater.io.fields`, a
value that is not its type a dead letter with its reason in ``_corrupt``).

The offset is ``{"files": n}``, the number of files read: each micro-batch is the next file
in name order, so a restart replays the very same batches, and an empty file is an empty
micro-batch. Trigger ``available_now`` reads the files there when the query starts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from lowwater.io.arrow_records import elements_to_arrow
from lowwater.io.batch_files import batch_files, read_batch_file
from lowwater.spark.log_stream import quiet_when_the_jvm_hangs_up, register_source, schema_ddl

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["FORMAT_NAME", "BatchFilesDataSource", "batch_files_stream"]

FORMAT_NAME = "lowwater_batch_files"


def batch_files_stream(spark: SparkSession, directory: str, fields: Sequence[tuple[str, str]]) -> DataFrame:
    """The batch files in ``directory`` as a streaming DataFrame: the standard columns, the
    declared ``fields`` (canonical, :func:`~lowwater.io.fields.parse_fields`) and ``_corrupt``."""
    register_source(spark, BatchFilesDataSource)
    options = {"directory": directory, "fields": json.dumps([list(f) for f in fields])}
    return spark.readStream.format(FORMAT_NAME).schema(schema_ddl(fields)).options(**options).load()


class BatchFilesDataSource(DataSource):
    """``spark.readStream.format("lowwater_batch_files")`` (registered by :func:`batch_files_stream`)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        return schema_ddl(json.loads(self.options["fields"]))

    def streamReader(self, schema: Any) -> BatchFilesStreamReader:
        quiet_when_the_jvm_hangs_up()
        return BatchFilesStreamReader(self.options)


class BatchFilesStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets ``{"files": n}``; one Spark task per micro-batch, reading its one file."""

    def __init__(self, options: Any) -> None:
        self.directory = Path(str(options["directory"]))
        self.fields = [(str(n), str(t)) for n, t in json.loads(options["fields"])]
        self._target: int | None = None

    def _files(self) -> list[Path]:
        return batch_files(self.directory)

    def initialOffset(self) -> dict[str, int]:
        return {"files": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = len(self._files())

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, int]:
        """One more file than ``start`` while there is one; ``limit`` is not used: a file is a batch."""
        done = int(start["files"])
        available = len(self._files()) if self._target is None else self._target
        return {"files": done + 1 if available > done else done}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return [InputPartition(i) for i in range(int(start["files"]), int(end["files"]))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        path = self._files()[partition.value]
        rows = [(r.partition, r.offset, r.timestamp, seq, r.value, r.error)
                for r, seq in read_batch_file(path, self.fields)]
        yield elements_to_arrow(rows, self.fields)

    def commit(self, end: dict[str, Any]) -> None:
        pass
