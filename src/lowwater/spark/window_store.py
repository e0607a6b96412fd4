"""Window contents as data on the checkpoint file system: a log of per-batch partial aggregates.

Layout under ``<checkpoint>/lowwater/windows/``::

    batch=<k>/start=<ws>/part-*.parquet     batch k's partials of the windows starting at ws:
                                            key, acc (or acc_hi/acc_lo; acc/acc_x), n (elements)

Each micro-batch ``k`` appends one directory, written by the executors (``partitionBy
("start")``) after the driver deleted whatever an interrupted attempt left there: a replayed
batch rewrites ``batch=<k>`` with the same rows. A window start's contents are the
union of its ``start=<ws>`` directories over the batches that wrote it; the driver keeps,
per open start, the list of those batch ids (O(open starts), in the control-plane JSON),
so reading a start lists no other directory.

Why batch first (and not ``start=<ws>/batch=<k>``): one write per batch, one directory to
replace on a replay, and Spark's own ``partitionBy`` produces it; a start's files are still
addressed directly by path. Cleanup deletes ``batch=<b>/start=<ws>`` for every batch of a
cleaned start, one batch *after* the cleanup was committed (a replay of the batch that
decided it still reads them), and a ``batch=<b>`` directory once no open start has files in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from lowwater.core.errors import CheckpointDamagedError
from lowwater.spark.fs import CheckpointFS, LocalFS, join
from lowwater.spark.session import settings_for

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["COMMITTER_DIRS", "CONCURRENT_WRITERS", "ONE_TASK_FIRE_ROWS", "ROWS_PER_WRITE_TASK", "WindowStore",
           "check_files", "fires_in_one_task", "replace_with_parquet", "write_tasks"]

CONCURRENT_WRITERS = 16
"""Open Parquet writers per task when a batch's partials are written, one per window start:
Spark then writes them as they come instead of sorting the task's rows by ``start`` first
(``spark.sql.maxConcurrentOutputFileWriters``; past this many starts in one task, Spark
sorts the rest, as it would have without)."""

COMMITTER_DIRS = ("_temporary", "0", "_temporary")
"""Under a batch's directory, the directories Hadoop's ``FileOutputCommitter`` makes for a write
(its job attempt's, then its tasks' parent). On a local disk, Hadoop's file system without its
native library sets each new directory's and file's permissions with a ``chmod`` process, measured
from the driver's JVM on ``local[2]`` at 3.5–3.9 ms each, 8.4–9.2 ms with both cores busy. Made by
:func:`replace_with_parquet` with Python's ``mkdir``, which forks nothing, the committer finds them
made: no process for the job set-up's three directories nor the first task's one, and none for a
``_SUCCESS`` file and its ``.crc``, which the write no longer makes (nothing reads them; session 22,
docs/performance.md)."""

RAW_LOCAL_FS = {"fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem", "fs.file.impl.disable.cache": "true"}
"""A write's options (its Hadoop configuration, on the driver and in its tasks) that give its
``file:`` paths, and only those (an ``hdfs:`` or ``s3a:`` write is not affected), Hadoop's local
file system without checksums: no ``.crc`` file beside each file
written, so one ``chmod`` process fewer per file. A reader of the files (Hadoop's checksummed local
file system, Spark's default) verifies nothing when a file has no ``.crc``."""

ROWS_PER_WRITE_TASK = 10_000
"""Partial rows per task of a batch's write, once the previous batch's count is known
(:func:`write_tasks`): about 1 MB of shuffled rows, the smallest partition adaptive
execution makes when it coalesces (``spark.sql.adaptive.coalescePartitions.minPartitionSize``)."""


ONE_TASK_FIRE_ROWS = 1_000_000
"""At most this many stored partial rows, a firing reads and merges them in one task, without a
shuffle (:func:`fires_in_one_task`). A shuffle is a stage and, under adaptive execution, a job
of its own, with its planning in between. On ``local[2]``, in alternating runs: a 1k-key
window's first firing took about 300 ms less in one task; the batch that fired a 100k-key window
(about 600,000 partials) the second time took 2,190–2,235 ms with one task against 2,570–2,708
with the shuffle. Past this many rows (a million keys), the merge is spread over the shuffle's
tasks: one task would take seconds where a cluster's cores share it."""


def replace_with_parquet(df: DataFrame, out: str, fs: CheckpointFS, partition_by: str | None = None) -> None:
    """Write ``df`` as Parquet files under ``out``, in place of whatever is there: a directory the
    checkpoint versions by batch, which a replay writes anew (the window store's ``batch=<k>``,
    the keyed path's state). ``out`` is deleted first; on a local disk the committer's
    directories are made here (:data:`COMMITTER_DIRS`); the write appends and leaves no
    ``_SUCCESS`` marker: nothing reads one, a batch's directory counts once the batch's state
    names it. What Spark's overwrite mode did, without its ``chmod`` processes."""
    fs.delete(out)
    if isinstance(fs, LocalFS):
        fs.mkdirs(join(out, *COMMITTER_DIRS))
    writer = (df.write.mode("append").option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
              .options(**RAW_LOCAL_FS))  # only file: paths (a plain path or a file: URI) are affected
    (writer if partition_by is None else writer.partitionBy(partition_by)).parquet(out)


def check_files(scan: DataFrame, dirs: Iterable[str], what: str) -> DataFrame:
    """``scan`` (Spark's read of ``dirs``), once every one of ``dirs`` holds a file of it; else
    :class:`~lowwater.core.errors.CheckpointDamagedError`. Each directory the state names was
    written with at least one file (a window store's ``batch=<k>/start=<ws>`` only for a start
    with rows, a keyed state's ``batch=<k>`` always), and Spark reads a directory that lost its
    files as one with no rows: the windows or keys there would go on from nothing, and results
    come out wrong with the accounting balanced (a local checkpoint on a cluster did that, user
    probe Q, session 61). Spark's own listing, done when ``scan`` was made, is what is checked;
    a directory gone altogether already fails Spark's read (``PATH_NOT_FOUND``)."""
    held = {_tail(f.rsplit("/", 1)[0]) for f in scan.inputFiles()}
    missing = [d for d in dirs if _tail(d) not in held]
    if missing:
        raise CheckpointDamagedError(what, missing)
    return scan


def _tail(path: str) -> str:
    """A directory's last two names (``batch=<k>/start=<ws>``): the same whether the path is
    written as given or as Spark qualifies it (a scheme, ``file:///``, percent-encoding)."""
    return "/".join(path.rstrip("/").split("/")[-2:])


def fires_in_one_task(stored_rows: int | None) -> bool:
    """Whether a firing that reads ``stored_rows`` partial rows (an upper bound; ``None``: unknown,
    written before this process started) merges them in one task (:data:`ONE_TASK_FIRE_ROWS`)."""
    return stored_rows is not None and stored_rows <= ONE_TASK_FIRE_ROWS


def write_tasks(previous_rows: int | None, shuffle_partitions: int) -> int | None:
    """How many tasks write a batch's partials, from the number the previous batch wrote:
    one per :data:`ROWS_PER_WRITE_TASK`, at least one and at most ``shuffle_partitions``.
    ``None`` (no previous batch in this run) leaves it to adaptive execution."""
    if previous_rows is None:
        return None
    return max(1, min(shuffle_partitions, -(-previous_rows // ROWS_PER_WRITE_TASK)))


class WindowStore:
    def __init__(self, root: str, fs: CheckpointFS) -> None:
        self.root = root
        self.fs = fs

    def batch_dir(self, batch_id: int) -> str:
        return join(self.root, f"batch={batch_id}")

    def start_dir(self, batch_id: int, start: int) -> str:
        return join(self.batch_dir(batch_id), f"start={start}")

    def append(self, partials: DataFrame, batch_id: int, tasks: int | None = None) -> None:
        """Write batch ``batch_id``'s partials (a ``start`` column, then the rest), replacing a replay's:
        one file per task and start, unsorted (:data:`CONCURRENT_WRITERS`).

        With ``tasks`` (:func:`write_tasks`), the write is planned without adaptive execution and
        its last stage runs as that many tasks: one job where adaptive execution runs the shuffle's
        map side as a job of its own and plans the rest again when it ends (45–75 ms between the
        two on every batch, measured on ``local[2]``)."""
        settings = {"spark.sql.maxConcurrentOutputFileWriters": str(CONCURRENT_WRITERS)}
        if tasks is not None:
            settings["spark.sql.adaptive.enabled"] = "false"
            partials = partials.coalesce(tasks)
        with settings_for(partials.sparkSession, settings):  # in place of an interrupted attempt's files
            replace_with_parquet(partials, self.batch_dir(batch_id), self.fs, partition_by="start")

    def discard(self, batch_id: int) -> None:
        """Delete ``batch=<batch_id>`` when the batch wrote no partials (an empty directory)."""
        self.fs.delete(self.batch_dir(batch_id))

    def discard_starts(self, batch_id: int, starts: Iterable[int]) -> None:
        """Delete what batch ``batch_id`` wrote for ``starts`` (windows it found too late to keep)."""
        for ws in starts:
            self.fs.delete(self.start_dir(batch_id, ws))

    def read(self, spark: SparkSession, schema: str, starts: Mapping[int, Iterable[int]],
             late: Mapping[int, Iterable[int]] | None = None, batch_column: bool = False) -> DataFrame | None:
        """The partials of ``starts`` (start -> the batches holding it), with a ``start`` column; None if none.

        One scan of every ``batch=<k>/start=<ws>`` directory asked for, ``start`` (and ``batch``)
        from the directory names (Spark's partition discovery under ``basePath``): no literal per
        start in the plan, so the generated code is the same whichever starts fire (spark/literals.py).

        With ``late`` (start -> the batches that wrote it late but allowed), an ``nl`` column: the
        partial's element count ``n`` in those files, whose every element came late, 0 in the others
        (two scans). With ``batch_column``, also ``batch`` (for a caller that selects its
        columns anyway: a ``drop`` costs the driver an analysis of the plan)."""
        if late is None:
            return self._scan(spark, schema, starts, batch_column)
        late_of = {ws: set(late.get(ws, ())) for ws in starts}
        on_time = self._scan(spark, schema, {ws: [b for b in bs if b not in late_of[ws]] for ws, bs in starts.items()})
        in_late = self._scan(spark, schema, {ws: [b for b in bs if b in late_of[ws]] for ws, bs in starts.items()})
        if on_time is not None:
            on_time = on_time.selectExpr("*", "CAST(0 AS BIGINT) AS nl")
        if in_late is not None:
            in_late = in_late.selectExpr("*", "n AS nl")
        if on_time is None or in_late is None:
            return on_time if in_late is None else in_late
        return on_time.unionByName(in_late)

    def _scan(self, spark: SparkSession, schema: str, starts: Mapping[int, Iterable[int]],
              batch_column: bool = False) -> DataFrame | None:
        paths = [self.start_dir(b, ws) for ws, batches in sorted(starts.items()) for b in sorted(set(batches))]
        if not paths:
            return None
        scan = spark.read.schema(f"{schema}, batch BIGINT, start BIGINT").option("basePath", self.root).parquet(*paths)
        check_files(scan, paths, "window contents")
        return scan if batch_column else scan.drop("batch")

    def delete(self, removed: dict[int, list[int]], still_open: dict[int, list[int]], before: int) -> None:
        """Delete the files of ``removed`` starts, and batch directories (``< before``) nothing refers to."""
        touched: set[int] = set()
        for ws, batches in removed.items():
            for b in batches:
                self.fs.delete(self.start_dir(b, ws))
                touched.add(b)
        referenced = {b for bs in still_open.values() for b in bs}
        for b in touched:
            if b < before and b not in referenced:
                self.fs.delete(self.batch_dir(b))

    def size_bytes(self) -> int:
        return self.fs.size_bytes(self.root)
