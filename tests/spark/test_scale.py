"""Issue 11: the native path keeps per-key data on the executors, its checkpoint on any Hadoop
file system, and hands DataFrames to its sinks. On real local Spark, real files, real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import CollectSink, OutputTag, StreamExecutionEnvironment
from lowwater.core.errors import PipelineError
from lowwater.core.watermarks import Watermark, WatermarkGenerator, WatermarkStrategy
from lowwater.core.windows import SlidingEventTimeWindows, TumblingEventTimeWindows
from lowwater.spark.analyzed import AnalyzedQuery
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import DirectorySink, ForeachDataFrameSink, PostgresSink
from lowwater.spark.sinks.postgres import mask_jdbc_url
from lowwater.spark.sources import BatchFilesSource
from tests.spark.crash_series import JVM_OPTIONS  # C1 only, serial GC: for a JVM of its own

pytestmark = pytest.mark.spark

MAX, MIN = 2**63 - 1, -(2**63)


def _source(tmp_path: Path, batches: list[list[dict[str, Any]]], partitions: int = 1) -> BatchFilesSource:
    BatchFilesSource.write(tmp_path / "in", batches)
    return BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), list(range(partitions)))


def _many_keys(keys: int) -> list[list[dict[str, Any]]]:
    """Two batches over ``keys`` keys in two partitions; the second closes the first's windows."""
    first = [{"key": f"k{i}", "ts": 1000 + i % 5000, "value": i, "partition": i % 2} for i in range(keys)]
    second = [{"key": f"k{i}", "ts": 21_000 + i % 5000, "value": 1, "partition": i % 2} for i in range(keys)]
    return [first, second]


