"""A pipeline on Spark writing to a real PostgreSQL server: re-firings replace, replays change nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lowwater.api import StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import PostgresSink
from lowwater.spark.sinks.postgres import execute_statements
from lowwater.spark.sources import BatchFilesSource

pytestmark = pytest.mark.spark


def _table(spark: Any, pg: Any, table: str) -> list[tuple[Any, ...]]:
    rows = (spark.read.format("jdbc").option("url", pg.jdbc_url).option("dbtable", table)
            .option("user", pg.user).option("driver", "org.postgresql.Driver").load().collect())
    return sorted((r["key"], r["window_start"], r["value"], r["fire_index"]) for r in rows)


def test_refirings_upsert_and_a_replayed_batch_changes_nothing(spark: Any, pg: Any, tmp_path: Path) -> None:
    batches = [
        [{"key": "a", "ts": 1000, "value": 1}, {"key": "b", "ts": 2000, "value": 2}],
        [{"key": "a", "ts": 12000, "value": 4}],                                  # closes [0, 10 s)
        [{"key": "a", "ts": 3000, "value": 8}, {"key": "a", "ts": 4000, "value": 16}],  # two re-firings
    ]
    BatchFilesSource.write(tmp_path / "in", batches)
    fields = BatchFilesSource.infer_fields(batches)

    def run(checkpoint: Path, end_of_input: bool = True) -> Any:
        env = StreamExecutionEnvironment()
        (env.from_source(BatchFilesSource(tmp_path / "in", fields, [0]),
                         WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
         .key_by("key").window(TumblingEventTimeWindows.of(10_000)).allowed_lateness("10 s").sum("value")
         .add_sink(PostgresSink(pg.jdbc_url, "window_totals", user=pg.user)))
        return SparkRuntime(str(checkpoint), spark=spark, end_of_input=end_of_input).execute(env)

    job = run(tmp_path / "ck", end_of_input=False)
    expected = [("a", 0, 25.0, 2), ("a", 10_000, 4.0, 0), ("b", 0, 2.0, 0)]
    assert _table(spark, pg, "window_totals") == [expected[0], expected[2]], "[10 s, 20 s) is still open"

    # a crash after the sinks but before Spark's commit (so before any end of input): Spark replays
    # the batch with the same offsets, then the run ends the input
    last = max(b["batch_id"] for b in job.batches() if not b.get("end_of_input"))
    commits = tmp_path / "ck" / "spark" / "commits"
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    again = run(tmp_path / "ck")
    assert again.batches()[last]["metrics"]["windows_fired"] == 2, "batch replayed"
    assert _table(spark, pg, "window_totals") == expected
    execute_statements(spark, pg.jdbc_url, ["DROP TABLE window_totals"], pg.user, None)


def test_a_table_another_job_wrote_or_a_resuming_jobs_dropped_table_is_refused_before_the_run(
        spark: Any, pg: Any, tmp_path: Path) -> None:
    """``fire_index`` orders one job's firings only. A job on a new checkpoint (the one a changed pipeline
    needs) fired its windows from 0 again, and the upsert kept the old job's higher firings over them: the
    table ended with a mix of two jobs' results (a user probe, session 55). And a resuming job whose table
    had been dropped made it again with its new firings only. Both are refused now, before the query
    starts; the same job resumes as before."""
    from lowwater.core.errors import ConfigurationError
    from lowwater.runtime.reference import ReferenceRuntime
    from lowwater.spark.sinks.postgres import JOBS_TABLE

    batches = [[{"key": "a", "ts": 1000, "value": 1}, {"key": "a", "ts": 12000, "value": 4}],
               [{"key": "a", "ts": 3000, "value": 8}]]  # late, within the lateness: re-fires [0, 10 s)
    BatchFilesSource.write(tmp_path / "in", batches)
    fields = BatchFilesSource.infer_fields(batches)

    def pipeline(count: bool = False) -> StreamExecutionEnvironment:
        env = StreamExecutionEnvironment()
        windows = (env.from_source(BatchFilesSource(tmp_path / "in", fields, [0]),
                                   WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
                   .key_by("key").window(TumblingEventTimeWindows.of(10_000)).allowed_lateness("10 s"))
        (windows.count() if count else windows.sum("value")).add_sink(
            PostgresSink(pg.jdbc_url, "job_owned", user=pg.user))
        return env

    def run(checkpoint: str, count: bool = False, end_of_input: bool = True) -> Any:
        return SparkRuntime(str(tmp_path / checkpoint), spark=spark, end_of_input=end_of_input).execute(
            pipeline(count))

    try:
        run("ck", end_of_input=False)
        first = _table(spark, pg, "job_owned")
        assert first == [("a", 0, 9.0, 1)], "[0, 10 s) fired twice; [10 s, 20 s) is still open"
        run("ck")  # the same checkpoint resumes, and ends the input
        mine = _table(spark, pg, "job_owned")
        assert mine == [("a", 0, 9.0, 1), ("a", 10_000, 4.0, 0)]
        for new in (lambda: run("ck2", count=True), lambda: ReferenceRuntime().execute(pipeline(count=True))):
            with pytest.raises(ConfigurationError, match=r"job_owned holds another lowwater job .*TRUNCATE") as e:
                new()  # a new checkpoint (the count's fire_index 0 lost to the sum's 1), a reference run
            assert e.value.parameter == "table"
            assert _table(spark, pg, "job_owned") == mine, "refused before its first batch"
        assert not (tmp_path / "ck2" / "spark" / "commits").exists() or \
            not list((tmp_path / "ck2" / "spark" / "commits").iterdir())
        execute_statements(spark, pg.jdbc_url, ["DROP TABLE job_owned"], pg.user, None)
        with pytest.raises(ConfigurationError, match=r"job_owned is missing.*committed batches.*restore the table"):
            run("ck")  # the windows it fired before would be in no table
        run("ck3", count=True)  # a new checkpoint, after the old job's table was dropped: fires every window
        assert _table(spark, pg, "job_owned") == [("a", 0, 2, 1), ("a", 10_000, 1, 0)]
        with pytest.raises(ConfigurationError, match="another lowwater job"):
            run("ck")  # the old job, resuming on the new job's table
    finally:
        execute_statements(spark, pg.jdbc_url, ["DROP TABLE IF EXISTS job_owned",
                                                f"DELETE FROM {JOBS_TABLE} WHERE table_name = 'job_owned'"],
                           pg.user, None)


@pytest.mark.parametrize("path", ["keyed", "general"])
def test_a_process_functions_rows_refired_twice_in_a_batch_leave_the_latest_firing(
        spark: Any, pg: Any, tmp_path: Path, path: str) -> None:
    """A ProcessWindowFunction cannot know its firing's index: its rows have none, and the sink gives
    them 0 (they failed the first batch that fired: ``window results need the columns
    ['fire_index']``). Two late elements in one batch re-fire the window twice: the table keeps the
    later firing. With a fire_index its user gave (0), it kept the one with the larger values (a
    user probe, session 65)."""
    from lowwater.core.windows import ProcessWindowFunction

    class Latest(ProcessWindowFunction):
        def process(self, key: Any, ctx: Any, elements: Any) -> Any:
            last = max(elements, key=lambda e: e["ts"])
            yield {"key": key, "window_start": ctx.window.start, "window_end": ctx.window.end, "value": last["value"]}

    batches = [[{"key": "a", "ts": 100, "value": 1}, {"key": "b", "ts": 1500, "value": 0}],
               [{"key": "a", "ts": 200, "value": 9}, {"key": "a", "ts": 300, "value": 3}]]  # two re-firings
    BatchFilesSource.write(tmp_path / "in", batches)
    env = StreamExecutionEnvironment()
    table = f"latest_{path}"
    (env.from_source(BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), [0]),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(TumblingEventTimeWindows.of(1000)).allowed_lateness("5 s").process(Latest())
     .add_sink(PostgresSink(pg.jdbc_url, table, user=pg.user)))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, end_of_input=True).execute(env)  # type: ignore[arg-type]
    assert job.path == path
    try:
        assert _table(spark, pg, table) == [("a", 0, 3, 0), ("b", 1000, 0, 0)]
    finally:
        execute_statements(spark, pg.jdbc_url, [f"DROP TABLE {table}"], pg.user, None)
