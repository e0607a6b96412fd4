"""Append each micro-batch to a Delta Lake table, exactly once, with Delta's idempotent writes.

Every write carries ``txnAppId`` (this sink's application id) and ``txnVersion`` (the batch id).
Delta records the pair in the same commit as the data, and skips a later write whose version
is not above the last one recorded for that application id. So:

* a batch that is replayed after a crash (lowwater and Spark replay a batch whose completion
  was not recorded, with the same id) adds nothing if its first attempt had committed, and
  adds its rows once if it had not: a Delta commit is atomic;
* the table holds each batch's rows exactly once, as an append-only log of window firings
  (a re-firing with a higher ``fire_index`` is a new row; the latest firing of a window is
  the row with the highest ``fire_index``).

The application id must stay the same across restarts of one job and differ between jobs
(or sinks) writing the same table: by default it is derived from the job (made with its
checkpoint, :meth:`DeltaSink.bind_job`) and ``name``.
It needs the Delta jars on Spark's class path (``./dev`` fetches ``delta-spark``, see pom.xml;
elsewhere ``--packages io.delta:delta-spark_2.13:4.4.0``).

The core is :meth:`DeltaSink.write_dataframe` ``(df, batch_id)``; :meth:`DeltaSink.write_batch`
``(batch_id, rows)`` builds a DataFrame from the rows (window results, late elements or dead
letters) on the driver and calls it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lowwater.core.errors import ConfigurationError
from lowwater.spark.sinks.base import DataFrameSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["WINDOW_RESULT_SCHEMA", "DeltaSink", "check_new_job", "refuse_on_new_job"]

#: the columns of a window result row (``WindowResult``) with its value a DOUBLE, for ``DeltaSink(schema=...)``
WINDOW_RESULT_SCHEMA = "key STRING, window_start BIGINT, window_end BIGINT, value DOUBLE, fire_index INT"

# what reading a table that is not there yet raises (AnalysisException's condition, delta-spark
# 4.4): no directory, a directory without a Delta log
_NO_TABLE = frozenset({"PATH_NOT_FOUND", "DELTA_TABLE_NOT_FOUND"})


class DeltaSink(DataFrameSink):
    """Exactly-once appends to the Delta table at ``path`` (``txnAppId`` + ``txnVersion`` = batch id).

    Parameters
    ----------
    path:
        The table's location (a local path or any Hadoop URI, e.g. ``hdfs://...``).
    name:
        Distinguishes several sinks writing one table; part of the default ``app_id``.
    app_id:
        Delta's ``txnAppId``; by default ``lowwater-<sha1(job, name)[:16]>``, the job being the
        checkpoint's (:meth:`bind_job`), so a new checkpoint writes as a new job. One given here
        is used as it is: give a new one with a new checkpoint.
    schema:
        A Spark DDL schema for :meth:`write_batch`'s rows (:data:`WINDOW_RESULT_SCHEMA` is the one
        this sink forced on window results until session 36). By default the rows' types are the
        keyed path's (:meth:`_settled`): a window result's ``value`` of its aggregate's type (a
        Decimal sum a ``DECIMAL(38, s)``, a ``max`` of strings a STRING), and the ``window`` struct.
    with_batch_id:
        Add a ``batch_id`` column (BIGINT) to every row.
    shared:
        Other jobs (other checkpoints) append to this table too. Without it, a job on a new
        checkpoint refuses a table that holds another lowwater job's appends
        (:func:`check_new_job`): the same pipeline started over reads its sources anew, from their
        starting offsets, and would append their rows again.
    """

    reads_every_row = True  # one df.write (DataFrameSink.reads_every_row)
    late_frames = True  # the reference runtime's late elements as the Spark paths' late columns

    def __init__(self, path: str, name: str = "results", app_id: str | None = None, schema: str | None = None,
                 with_batch_id: bool = True, shared: bool = False) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise ConfigurationError("path", f"expected the table's path or URI as a string, got {path!r}")
        if not str(path):
            raise ConfigurationError("path", "is empty")
        for parameter, value in (("name", name), ("app_id", app_id), ("schema", schema)):
            if not isinstance(value, str) and (value is not None or parameter == "name"):
                raise ConfigurationError(parameter, f"expected a string, got {value!r}")
        for parameter, flag in (("with_batch_id", with_batch_id), ("shared", shared)):
            if not isinstance(flag, bool):
                raise ConfigurationError(parameter, f"expected True or False, got {flag!r}")
        self.path = os.fspath(path)
        self.name = name
        self.given_app_id = app_id
        self.app_id = app_id or "lowwater-" + hashlib.sha1(f"{self.path}\0{name}".encode()).hexdigest()[:16]
        """Until :meth:`bind_job`: the id of a job whose checkpoint has none (made before session 37)."""
        self.schema = schema
        self.with_batch_id = with_batch_id
        self.shared = shared

    def __repr__(self) -> str:
        return f"DeltaSink({self.path!r})"

    def bind_job(self, job_id: str | None, resumes: bool = True) -> None:
        """The default ``app_id`` is the job's (its checkpoint's id) and this sink's ``name``: a new
        checkpoint's batch ids start again at 0, and under the old job's app id Delta skipped every
        one the table had recorded, without a word; and the same table named another way after a
        restart (``/t/`` for ``/t``, ``file:/t``) kept the app id, where hashing the path made a
        new one and appended the replayed batch again. A checkpoint without an id (None) keeps the
        path's, which its table recorded."""
        if self.given_app_id is None and job_id is not None:
            self.app_id = "lowwater-" + hashlib.sha1(f"{job_id}\0{self.name}".encode()).hexdigest()[:16]

    @classmethod
    def check_new_job(cls, sinks: Sequence[DeltaSink]) -> None:
        """A new job's check (:func:`lowwater.graph.sinks.check_new_job`): :func:`check_new_job`."""
        check_new_job(sinks)

    def batch_target(self) -> str:
        """The table (one spelling of it: :func:`~lowwater.util.files.same_place`) and app id: Delta
        skips a batch id the app id has committed, so a second output's write of that id would be
        skipped. The default app id is the job's and the name's (:meth:`bind_job`), whatever the
        path's spelling: two sinks of one name on ``/t`` and ``/t/`` were taken for two targets,
        then shared the app id, and Delta skipped the second output's every batch, without a word."""
        from lowwater.util.files import same_place

        app = repr(self.given_app_id) if self.given_app_id is not None else f"of the job and the name {self.name!r}"
        return f"the Delta table {same_place(self.path)} with app id {app}"

    def open(self) -> None:
        """Refuse a path that holds files but no Delta table (no ``_delta_log``): a Parquet directory,
        a ``DirectorySink``'s batches. Delta made a table beside them, which hid them from a Delta
        reader, while a Parquet reader of the path then read both, merged, without a word."""
        from pyspark.sql import SparkSession

        from lowwater.spark.fs import checkpoint_fs, resolve

        spark = SparkSession.getActiveSession()
        if spark is None or self.__dict__.get("_lw_checked"):  # once per run (check_before_run, then open)
            return
        location = resolve(self.path, spark)
        names = [n for n in checkpoint_fs(location, spark).names(location) if not n.startswith(".")]
        if names and "_delta_log" not in names:
            raise ConfigurationError(
                "path", f"{self.path} holds files ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}) but no "
                "Delta table (no _delta_log): appending would make a table beside them. Hint: give the sink a new "
                f"path, or make the files a table first (CONVERT TO DELTA parquet.`{self.path}`)")
        self.__dict__["_lw_checked"] = True

    def check_before_run(self) -> None:
        """:meth:`open`, before the query starts."""
        self.open()

    def write(self, df: DataFrame, batch_id: int) -> None:
        """The engine's sink contract (:class:`DataFrameSink`): the batch's rows as a DataFrame."""
        self.write_dataframe(df, batch_id)

    def write_dataframe(self, df: DataFrame, batch_id: int) -> None:
        """Append ``df`` as batch ``batch_id``; nothing if this app id already wrote that batch."""
        from pyspark.sql import functions as F

        if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
            raise ConfigurationError("batch_id", f"must be an int >= 0, got {batch_id!r}")
        if self.with_batch_id and "batch_id" not in df.columns:
            df = df.withColumn("batch_id", F.lit(batch_id).cast("long"))
        (df.write.format("delta").mode("append")
         .option("txnAppId", self.app_id).option("txnVersion", str(batch_id))
         .option("mergeSchema", "true").save(self.path))

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        from pyspark.sql import SparkSession

        from lowwater.spark.sinks.base import to_dict

        if not rows:
            return  # nothing to add; a later batch's version still moves past this one
        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        records = [to_dict(r) for r in rows]
        df = spark.createDataFrame(records, self.schema) if self.schema is not None else \
            self._settled(spark, records, batch_id)
        self.write_dataframe(df, batch_id)

    def _settled(self, spark: SparkSession, records: list[dict[str, Any]], batch_id: int) -> DataFrame:
        """The rows as a DataFrame whose columns keep the table's types, by the keyed path's rules
        (:meth:`~lowwater.spark.json_rows.JsonFrames.settled`): a batch may add a column, a DOUBLE
        column takes whole numbers, a STRING column any value as text, a field null in every row
        is no column yet; another change of type is an ``OutputSchemaError`` before anything is
        written. Types inferred from each batch alone made a field that was whole in one batch
        and not in the next fail Delta's schema merge (``DELTA_FAILED_TO_MERGE_FIELDS``)."""
        from lowwater.spark.json_rows import JsonFrames, settled_rows

        frames: JsonFrames = self.__dict__.setdefault("_frames", JsonFrames())  # schemas per set of shapes, kept
        df, _ = settled_rows(spark, records, frames, self._kept(spark), f"{self!r}", batch_id)
        assert df is not None  # records is not empty
        return df

    def _kept(self, spark: SparkSession) -> Any:
        """The table's columns that rows give (not the ``batch_id`` this sink adds, nor the
        ``window`` struct computed from ``window_start``/``window_end``); None before the table exists."""
        from pyspark.errors import AnalysisException
        from pyspark.sql.types import StructType

        try:
            schema = spark.read.format("delta").load(self.path).schema
        except AnalysisException as e:
            if e.getCondition() in _NO_TABLE:
                return None
            raise
        computed = {"batch_id"} if self.with_batch_id else set()
        if {"window_start", "window_end"} <= set(schema.fieldNames()):
            computed.add("window")
        return StructType([f for f in schema.fields if f.name not in computed])