class _DriverRows:
    """Counts the rows each ``collect``/``toPandas`` brings to the driver, and the length of each
    list an ``observe()`` metric brings, through ``Observation`` or an analysed query's own
    (:meth:`AnalyzedQuery.metrics`) (a spy: Spark still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, spark: Any) -> None:
        from pyspark.sql import Observation

        DataFrame = type(spark.range(1))  # PySpark 4's classic DataFrame class, which the engine's frames are
        self.sizes: list[int] = []
        collect, to_pandas = DataFrame.collect, DataFrame.toPandas

        def counting_collect(df: Any) -> Any:
            rows = collect(df)
            self.sizes.append(len(rows))
            return rows

        def counting_to_pandas(df: Any) -> Any:
            frame = to_pandas(df)
            self.sizes.append(len(frame))
            return frame

        observed = Observation.get

        def counting_get(observation: Any) -> Any:
            metrics = observed.fget(observation)  # type: ignore[attr-defined]
            self.sizes.extend(len(v) for v in metrics.values() if isinstance(v, list))
            return metrics

        query_metrics = AnalyzedQuery.metrics

        def counting_metrics(query: AnalyzedQuery) -> dict[str, Any]:
            metrics = query_metrics(query)
            self.sizes.extend(len(v) for v in metrics.values() if isinstance(v, list))
            return metrics

        monkeypatch.setattr(DataFrame, "collect", counting_collect)
        monkeypatch.setattr(Observation, "get", property(counting_get))
        monkeypatch.setattr(AnalyzedQuery, "metrics", counting_metrics)
        monkeypatch.setattr(DataFrame, "toPandas", counting_to_pandas)


@pytest.mark.parametrize("path", ["native", "executor"])
def test_no_per_key_row_reaches_the_driver_with_dataframe_sinks(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    keys = 3000
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    result = (env.from_source(_source(tmp_path, _many_keys(keys), partitions=2),
                              WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
              .key_by("key").window(TumblingEventTimeWindows.of(10_000)).side_output_late_data(late).sum("value"))
    result.add_sink(DirectorySink(tmp_path / "out", "parquet"))
    result.add_sink(DirectorySink(tmp_path / "fired", "json", empty_batches=False))
    result.get_side_output(late).add_sink(DirectorySink(tmp_path / "late", "parquet"))
    spy = _DriverRows(monkeypatch, spark)
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path,  # type: ignore[arg-type]
                       end_of_input=True).execute(env)
    monkeypatch.undo()
    # per batch: one row per partition and per window start (2 partitions, at most 3 starts)
    assert spy.sizes and max(spy.sizes) <= 2 + 3, spy.sizes
    out = spark.read.parquet(str(tmp_path / "out" / "batch=*"))
    assert out.count() == 2 * keys  # every key, in two windows
    assert out.filter("window_start = 0").agg({"value": "sum"}).first()[0] == sum(range(keys))
    assert str(job.accounting()) == f"{2 * keys} rows in = {2 * keys} windowed + 0 late + 0 dead-lettered"


def test_window_state_is_parquet_and_the_control_plane_is_json_without_pickle(spark: Any, tmp_path: Path) -> None:
    env = StreamExecutionEnvironment()
    (env.from_source(_source(tmp_path, _many_keys(50)),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts").with_idleness(5))
     .key_by("key").window(TumblingEventTimeWindows.of(10_000)).allowed_lateness(60_000).sum("value")
     .add_sink(DirectorySink(tmp_path / "out", "json")))
    SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=False).execute(env)
    root = tmp_path / "ck" / "lowwater"
    states = sorted((root / "state").iterdir())
    assert states and all(p.suffix == ".json" for p in states), states
    for p in states:
        doc = json.loads(p.read_text())  # plain JSON, no pickle
        assert doc["format"] == 2 and "generators" in doc and "late_written" in doc
        assert p.stat().st_mode & 0o077 == 0, f"{p} should be owner-only"
    latest = json.loads(states[-1].read_text())
    assert latest["open_starts"] == {"0": [0], "20000": [1]}, "both windows are open within their lateness"
    parts = sorted(str(p.relative_to(root)) for p in root.glob("windows/batch=*/start=*"))
    assert parts == ["windows/batch=0/start=0", "windows/batch=1/start=20000"]
    assert (spark.read.parquet(str(root / "windows" / "batch=0" / "start=0")).count()) == 50


def test_a_checkpoint_uri_goes_through_hadoop_and_gives_the_local_answer(spark: Any, tmp_path: Path) -> None:
    batches = [[{"key": "a", "ts": 1000, "value": 1}, {"key": "b", "ts": 2000, "value": 2}],
               [{"key": "a", "ts": 12_000, "value": 4}],
               [{"key": "a", "ts": 3000, "value": 8}, {"key": "b", "ts": 30_000, "value": 16}]]  # 3000: re-fires

    def run(location: str) -> list[tuple[Any, ...]]:
        env = StreamExecutionEnvironment()
        sink = (env.from_source(_source(tmp_path, batches),
                                WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
                .key_by("key").window(TumblingEventTimeWindows.of(10_000)).allowed_lateness(5000).sum("value")
                .collect())
        SparkRuntime(location, spark=spark, end_of_input=True).execute(env)
        return sorted((r.key, r.window_start, r.value, r.fire_index) for r in sink.results)

    local = run(str(tmp_path / "local"))
    assert local == [("a", 0, 1, 0), ("a", 0, 9, 1), ("a", 10_000, 4, 0), ("b", 0, 2, 0), ("b", 30_000, 16, 0)]
    assert run((tmp_path / "remote").as_uri()) == local
    ck = tmp_path / "remote" / "lowwater"
    assert (ck / "pipeline.json").exists() and list((ck / "state").glob("*.json"))
    assert list((ck / "batches").glob("*.json")) and (tmp_path / "remote" / "spark" / "commits").is_dir()


def test_outputs_are_dataframes_with_the_window_struct_and_where_late_rows_came_from(
    spark: Any, tmp_path: Path
) -> None:
    batches = [[{"key": "a", "ts": 1000, "value": 1, "partition": 0}, {"key": "a", "ts": 7000, "value": 2,
                                                                        "partition": 1}],
               [{"key": "a", "ts": 31_000, "value": 4, "partition": 0}, {"key": "a", "ts": 31_000, "value": 4,
                                                                         "partition": 1}],
               [{"key": "a", "ts": 6000, "value": 8, "partition": 1}]]  # late for [0, 10 s) and [5 s, 15 s)
    seen: list[tuple[int, list[str]]] = []
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    result = (env.from_source(_source(tmp_path, batches, partitions=2),
                              WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
              .key_by("key").window(SlidingEventTimeWindows.of(10_000, 5000)).side_output_late_data(late).max("value"))
    nonempty: list[tuple[str, int, int]] = []
    result.add_sink(ForeachDataFrameSink(lambda df, b: seen.append((b, df.columns))))
    result.add_sink(ForeachDataFrameSink(lambda df, b: nonempty.append(("results", b, df.count())),
                                         empty_batches=False))
    result.add_sink(DirectorySink(tmp_path / "out", "parquet"))
    result.add_sink(DirectorySink(tmp_path / "fired", "json", empty_batches=False))
    result.get_side_output(late).add_sink(DirectorySink(tmp_path / "late", "json"))
    result.get_side_output(late).add_sink(ForeachDataFrameSink(lambda df, b: nonempty.append(("late", b, df.count())),
                                                               empty_batches=False))
    SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)

    assert [b for b, _ in seen] == [0, 1, 2, 3], "every batch is delivered, also one that fires nothing"
    # a sink that declines empty batches is called only where there is output: windows fire in
    # batch 1 (the watermark passes 30 s) and at the end of input; the late element is batch 2's
    assert sorted(nonempty) == [("late", 2, 1), ("results", 1, 3), ("results", 3, 2)], nonempty
    assert seen[0][1] == ["key", "window_start", "window_end", "value", "fire_index", "window"]
    assert sorted(p.name for p in (tmp_path / "out").glob("batch=*")) == [f"batch={b}" for b in range(4)]
    fired = {p.name: sum(len(f.read_text().splitlines()) for f in p.glob("part-*.json"))
             for p in (tmp_path / "fired").glob("batch=*")}
    assert fired == {"batch=1": 3, "batch=3": 2}, "a directory only for the batches where windows fired"
    out = spark.read.parquet(str(tmp_path / "out" / "batch=*"))
    assert dict(out.dtypes)["window"] == "struct<start:timestamp,end:timestamp>"
    assert dict(out.dtypes)["value"] == "bigint", "max of a BIGINT stays BIGINT"
    row = out.filter("window_start = 0").selectExpr("unix_millis(window.start) AS s", "unix_millis(window.end) AS e",
                                                     "value").first()
    assert (row["s"], row["e"], row["value"]) == (0, 10_000, 2)
    lines = [json.loads(x) for p in (tmp_path / "late" / "batch=2").glob("part-*.json")
             for x in p.read_text().splitlines()]
    # "partition" is one of this source's fields, so the source position is source_partition, offset
    assert lines == [{"key": "a", "ts": 6000, "value": 8, "partition": 1, "source_partition": 1, "offset": 2,
                      "rejected_windows": [{"start": 5000, "end": 15_000}, {"start": 0, "end": 10_000}]}]


@pytest.mark.parametrize("path", ["native", "executor"])
def test_timestamps_at_the_ends_of_the_64_bit_range_are_dead_lettered_not_an_overflow(
    spark: Any, tmp_path: Path, path: str
) -> None:
    batches = [[{"key": "a", "ts": 1000, "value": 1}, {"key": "a", "ts": MAX, "value": 2},
                {"key": "a", "ts": MAX - 1000, "value": 4}, {"key": "a", "ts": MIN + 1, "value": 8}]]
    env = StreamExecutionEnvironment()
    results = (env.from_source(_source(tmp_path, batches),
                               WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
               .key_by("key").window(TumblingEventTimeWindows.of(10_000)).allowed_lateness(1000).sum("value")
               .collect())
    dead = CollectSink()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path,  # type: ignore[arg-type]
                       dead_letter_sink=dead, end_of_input=True).execute(env)
    assert [(r.key, r.window_start, r.value) for r in results.results] == [("a", 0, 1)]
    assert sorted(d["record"]["ts"] for d in dead.results) == [MIN + 1, MAX - 1000, MAX]
    assert all("64-bit range" in d["reason"] for d in dead.results)
    assert str(job.accounting()) == "4 rows in = 1 windowed + 0 late + 3 dead-lettered"
    assert job.batches()[0]["metrics"]["combined_watermark"] == MAX - 1, "they still advance the watermark"


def _not_a_float(element: dict[str, Any], previous: int) -> int:
    """A Python timestamp assigner (the executor path's): 0, another window, for a float ``n``."""
    return 0 if isinstance(element["n"], float) else int(element["ts"])


@pytest.mark.parametrize("assigner", ["field", "python"])
def test_integers_with_a_null_beside_them_reach_the_executor_paths_assigner_exact(
    spark: Any, tmp_path: Path, assigner: str
) -> None:
    """On the executor path pandas took an integer column that held a null in a partition's batch as
    float64: a timestamp past 2**53 ms was rounded (by 1,024 ms near 2**62), so its element went to
    the next window without a word, and a Python assigner got ``5.0`` for 5 (a user probe, session 54)."""
    base = 2**62 - 2**62 % 5000 + 5000  # a window start
    rows = [{"key": "k", "ts": base - 1, "n": 5, "value": 1}, {"key": "k", "ts": base + 4999, "n": None, "value": 10}]
    if assigner == "field":
        rows.append({"key": "k", "ts": None, "n": 7, "value": 100})  # no timestamp: a dead letter
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(
        "ts" if assigner == "field" else _not_a_float)
    results = (env.from_source(_source(tmp_path, [rows]), strategy)
               .key_by("key").window(TumblingEventTimeWindows.of(5000)).sum("value").collect())
    dead = CollectSink()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path="executor", dead_letter_sink=dead,
                       end_of_input=True).execute(env)
    assert job.path == "executor"
    assert sorted((r.window_start - base, r.value) for r in results.results) == [(-5000, 1), (0, 10)]
    assert [d["record"]["value"] for d in dead.results] == ([100] if assigner == "field" else [])


