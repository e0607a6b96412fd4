"""DeltaSink on a real Delta table (delta-spark from pom.xml): idempotent by (txnAppId, batch id)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from lowwater.core.errors import OutputSchemaError
from lowwater.core.windows.events import WindowResult
from lowwater.spark.sinks.delta import DeltaSink

pytestmark = pytest.mark.spark


def _table(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    rows = spark.read.format("delta").load(str(path)).collect()
    return sorted((r.key, r.window_start, r.value, r.fire_index, r.batch_id) for r in rows)


def test_a_replayed_batch_adds_nothing_and_a_new_one_appends(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "totals"
    sink = DeltaSink(str(table))
    first = [WindowResult("ann", 0, 10, 3, 0), WindowResult("bob", 0, 10, 5, 0)]
    sink.write_batch(0, first)
    sink.write_batch(0, first)  # a replay after a crash between Delta's commit and the job's
    assert _table(spark, table) == [("ann", 0, 3.0, 0, 0), ("bob", 0, 5.0, 0, 0)]

    sink.write_batch(1, [WindowResult("ann", 0, 10, 4, 1)])  # a re-firing is a new row
    again = DeltaSink(str(table))  # a restarted job: a new sink object, the same app id
    assert again.app_id == sink.app_id
    again.write_batch(1, [WindowResult("ann", 0, 10, 999, 1)])  # an older version: skipped
    assert _table(spark, table) == [("ann", 0, 3.0, 0, 0), ("ann", 0, 4.0, 1, 1), ("bob", 0, 5.0, 0, 0)]

    other = DeltaSink(str(table), name="late")  # another writer of the table has its own versions
    assert other.app_id != sink.app_id
    other.write_dataframe(spark.createDataFrame([("cat", 0, 10, 1, 0)], "key STRING, window_start BIGINT, "
                                                "window_end BIGINT, value BIGINT, fire_index INT"), 1)
    assert ("cat", 0, 1, 0, 1) in _table(spark, table)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    assert len(history) == 3  # batch 0, batch 1, the other writer's batch 1: no commit for the replays


def test_window_results_keep_their_values_type_a_decimal_exact_and_a_string_as_it_is(
        spark: Any, tmp_path: Path) -> None:
    """Window results written from rows (the reference runtime's) are typed as the keyed path types
    them, with the ``window`` struct. They were forced into ``value DOUBLE``: a Decimal sum lost its
    last digits, and a ``max`` of a STRING field failed with ``could not convert string to float``."""
    from decimal import Decimal

    sums = tmp_path / "sums"
    DeltaSink(str(sums)).write_batch(0, [WindowResult("ann", 0, 1000, Decimal("1234567890123456.79"), 0)])
    got = spark.read.format("delta").load(str(sums))
    assert dict(got.dtypes)["value"] == "decimal(38,2)"
    assert [r.value for r in got.collect()] == [Decimal("1234567890123456.79")]
    assert [(r.window.start.year, r.window.end - r.window.start) for r in got.collect()] == [
        (1970, dt.timedelta(seconds=1))]

    names = tmp_path / "names"
    DeltaSink(str(names)).write_batch(0, [WindowResult("k", 0, 1000, "zoe", 0), WindowResult("j", 0, 1000, "ann", 0)])
    assert sorted((r.key, r.value) for r in spark.read.format("delta").load(str(names)).collect()) == [
        ("j", "ann"), ("k", "zoe")]


def test_rows_keep_the_tables_column_types_from_batch_to_batch(spark: Any, tmp_path: Path) -> None:
    # The general path's outputs other than window results (dicts of a process function, late
    # elements, dead letters) reach write_batch as rows; their types come from their values.
    table = tmp_path / "ratios"
    sink = DeltaSink(str(table))
    sink.write_batch(0, [{"key": "a", "ratio": 1.5, "count": None}])
    # a whole ratio, and a count first given: batch 1's values alone would make ratio BIGINT
    # and Delta's schema merge would refuse it; count, null in all of batch 0, was no column
    sink.write_batch(1, [{"key": "b", "ratio": 2, "count": 5, "tags": [1, 2]}])
    # one batch's values of two kinds (a number, a word) make a STRING column of their JSON texts
    sink.write_batch(2, [{"key": "c", "ratio": 0.5, "tags": [], "level": 3}, {"key": "d", "level": "high"}])

    df = spark.read.format("delta").load(str(table))
    assert {f.name: f.dataType.simpleString() for f in df.schema.fields} == {
        "key": "string", "ratio": "double", "batch_id": "bigint", "count": "bigint", "tags": "array<bigint>",
        "level": "string"}
    assert sorted((r.key, r.ratio, r["count"], r.tags, r.level, r.batch_id) for r in df.collect()) == [
        ("a", 1.5, None, None, None, 0),
        ("b", 2.0, 5, [1, 2], None, 1),
        ("c", 0.5, None, [], "3", 2),
        ("d", None, None, None, "high", 2),
    ]


def test_rows_whose_values_change_a_columns_type_fail_before_anything_is_written(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "typed"
    sink = DeltaSink(str(table))
    sink.write_batch(0, [{"key": "a", "ratio": 1.5}])
    with pytest.raises(OutputSchemaError, match=r"batch 1 the field ratio holds STRING values, where earlier batches "
                                                r"made it a DOUBLE column"):
        sink.write_batch(1, [{"key": "b", "ratio": "n/a"}])
    assert [(r.key, r.ratio) for r in spark.read.format("delta").load(str(table)).collect()] == [("a", 1.5)]


def test_a_new_checkpoint_writes_as_a_new_job_and_a_restart_may_name_the_table_another_way(
        spark: Any, tmp_path: Path) -> None:
    """The default app id was the table path's: a new checkpoint (which the refusal of a changed
    pipeline asks for) starts its batch ids at 0 again, and Delta skipped every one the table had
    recorded under that app id, without a word; and a restart naming the table ``/t/`` where it
    had said ``/t`` made another app id, so the batch Spark replayed was appended a second time.
    The app id is now the checkpoint's job's (and the sink's name)."""
    from lowwater.api import StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.sources import BatchFilesSource

    batches = [[{"key": "a", "ts": 1000, "value": 1}], [{"key": "a", "ts": 12_000, "value": 2}],
               [{"key": "b", "ts": 25_000, "value": 4}]]
    BatchFilesSource.write(tmp_path / "in", batches)
    fields = BatchFilesSource.infer_fields(batches)
    table = tmp_path / "totals"

    def run(checkpoint: Path, size: int, path: str, end_of_input: bool = True, **sink: Any) -> Any:
        env = StreamExecutionEnvironment()
        (env.from_source(BatchFilesSource(tmp_path / "in", fields, [0]),
                         WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
         .key_by("key").window(TumblingEventTimeWindows.of(size)).sum("value").add_sink(DeltaSink(path, **sink)))
        return SparkRuntime(str(checkpoint), spark=spark, end_of_input=end_of_input).execute(env)

    def rows(size: int) -> list[tuple[Any, ...]]:
        got = spark.read.format("delta").load(str(table)).where(f"window_end - window_start = {size}").collect()
        return sorted((r.key, r.window_start, r.value) for r in got)

    job = run(tmp_path / "ck1", 10_000, str(table), end_of_input=False)
    assert rows(10_000) == [("a", 0, 1), ("a", 10_000, 2)]  # [20 s, 30 s) still open
    # a crash after the sinks, before Spark's commit: the restart replays the batch, naming the table another way
    last = max(b["batch_id"] for b in job.batches())
    commits = tmp_path / "ck1" / "spark" / "commits"
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    run(tmp_path / "ck1", 10_000, str(table) + "/")
    assert rows(10_000) == [("a", 0, 1), ("a", 10_000, 2), ("b", 20_000, 4)]  # the replay added nothing

    # another window size is another pipeline: refused on ck1, so a new checkpoint; the same table,
    # which the new job refuses (test_a_new_checkpoint_on_a_table_another_job_appended_to_is_refused)
    # unless it is shared
    run(tmp_path / "ck2", 20_000, str(table), shared=True)
    assert rows(20_000) == [("a", 0, 3), ("b", 20_000, 4)]


def _one_window_job(spark: Any, tmp_path: Path, table: Path, checkpoint: Path | None, **sink: Any) -> Any:
    """On Spark, or on the reference runtime when there is no ``checkpoint``."""
    from lowwater.api import StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.sources import BatchFilesSource

    batches = [[{"key": "a", "ts": 1000, "value": 1}], [{"key": "a", "ts": 12_000, "value": 2}],
               [{"key": "b", "ts": 25_000, "value": 4}]]
    if not (tmp_path / "in").exists():
        BatchFilesSource.write(tmp_path / "in", batches)
    env = StreamExecutionEnvironment()
    (env.from_source(BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), [0]),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value").add_sink(DeltaSink(str(table), **sink)))
    if checkpoint is None:
        return env.execute()
    return SparkRuntime(str(checkpoint), spark=spark, end_of_input=True).execute(env)


def test_a_new_checkpoint_on_a_table_another_job_appended_to_is_refused(spark: Any, tmp_path: Path) -> None:
    """The same pipeline started over on a new checkpoint reads its sources from the start: under
    its new job's app id, Delta appended every row a second time, without a word (a DirectorySink
    refuses the directory). Under an app id given again, Delta skipped every batch id the table
    had recorded for it: those batches' rows were written nowhere. Both are refused before a batch;
    ``shared=True`` says other jobs append to the table too. A reference run, a new job each time,
    is refused as well."""
    from lowwater.core.errors import ConfigurationError

    table = tmp_path / "totals"

    def rows() -> list[tuple[Any, ...]]:
        return sorted((r.key, r.window_start, r.value) for r in spark.read.format("delta").load(str(table)).collect())

    _one_window_job(spark, tmp_path, table, tmp_path / "ck1")
    once = [("a", 0, 1), ("a", 10_000, 2), ("b", 20_000, 4)]
    assert rows() == once
    _one_window_job(spark, tmp_path, table, tmp_path / "ck1")  # a restart of the job: nothing new, no refusal
    with pytest.raises(ConfigurationError, match=r"holds the appends of another job .*would append their "
                                                 r"rows again.*shared=True"):
        _one_window_job(spark, tmp_path, table, tmp_path / "ck2")
    assert rows() == once
    _one_window_job(spark, tmp_path, table, tmp_path / "ck3", shared=True)  # appended knowingly
    assert rows() == sorted(once + once)

    given = tmp_path / "given"
    _one_window_job(spark, tmp_path, given, tmp_path / "ck4", app_id="nightly")
    with pytest.raises(ConfigurationError, match=r"recorded batches up to \d+ under app id 'nightly'.*Delta would "
                                                 r"skip batches 0 to \d+ without writing them"):
        _one_window_job(spark, tmp_path, given, tmp_path / "ck5", app_id="nightly", shared=True)
    assert spark.read.format("delta").load(str(given)).count() == 3

    reference = tmp_path / "reference"  # each reference run is a new job: its second appended every row again
    _one_window_job(spark, tmp_path, reference, None)
    with pytest.raises(ConfigurationError, match=r"holds the appends of another job"):
        _one_window_job(spark, tmp_path, reference, None)
    assert spark.read.format("delta").load(str(reference)).count() == 3


def test_a_new_checkpoint_on_a_table_another_writer_made_is_refused_and_an_empty_one_taken(
    spark: Any, tmp_path: Path
) -> None:
    """A ported Spark job's Delta table (rows, no transaction of lowwater's): the new job appended to
    it, and ``mergeSchema`` widened the table to hold both kinds of rows, without a word (a user
    probe, session 58). An empty table made ahead of the job (``CREATE TABLE``) is the job's."""
    from lowwater.core.errors import ConfigurationError

    theirs = tmp_path / "theirs"
    spark.createDataFrame([("u", 3.0)], "user STRING, total DOUBLE").write.format("delta").save(str(theirs))
    with pytest.raises(ConfigurationError, match=r"holds rows another writer appended \(1 data files, and no "
                                                 r"transaction of this job's\).*shared=True"):
        _one_window_job(spark, tmp_path, theirs, tmp_path / "ck1")
    table = spark.read.format("delta").load(str(theirs))
    assert table.columns == ["user", "total"] and table.count() == 1
    empty = tmp_path / "empty"
    spark.createDataFrame([], "key STRING").write.format("delta").save(str(empty))
    _one_window_job(spark, tmp_path, empty, tmp_path / "ck2")
    assert spark.read.format("delta").load(str(empty)).count() == 3


def test_a_path_that_holds_files_but_no_delta_table_is_refused_before_the_run(spark: Any, tmp_path: Path) -> None:
    """Delta made a table beside a Parquet directory's files: a Delta reader no longer saw them, and
    a Parquet reader of the path read both, their columns merged, without a word."""
    from lowwater.api import StreamExecutionEnvironment
    from lowwater.core.errors import ConfigurationError
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.sources import BatchFilesSource

    plain = tmp_path / "plain"
    spark.range(5).write.parquet(str(plain))
    batches = [[{"key": "a", "ts": 1000, "value": 1}]]
    BatchFilesSource.write(tmp_path / "in", batches)
    env = StreamExecutionEnvironment()
    (env.from_source(BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), [0]),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value").add_sink(DeltaSink(str(plain))))
    with pytest.raises(ConfigurationError, match=r"but no Delta table \(no _delta_log\).*CONVERT TO DELTA"):
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    assert not (plain / "_delta_log").exists() and spark.read.parquet(str(plain)).count() == 5