def _table_state(spark: SparkSession, path: str) -> tuple[dict[str, int], int]:
    """The table's ``txnAppId``s and the last ``txnVersion`` each committed (Delta's ``SetTransaction``
    actions, from its snapshot), and its number of data files; empty and 0 when there is no table yet."""
    from lowwater.spark.fs import resolve

    jvm: Any = spark._jvm
    try:
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, resolve(path, spark))
    except TypeError:  # no Delta on the class path (py4j's JavaPackage is not callable): the write says so
        return {}, 0
    none = jvm.scala.Option.empty()
    snapshot = delta_log.update(False, none, none)
    got = jvm.scala.jdk.javaapi.CollectionConverters.asJava(snapshot.transactions())
    return {str(k): int(v) for k, v in dict(got).items()}, int(snapshot.numOfFiles())


def check_new_job(sinks: Sequence[Any]) -> None:
    """Before a job on a new checkpoint (none of its batches committed) writes, refuse a Delta
    table that holds another job's appends. The new job's batch ids start again at 0:

    * under a default app id (the job's), every row its sources give again was appended again,
      without a word, where a :class:`~lowwater.spark.sinks.DirectorySink` refuses the
      directory: refused unless the sink is ``shared`` (other jobs append to the table too);
    * under an ``app_id`` given again with the new checkpoint, Delta skipped every batch id up to
      the one the table had recorded for it: the rows of those batches were written nowhere.

    An app id of this job's sinks with only batch 0 recorded is this job's first attempt, which a
    crash interrupted before its first commit. The reference runtime, whose every run is a new
    job, checks too, in the session its DeltaSink will write with."""
    from lowwater.util.files import same_place

    tables: dict[str, list[DeltaSink]] = {}
    for sink in sinks:
        if isinstance(sink, DeltaSink):
            tables.setdefault(same_place(sink.path), []).append(sink)
    if not tables:
        return
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()  # as write_batch
    for group in tables.values():
        refusal = refuse_on_new_job(group, *_table_state(spark, group[0].path))
        if refusal is not None:
            raise refusal