class _MarkerGenerator(WatermarkGenerator[Any]):
    """A punctuated generator: a watermark at an element's timestamp when its ``marker`` is set."""

    def on_event(self, event: Any, event_timestamp: int, output: Any) -> None:
        if event["marker"] is not None:
            output.emit_watermark(Watermark(event_timestamp))

    def on_periodic_emit(self, output: Any) -> None:
        pass


def _seconds_or_ts(element: dict[str, Any], previous: int) -> int:
    """A Python assigner reading a nullable DOUBLE: seconds when set, else the ``ts`` field."""
    return int(element["marker"] * 1000) if element["marker"] is not None else int(element["ts"])


@pytest.mark.parametrize("user_code", ["generator", "assigner"])
def test_a_null_double_reaches_the_executor_paths_user_code_as_none_not_nan(
    spark: Any, tmp_path: Path, user_code: str
) -> None:
    """On the executor path pandas made a null DOUBLE NaN, and the user's code got NaN where every
    other path gives None: a punctuated generator emitting for ``marker is not None`` emitted for
    every element, so the watermark jumped and an on-time element went to the late output; an
    assigner computing ``int(marker * 1000)`` failed the query (a user probe, session 58)."""
    batches = [[{"key": "a", "ts": 5000, "marker": None, "value": 1},
                {"key": "a", "ts": 1000, "marker": 1.0, "value": 2}],
               [{"key": "a", "ts": 2000, "marker": None, "value": 3}],
               [{"key": "a", "ts": 9000, "marker": 9.0, "value": 4}]]
    env = StreamExecutionEnvironment()
    if user_code == "generator":
        strategy = WatermarkStrategy.for_generator(_MarkerGenerator).with_timestamp_assigner("ts")
    else:
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(_seconds_or_ts)
    late = OutputTag("late")
    out = (env.from_source(_source(tmp_path, batches), strategy).key_by("key")
           .window(TumblingEventTimeWindows.of(1000)).side_output_late_data(late).sum("value"))
    results, late_rows = out.collect(), out.get_side_output(late).collect()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path="executor", end_of_input=True).execute(env)
    assert job.path == "executor"
    if user_code == "generator":  # only the elements with a marker emit: W(1000), so 2000 is on time
        expected = [(1000, 2), (2000, 3), (5000, 1), (9000, 4)]
        assert sorted((r.window_start, r.value) for r in results.results) == expected
        assert late_rows.results == []
    else:  # bounded by 0 after 5000 and 1 s (the marker): 2000 is late
        assert sorted((r.window_start, r.value) for r in results.results) == [(1000, 2), (5000, 1), (9000, 4)]
        assert [e["ts"] for e in late_rows.results] == [2000]


