"""The partitioned log as a PySpark Python streaming data source with lowwater's own offsets.

Spark's file source decided what a micro-batch of the log was before (files in mtime
order, ``maxFilesPerTrigger``), read a segment once, took a line's partition from the
record, and kept its file list in a log of its own that a crash could leave one entry
ahead of the offset log. This source instead:

* plans every batch with :class:`~lowwater.io.log_batches.LogBatching` from the previous
  batch's end, the same cut the reference runtime makes; the offsets are
  ``{"<partition>": <next record offset>}`` (partitions still at 0 are left out), which
  Spark writes to its offset log before the batch runs, so a restart replays the very
  same ranges;
* reads a range with :class:`~lowwater.io.PartitionedLogReader`, so exactly the files of
  the layout are read (``partition=<N>/segment-<F>.jsonl|parquet``), the directory names
  the partition, lines appended to a segment are read, an unterminated last line waits
  for its newline, and every line is one record or one dead letter with the reader's
  reason;
* converts values with :func:`~lowwater.io.fields.read_element` and yields Arrow
  record batches (:mod:`lowwater.io.arrow_records`, with Arrow's JSON parser where it
  provably agrees), ``_corrupt`` holding the reason of a record that is not an element.

Trigger ``available_now`` is supported: the target is the log's end when the query
starts, reached in the same batches as with any other trigger.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from lowwater.io.arrow_records import read_arrow
from lowwater.io.fields import column_type
from lowwater.io.log import CorruptLogError, PartitionedLogReader
from lowwater.io.log_batches import LogBatching

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["FORMAT_NAME", "LogDataSource", "log_stream", "schema_ddl"]

FORMAT_NAME = "lowwater_partitioned_log"


def schema_ddl(fields: Sequence[tuple[str, str]]) -> str:
    cols = ["_partition INT", "_offset BIGINT", "_source_ts BIGINT", "_seq BIGINT"]
    cols += [f"`{name.replace('`', '``')}` {column_type(t)}" for name, t in fields]
    return ", ".join([*cols, "_corrupt STRING"])


def log_stream(spark: SparkSession, root: str, fields: Sequence[tuple[str, str]], batching: LogBatching) -> DataFrame:
    """The log at ``root`` as a streaming DataFrame with the standard columns and ``_corrupt``."""
    _register(spark)
    options = {"root": root, "fields": json.dumps([list(f) for f in fields]),
               "records_per_batch": json.dumps(batching.records_per_batch),
               "segments_per_batch": json.dumps(batching.segments_per_batch)}
    return spark.readStream.format(FORMAT_NAME).schema(schema_ddl(fields)).options(**options).load()


def _register(spark: SparkSession) -> None:
    """Register :class:`LogDataSource` with ``spark``, made the active session while it is.

    Spark checks that the name is new by looking it up in the *active* session: in a second
    session of the application (``spark.newSession()``, or one made active elsewhere), after
    the first registered it, that lookup found the first session's and refused the name
    (DATA_SOURCE_ALREADY_EXISTS), while the second session itself could not find the source.

    Once per session: registering the name again (a second source, a second run in the same
    session, as ``lowwater demo`` makes) replaced the same class and logged a warning each time
    ("The data source ... replaced a previously registered data source")."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: no sessions of the JVM's to juggle
        spark.dataSource.register(LogDataSource)
        return
    try:
        if spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists(FORMAT_NAME):
            return
    except Exception:  # py4j errors: a Spark without the call registers, as before
        pass
    sessions = jvm.SparkSession
    active = sessions.getActiveSession()
    sessions.setActiveSession(spark._jsparkSession)
    try:
        spark.dataSource.register(LogDataSource)
    finally:
        if active.isDefined():
            sessions.setActiveSession(active.get())
        else:
            sessions.clearActiveSession()


class LogDataSource(DataSource):
    """``spark.readStream.format("lowwater_partitioned_log")`` (registered by :func:`log_stream`)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        return schema_ddl(json.loads(self.options["fields"]))

    def streamReader(self, schema: Any) -> LogStreamReader:
        quiet_when_the_jvm_hangs_up()
        return LogStreamReader(self.options)


RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


def quiet_when_the_jvm_hangs_up() -> None:
    """In Spark's streaming-source runner (the Python process the driver JVM starts to call this
    source's offsets), print no traceback when the JVM closed the connection.

    A stop of the query interrupts its thread, and an interrupt inside a call to the runner closes
    the runner's socket: the runner then fails reading the next call (``EOFError``), fails again
    writing that error back (``BrokenPipeError``), and Python printed both tracebacks on the run's
    stderr, under the user's Ctrl-C (CI, session 47). Nothing is lost: the JVM asked for nothing
    more. Any other error, or one whose chain holds another error, prints as before. Elsewhere
    (the driver, an executor's worker) this does nothing."""
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) != RUNNER or \
            getattr(sys.excepthook, "lowwater_quiet", False):
        return
    before = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
        if not hung_up(error):
            before(kind, error, tb)

    hook.lowwater_quiet = True  # type: ignore[attr-defined]
    sys.excepthook = hook


def hung_up(error: BaseException | None) -> bool:
    """Whether ``error`` and every error it was raised in handling or from are the peer's closing
    of a connection."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:  # (a chain set by hand may loop)
        if not isinstance(error, (EOFError, BrokenPipeError, ConnectionResetError)):
            return False
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return bool(seen)


class LogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets ``{"<partition>": next_offset}``; one Spark task per partition with records."""

    def __init__(self, options: Any) -> None:
        self.root = str(options["root"])
        self.fields = [tuple(f) for f in json.loads(options["fields"])]
        self.batching = LogBatching(json.loads(options.get("records_per_batch", "1000")),
                                    json.loads(options.get("segments_per_batch", "null")))
        self._target: dict[int, int] | None = None
        self._reader: PartitionedLogReader | None = None

    @staticmethod
    def _decode(offset: dict[str, Any]) -> dict[int, int]:
        return {int(p): int(o) for p, o in offset.items()}

    @staticmethod
    def _encode(ends: dict[int, int]) -> dict[str, int]:
        return {str(p): o for p, o in sorted(ends.items()) if o > 0}

    def initialOffset(self) -> dict[str, int]:
        return {}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._log().end_offsets()

    def _log(self) -> PartitionedLogReader:
        """One reader for the query: it keeps segment record counts by size and mtime."""
        if self._reader is None:
            self._reader = PartitionedLogReader(self.root)
        return self._reader

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, int]:
        """The end of the next batch; ``limit`` is not used: the batch is the log's own unit."""
        reader = self._log()
        begin = self._decode(start)
        available = reader.end_offsets() if self._target is None else self._target
        available = {p: max(o, begin.get(p, 0)) for p, o in available.items()}
        ends = self.batching.next_end(reader, begin, available)
        return self._encode({**begin, **ends})

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = self._decode(start), self._decode(end)
        return [InputPartition((p, begin.get(p, 0), e)) for p, e in sorted(stop.items()) if e > begin.get(p, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        p, start, end = partition.value
        rows = 0
        for batch in read_arrow(PartitionedLogReader(self.root), p, start, end, self.fields):
            rows += batch.num_rows
            yield batch
        if rows != end - start:  # the planned range is on disk: anything else is damage
            raise CorruptLogError(f"partition {p} of {self.root}: read {rows} records for offsets "
                                  f"{start}..{end - 1}; was the log rewritten?")

    def commit(self, end: dict[str, Any]) -> None:
        pass