def refuse_on_new_job(group: Sequence[DeltaSink], txns: Mapping[str, int], files: int = 0
                      ) -> ConfigurationError | None:
    """:func:`check_new_job`'s decision for the sinks of a new job that write one table, given the
    table's transactions (app id: last batch id recorded) and how many data files it holds.

    Another writer is any app id not this job's, lowwater's or not, and a table with files but no
    transaction of this job's: until session 58 only ``lowwater-`` app ids counted, so a ported
    Spark job's table took this job's appends, its schema widened by ``mergeSchema`` to hold both
    kinds of rows, without a word (a user probe). An empty table (``CREATE TABLE`` ahead of the
    job) is this job's to fill."""
    path = group[0].path
    for sink in group:
        last = txns.get(sink.app_id)
        if sink.given_app_id is not None and last is not None and last > 0:
            return ConfigurationError(
                "app_id", f"the Delta table {path} has recorded batches up to {last} under app id "
                f"{sink.app_id!r}, and this job's checkpoint is new: its batch ids start again at 0, and "
                f"Delta would skip batches 0 to {last} without writing them. Hint: give a new app_id with a "
                "new checkpoint, or none (the default is the job's)")
    if all(sink.shared for sink in group):
        return None
    ours = {sink.app_id for sink in group}
    others = sorted(a for a in txns if a not in ours)
    hint = ("Hint: give the sink a new table, or delete this one if its rows are no longer wanted; "
            "DeltaSink(..., shared=True) if other jobs append to this table too")
    if others:
        return ConfigurationError(
            "path", f"the Delta table {path} holds the appends of another job (app id "
            f"{', '.join(others[:3])}{', ...' if len(others) > 3 else ''}), and this job's checkpoint is "
            f"new: it reads its sources anew, from their starting offsets, and would append their rows again. {hint}")
    if files and not ours & txns.keys():
        return ConfigurationError(
            "path", f"the Delta table {path} holds rows another writer appended ({files} data files, and no "
            f"transaction of this job's): this job would append its rows beside theirs, in one table of two "
            f"kinds of rows, and widen its schema to hold both. {hint}")
    return None