def test_an_integer_sum_wraps_around_like_a_java_long_on_time_and_when_refired(spark: Any, tmp_path: Path) -> None:
    big = 2**62
    batches = [[{"key": "a", "ts": 1000, "value": big}, {"key": "a", "ts": 2000, "value": big}],
               [{"key": "b", "ts": 12_000, "value": 1}],
               [{"key": "a", "ts": 3000, "value": big}]]  # late but allowed: re-fires with the full sum

    def java_long(x: int) -> int:
        return (x + 2**63) % 2**64 - 2**63

    env = StreamExecutionEnvironment()
    results = (env.from_source(_source(tmp_path, batches),
                               WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
               .key_by("key").window(TumblingEventTimeWindows.of(10_000)).allowed_lateness(10_000).sum("value")
               .collect())
    SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    assert sorted((r.key, r.window_start, r.value, r.fire_index) for r in results.results) == [
        ("a", 0, java_long(2 * big), 0), ("a", 0, java_long(3 * big), 1), ("b", 10_000, 1, 0)]
    assert java_long(2 * big) == MIN


def test_the_wrapped_sum_of_high_and_low_halves_is_the_java_long_sum(spark: Any) -> None:
    """WRAP against Python's arithmetic on sums of values from all over the 64-bit range."""
    from lowwater.spark.native_sql import WRAP

    values = [[2**63 - 1, 2**63 - 1], [-(2**63), -(2**63)], [-(2**63), 2**63 - 1, 5], [-1, -1, -1],
              [2**62, 2**62, 2**62], [4294967295, 4294967295], [-4294967296, 1], [0], [123456789012345, -42]]
    values += [[(i * 0x9E3779B97F4A7C15) % 2**64 - 2**63 for i in range(j, j + 7)] for j in range(40)]
    rows = [(sum(v >> 32 for v in vs), sum(v & 0xFFFFFFFF for v in vs), (sum(vs) + 2**63) % 2**64 - 2**63)
            for vs in values]
    got = spark.createDataFrame(rows, "hi BIGINT, lo BIGINT, want BIGINT").selectExpr(
        f"{WRAP.format(hi='hi', lo='lo')} AS v", "want").collect()
    assert [r.v for r in got] == [r.want for r in got]
    assert len(got) == len(values)


# -- PostgreSQL: no JDBC jar, masked credentials -----------------------------------------------
def test_postgres_sink_masks_credentials_in_its_repr_and_errors(spark: Any, tmp_path: Path) -> None:
    url = "jdbc:postgresql://127.0.0.1:1/db?user=ann&password=hunter2"
    sink = PostgresSink(url, "totals")
    assert "hunter2" not in repr(sink) and "password=***" in repr(sink)
    assert mask_jdbc_url("jdbc:postgresql://ann:hunter2@h/db") == "jdbc:postgresql://***@h/db"
    df = spark.createDataFrame([("a", 0, 10, 1, 0)], "key STRING, window_start BIGINT, window_end BIGINT, "
                                                       "value BIGINT, fire_index INT")
    with pytest.raises(PipelineError) as e:
        sink.write(df, 0)
    printed = "".join(traceback.format_exception(e.value))  # what a user sees, chained causes included
    assert "hunter2" not in printed and "password=***" in printed
    assert "totals" in str(e.value) and "Connection" in str(e.value) and len(str(e.value).splitlines()) == 1


def test_postgres_sink_without_the_jdbc_jar_fails_up_front_with_the_fix(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        from lowwater.core.errors import ConfigurationError
        from lowwater.spark.session import get_or_create_session
        from lowwater.spark.sinks import PostgresSink
        get_or_create_session(app_name="no jar")
        try:
            PostgresSink("jdbc:postgresql://h/db", "t").open()
        except ConfigurationError as e:
            print("ERROR:", e)
    """)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "JDK_JAVA_OPTIONS": JVM_OPTIONS}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                         cwd=tmp_path)
    assert "ERROR:" in run.stdout, run.stderr[-2000:]
    assert "not on the session's class path" in run.stdout and "postgres_jdbc_jar()" in run.stdout


def test_partials_of_a_window_already_too_late_are_not_kept(spark: Any, tmp_path: Path) -> None:
    """The aggregation writes every (key, window start) of the batch; the driver, which alone
    knows the watermark, deletes the starts that are too late, and counts their elements late."""
    batches = [[{"key": "a", "ts": 1000, "value": 1}],
               [{"key": "a", "ts": 25_000, "value": 2}],  # watermark 24,999: [0, 10 s) fired, cleaned up
               [{"key": "a", "ts": 2000, "value": 4}, {"key": "b", "ts": 26_000, "value": 8}]]  # 2000: too late
    env = StreamExecutionEnvironment()
    (env.from_source(_source(tmp_path, batches), WatermarkStrategy.for_monotonous_timestamps()
                     .with_timestamp_assigner("ts"))
     .key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value")
     .add_sink(DirectorySink(tmp_path / "out", "json")))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=False).execute(env)
    root = tmp_path / "ck" / "lowwater" / "windows"
    assert sorted(str(p.relative_to(root)) for p in root.glob("batch=2/start=*")) == ["batch=2/start=20000"]
    assert str(job.accounting()) == "4 rows in = 3 windowed + 1 late + 0 dead-lettered"
    latest = json.loads(sorted((tmp_path / "ck" / "lowwater" / "state").iterdir())[-1].read_text())
    assert latest["open_starts"] == {"20000": [1, 2]}


def test_a_native_state_of_the_first_format_is_refused_before_the_query_starts(spark: Any, tmp_path: Path) -> None:
    from lowwater.core.errors import ConfigurationError

    def run() -> Any:
        env = StreamExecutionEnvironment()
        (env.from_source(_source(tmp_path, [[{"key": "a", "ts": 1000, "value": 1}]]),
                         WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts"))
         .key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value")
         .add_sink(DirectorySink(tmp_path / "out", "json")))
        return SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=False).execute(env)

    run()
    state = sorted((tmp_path / "ck" / "lowwater" / "state").iterdir())[-1]
    doc = json.loads(state.read_text())
    state.write_text(json.dumps({**doc, "format": 1}))  # its late-allowed elements were a column of the window store
    spark_commits = sorted(os.listdir(tmp_path / "ck" / "spark" / "commits"))
    with pytest.raises(ConfigurationError, match=r"native state of format 1; this version reads format 2"):
        run()
    assert sorted(os.listdir(tmp_path / "ck" / "spark" / "commits")) == spark_commits
