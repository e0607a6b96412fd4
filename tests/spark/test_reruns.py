"""Incremental runs: ``available_now`` again and again over a growing log equals one run.

The defect this guards against (issue 9, item 1): the end-of-input step took the id of the
next Spark micro-batch, so a rerun after new records arrived wrote that batch's output and
then the replayed end-of-input step overwrote it; the new records reached no sink, Spark
committed their offsets, and the accounting still said "balanced".
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import KeyedCoProcessFunction, OutputTag, StreamExecutionEnvironment
from lowwater.core.errors import QueryFailedError
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import SlidingEventTimeWindows, TumblingEventTimeWindows
from lowwater.io import PartitionedLogWriter
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import DirectorySink, read_directory
from lowwater.spark.sources import PartitionedLogSource

pytestmark = pytest.mark.spark

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]


def _records(start_ts: int, n: int, key: str = "a") -> list[dict[str, Any]]:
    return [{"key": key, "ts": start_ts + 1_000 * i, "value": 1} for i in range(n)]


def _pipeline(log: Path, out: Path) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    sums = (env.from_source(PartitionedLogSource(log, FIELDS, max_files_per_trigger=1),
                            WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
            .key_by("key").window(TumblingEventTimeWindows.of(10_000)).side_output_late_data(late).sum("value"))
    sums.add_sink(DirectorySink(out / "results", "jsonl"))
    sums.get_side_output(late).add_sink(DirectorySink(out / "late", "jsonl"))
    return env


def _run(log: Path, out: Path, spark: Any, **options: Any) -> Any:
    return SparkRuntime(str(out / "ck"), spark=spark, clock=lambda b: 1_000 * b, **options).execute(
        _pipeline(log, out))


def _windows(out: Path) -> list[tuple[str, int, int]]:
    return sorted((r["key"], r["window_start"], r["value"]) for r in read_directory(out / "results"))


def test_a_series_of_available_now_runs_equals_one_run(spark: Any, tmp_path: Path) -> None:
    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    writer.append(0, _records(0, 25))
    writer.append(1, _records(0, 25, "b"))
    _run(log, tmp_path / "inc", spark)
    writer.append(0, _records(25_000, 15))  # 15 new records after the first run
    writer.append(1, _records(25_000, 15, "b"))
    job = _run(log, tmp_path / "inc", spark)
    _run(log, tmp_path / "one", spark)  # the same log in one run

    assert _windows(tmp_path / "inc") == _windows(tmp_path / "one")
    assert sum(v for _, _, v in _windows(tmp_path / "inc")) == 60, "windows up to the watermark, every record"
    accounting = job.accounting()
    assert accounting.rows_in == 80 and accounting.balanced
    assert not any(m["end_of_input"] for m in job.metrics()), "available_now alone does not end the input"


def test_records_read_after_a_declared_end_of_input_go_to_the_late_output_not_into_the_void(
    spark: Any, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    writer.append(0, _records(0, 25))
    out = tmp_path / "out"
    _run(log, out, spark, end_of_input=True)
    first = _windows(out)
    assert first == [("a", 0, 10), ("a", 10_000, 10), ("a", 20_000, 5)], "the MAX watermark fired every window"

    writer.append(0, _records(25_000, 15))  # the input had been declared complete
    job = _run(log, out, spark, end_of_input=True)

    assert _windows(out) == first, "the end-of-input step's output is never rewritten by a later batch"
    late = sorted(r["ts"] for r in read_directory(out / "late"))
    assert late == [25_000 + 1_000 * i for i in range(15)], "every record read after the end is late, and kept"
    accounting = job.accounting()
    assert (accounting.rows_in, accounting.rows_late) == (40, 15) and accounting.balanced
    steps = [(m["batch_id"], m["spark_batch_id"], m["end_of_input"]) for m in job.metrics()]
    end_step = next(b for b, _, end in steps if end)
    assert [b for b, _, _ in steps] == list(range(len(steps))), "one step id each, none reused"
    assert all(s == b - 1 for b, s, end in steps if b > end_step), "Spark's later batches step past the end"


def test_an_end_of_input_step_interrupted_by_a_crash_is_completed_before_new_batches(
    spark: Any, tmp_path: Path
) -> None:
    from lowwater.spark.state import StateStore

    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    writer.append(0, _records(0, 25))
    out = tmp_path / "out"
    _run(log, out, spark)
    store = StateStore(out / "ck")
    step = max(r["batch_id"] for r in store.batch_records()) + 1
    store.write_end_of_input({"step": step, "done": False})  # as a crash inside finish() leaves it
    writer.append(0, _records(25_000, 15))
    job = _run(log, out, spark)  # even without end_of_input: the recorded end is final

    assert store.end_of_input() == {"step": step, "done": True}
    assert _windows(out) == [("a", 0, 10), ("a", 10_000, 10), ("a", 20_000, 5)]
    assert len(read_directory(out / "late")) == 15
    assert job.accounting().balanced and job.accounting().rows_in == 40


def test_interval_and_available_now_runs_resume_each_others_checkpoints(spark: Any, tmp_path: Path) -> None:
    """Drain a continuous job with available_now, then run it continuously again (issue 9, item 5)."""
    import time

    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    writer.append(0, _records(0, 12))
    out = tmp_path / "out"
    job = _run(log, out, spark, trigger="300 ms")
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and sum(m["rows_in"] for m in job.metrics()) < 12:
            time.sleep(0.5)
    finally:
        job.stop()
    writer.append(0, _records(12_000, 10))
    _run(log, out, spark)  # available_now drains what the interval job had not read
    writer.append(0, _records(22_000, 10))
    job = _run(log, out, spark, trigger="300 ms")  # and the continuous job resumes after it
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and sum(m["rows_in"] for m in job.metrics()) < 32:
            time.sleep(0.5)
    finally:
        job.stop()
    accounting = job.accounting()
    assert accounting.rows_in == 32 and accounting.balanced
    assert _windows(out) == [("a", 0, 10), ("a", 10_000, 10), ("a", 20_000, 10)]


def test_a_checkpoint_with_another_number_of_sources_is_refused_up_front_with_what_to_do(
    spark: Any, tmp_path: Path
) -> None:
    from lowwater.core.errors import ConfigurationError

    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, _records(0, 3))
    out = tmp_path / "out"
    _run(log, out, spark)
    offsets = out / "ck" / "spark" / "offsets"
    latest = max((p for p in offsets.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    lines = latest.read_text().splitlines()
    latest.write_text("\n".join(lines[:-1]))  # as an older lowwater (no tick source) wrote it
    with pytest.raises(ConfigurationError, match=r"written by a query with 1 source\(s\).*new checkpoint location"):
        _run(log, out, spark)


def _sliding(log: Path, out: Path) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    sums = (env.from_source(PartitionedLogSource(log, FIELDS, max_files_per_trigger=1),
                            WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
            .key_by("key").window(SlidingEventTimeWindows.of(10_000, 2_000)).allowed_lateness(3_000)
            .side_output_late_data(late).sum("value"))
    sums.add_sink(DirectorySink(out / "results", "jsonl"))
    sums.get_side_output(late).add_sink(DirectorySink(out / "late", "jsonl"))
    return env


@pytest.mark.parametrize("first_run", ["panes", "before panes"])
def test_sliding_windows_resume_from_their_checkpoint_as_one_run(spark: Any, tmp_path: Path, first_run: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Sliding windows on the native path keep panes (session 59). A run resumed from the checkpoint
    equals one run, late re-firings and the late output included; so does a run on a checkpoint
    written before panes, whose open starts are windows': it goes on exploding them."""
    from lowwater.spark.native import NativeProcessor

    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    late_ones = [{"key": "a", "ts": ts, "value": 100} for ts in (9_000, 15_500, 1_000)]  # refire; too late
    writer.append(0, _records(0, 12) + late_ones[:1] + _records(12_000, 10))
    writer.append(1, _records(500, 20, "b"))
    if first_run == "before panes":
        monkeypatch.setattr(NativeProcessor, "_pane_able", lambda self: False)
    SparkRuntime(str(tmp_path / "inc" / "ck"), spark=spark, clock=lambda b: 1_000 * b).execute(
        _sliding(log, tmp_path / "inc"))
    monkeypatch.undo()
    state = max((tmp_path / "inc" / "ck" / "lowwater" / "state").glob("*.json"), key=lambda f: int(f.stem)).read_text()
    assert ('"panes": true' in state) == (first_run == "panes")
    writer.append(0, late_ones[1:] + _records(22_000, 8))
    writer.append(1, _records(20_500, 10, "b"))
    job = SparkRuntime(str(tmp_path / "inc" / "ck"), spark=spark, clock=lambda b: 1_000 * b).execute(
        _sliding(log, tmp_path / "inc"))
    SparkRuntime(str(tmp_path / "one" / "ck"), spark=spark, clock=lambda b: 1_000 * b).execute(
        _sliding(log, tmp_path / "one"))

    def rows(out: Path, kind: str) -> list[str]:
        return sorted(json.dumps(r, sort_keys=True) for r in read_directory(out / kind))

    assert rows(tmp_path / "inc", "results") == rows(tmp_path / "one", "results")
    assert rows(tmp_path / "inc", "late") == rows(tmp_path / "one", "late")
    assert any(r["fire_index"] > 0 for r in read_directory(tmp_path / "one" / "results")), "a late re-firing"
    assert [r["ts"] for r in read_directory(tmp_path / "one" / "late")] == [1_000], "too late for all its windows"
    assert job.accounting().balanced


class _RemindLater(KeyedCoProcessFunction):
    """A processing-time timer 5 s after each element of the first input."""

    def process_element1(self, value: Any, ctx: Any) -> None:
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 5_000)

    def process_element2(self, value: Any, ctx: Any) -> None:
        return None

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield {"key": ctx.get_current_key(), "timer": timestamp}


@pytest.mark.parametrize("path", ["keyed", "general"])
def test_a_rerun_after_the_end_of_input_fires_no_processing_time_timer_the_end_left(
        spark: Any, tmp_path: Path, path: str) -> None:
    """The end of input keeps processing time where the last batch left it: a timer still pending
    does not fire (Flink's end quiesces the processing-time service). A later run of the same
    command, with nothing new or with new records, moved it with its own clock and fired the timer
    after the end (user probe S, session 62). Without the end, the same runs fire it."""
    writers = [PartitionedLogWriter(tmp_path / side, "jsonl") for side in ("a", "b")]
    writers[0].append(0, [{"key": "x", "ts": 100}])
    writers[1].append(0, [{"key": "x", "ts": 200}])
    fields = [("key", "STRING"), ("ts", "BIGINT")]
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")

    def run(name: str, end: bool) -> list[Any]:
        env = StreamExecutionEnvironment()
        a, b = (env.from_source(PartitionedLogSource(tmp_path / side, fields), strategy, name=side) for side in "ab")
        a.connect(b).key_by("key", "key").process(_RemindLater()).add_sink(
            DirectorySink(tmp_path / name / "out", "jsonl"))
        SparkRuntime(str(tmp_path / name / "ck"), spark=spark, path=path, end_of_input=end,
                     clock=lambda b: 10_000 * b + 1_000).execute(env)  # the timer at 6,000 is due from batch 1
        return sorted((r["key"], r["timer"]) for r in read_directory(tmp_path / name / "out"))

    assert run("ended", True) == []
    if path == "keyed":  # the state as the code before session 62 wrote it, with no ended_ms
        shutil.copytree(tmp_path / "ended", tmp_path / "old")
        newest = max((tmp_path / "old" / "ck" / "lowwater" / "state").glob("*.json"), key=lambda f: int(f.stem))
        state = json.loads(newest.read_text())
        del state["ended_ms"]
        newest.write_text(json.dumps(state))
        assert run("old", True) == [], "a rerun of an ended checkpoint from before session 62 fired a timer"
    assert run("ended", True) == [], "a rerun with nothing new fired a timer after the end"
    writers[0].append(0, [{"key": "y", "ts": 300}])
    assert run("ended", True) == [], "a rerun with a new record fired a timer after the end"
    assert run("open", False) == []
    assert run("open", False) == [("x", 6_000), ("y", 6_000)], "without the end, a later batch fires them"


@pytest.mark.parametrize("path", ["native", "keyed", "general"])
def test_a_run_that_reads_nothing_new_is_a_batch_without_rows_that_still_fires_what_idleness_releases(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """A run of ``available_now`` with no new record is one batch of the tick source alone. It ran
    every job that reads a batch's rows over none (on the native path its aggregation and partials'
    write, 1.9 s of a rerun's 2.7 s when cold); it is now the processors' batch without rows. Its
    periodic emission still marks the quiet partition idle and fires the windows that released,
    exactly as the batch over no rows did, and the batches after it go on from its state; on the
    native path it runs no Spark job at all when nothing fires."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts").with_idleness(5_000)

    def runs(name: str) -> tuple[list[list[tuple[str, int, int]]], list[int]]:
        log = tmp_path / name / "log"
        writer = PartitionedLogWriter(log, "jsonl")
        writer.append(0, _records(0, 25))  # partition 0 to 24 s
        writer.append(1, [{"key": "b", "ts": 100, "value": 1}])  # partition 1: one record, then quiet
        windows, jobs = [], []
        for i in range(5):
            if i == 4:  # both partitions again
                writer.append(0, _records(25_000, 20))
                writer.append(1, [{"key": "b", "ts": 41_000, "value": 1}])
            env = StreamExecutionEnvironment()
            (env.from_source(PartitionedLogSource(log, FIELDS), strategy).key_by("key")
             .window(TumblingEventTimeWindows.of(10_000)).sum("value")
             .add_sink(DirectorySink(tmp_path / name / "results", "jsonl", empty_batches=False)))
            job = SparkRuntime(str(tmp_path / name / "ck"), spark=spark, path=path,
                               clock=lambda b: 10_000 * b).execute(env)
            assert job.path == path and job.accounting().balanced
            sc = spark.sparkContext
            jobs.append(len(sc.statusTracker().getJobIdsForGroup(str(job.query.runId))))
            windows.append(_windows(tmp_path / name))
        return windows, jobs

    windows, jobs = runs("ticks")
    assert windows[3] == [("a", 0, 10), ("a", 10_000, 10), ("b", 0, 1)], "the quiet partition went idle"
    assert windows[4] == [("a", 0, 10), ("a", 10_000, 10), ("a", 20_000, 10), ("a", 30_000, 10), ("b", 0, 1)]
    if path == "native":
        assert jobs[3] == 0, f"Spark jobs per run: {jobs}; the fourth run read nothing and fired nothing"
    import lowwater.spark.engine as engine

    monkeypatch.setattr(engine, "_read_nothing", lambda query, spark_batch_id: False)  # batches over no rows
    assert runs("rows")[0] == windows


def test_a_stream_that_may_keep_spark_state_is_never_taken_for_ticks_alone(spark: Any, tmp_path: Path) -> None:
    """A batch that read nothing runs without rows only where the sources' stream keeps no state of
    Spark's: a user's aggregation or join upstream of a ``DataFrameSource`` emits rows in a batch that
    read nothing (windows its watermark closes, an outer join's unmatched rows)."""
    from lowwater.spark.engine import _keeps_state
    from lowwater.spark.general import read_sources

    rate = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 1).load()
    assert not _keeps_state(rate.selectExpr("value AS v", "timestamp").where("v > 0").union(
        rate.selectExpr("value AS v", "timestamp")))
    assert _keeps_state(rate.withWatermark("timestamp", "1 second").groupBy("value").count())
    assert _keeps_state(rate.dropDuplicates(["value"]))
    assert _keeps_state(rate.join(rate.withColumnRenamed("value", "v"), "timestamp"))
    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, _records(0, 2))
    assert not _keeps_state(read_sources(spark, [PartitionedLogSource(log, FIELDS)], ["log"])), "lowwater's own"


@pytest.mark.parametrize("path", ["native", "keyed"])
def test_state_files_deleted_between_runs_fail_the_run_naming_them_instead_of_reading_as_no_state(
        spark: Any, tmp_path: Path, path: str) -> None:
    """A directory the state names whose files are gone (a cleaner of old files; executors that
    wrote to disks the driver does not see) read as one with no rows: the open window went on from
    nothing and fired 5 where it holds 10, the accounting balanced. Now the run fails, naming it."""
    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    writer.append(0, _records(0, 25))  # windows [0, 10 s) and [10 s, 20 s) fire; [20 s, 30 s) stays open
    out = tmp_path / "out"
    _run(log, out, spark, path=path)
    assert _windows(out) == [("a", 0, 10), ("a", 10_000, 10)]
    stored = out / "ck" / "lowwater" / ("windows" if path == "native" else "keyed")
    files = [f for f in stored.rglob("*.parquet") if path == "keyed" or f.parent.name == "start=20000"]
    assert files, sorted(stored.rglob("*"))
    for f in files:
        f.unlink()
    writer.append(0, _records(25_000, 10))
    what = "window contents" if path == "native" else "keyed state"
    with pytest.raises(QueryFailedError, match=f"CheckpointDamagedError: the checkpoint lost {what}: .*"
                                               f"{'start=20000' if path == 'native' else 'batch=0'}"):
        _run(log, out, spark, path=path)
    assert _windows(out) == [("a", 0, 10), ("a", 10_000, 10)], "nothing fired from the damaged state"


@pytest.mark.parametrize("damage", ["spark/ deleted", "an older copy of spark/"])
def test_a_checkpoint_whose_spark_half_is_gone_or_behind_is_refused_before_anything_is_read(
        spark: Any, tmp_path: Path, damage: str) -> None:
    """``<checkpoint>/spark`` deleted (or restored from an older copy) with ``<checkpoint>/lowwater`` kept:
    Spark started over from the sources' start as its batch 0, lowwater took it for a replay of its
    batch 0, and the sinks got every window again beside the newer batches, the accounting balanced
    with each record counted twice (a user probe, session 59)."""
    import shutil

    from lowwater.core.errors import ConfigurationError

    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    for start in (0, 10_000, 20_000):  # a segment a batch: batches 0, 1 and 2
        writer.append(0, _records(start, 10))
    _run(log, tmp_path / "out", spark)
    writer.append(0, _records(30_000, 15))
    _run(log, tmp_path / "out", spark)  # batch 3
    before = _windows(tmp_path / "out")
    spark_half = tmp_path / "out" / "ck" / "spark"
    if damage == "spark/ deleted":
        shutil.rmtree(spark_half)
    else:  # two entries short (one short is a crash before the offsets reached the disk, which Spark
        # plans again: tests/spark/test_log_source.py)
        newest = max(int(p.name) for p in (spark_half / "offsets").iterdir() if p.name.isdigit())
        for kind in ("offsets", "commits"):
            for batch in (newest, newest - 1):
                (spark_half / kind / str(batch)).unlink()
    with pytest.raises(ConfigurationError) as refused:
        _run(log, tmp_path / "out", spark)
    said = str(refused.value)
    assert "is incomplete: lowwater's state is after Spark's micro-batch 3" in said, said
    assert ("is missing" if damage == "spark/ deleted" else "ends at batch 1") in said, said
    assert "Restore the checkpoint whole" in said and "new checkpoint location" in said, said
    assert _windows(tmp_path / "out") == before, "nothing was written"


def test_a_second_job_under_a_running_ones_name_is_refused_naming_job_name(spark: Any, tmp_path: Path) -> None:
    """Two jobs in one SparkSession, neither named: Spark refused the second at ``start()`` with an
    ``IllegalArgumentException`` about a query name the user had not given, after its checkpoint was
    claimed (a user probe, session 59). Names that become the same query name are the same."""
    from lowwater.core.errors import ConfigurationError

    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, _records(0, 5))
    first = SparkRuntime(str(tmp_path / "one" / "ck"), spark=spark, trigger="1 second").execute(
        _pipeline(log, tmp_path / "one"), "clicks.eu")
    try:
        for name in ("clicks.eu", "clicks-eu"):
            with pytest.raises(ConfigurationError) as refused:
                SparkRuntime(str(tmp_path / "two" / "ck"), spark=spark, trigger="1 second").execute(
                    _pipeline(log, tmp_path / "two"), name)
            said = str(refused.value)
            assert said.startswith("job_name: a streaming query named 'clicks_eu'"), said
            assert "a job_name of its own" in said, said
            assert not (tmp_path / "two" / "ck" / "lowwater" / "pipeline.json").exists(), "nothing claimed"
        second = SparkRuntime(str(tmp_path / "two" / "ck"), spark=spark).execute(_pipeline(log, tmp_path / "two"),
                                                                                  "clicks.us")
        assert second.accounting().rows_in == 5
    finally:
        first.stop()


_CONNECT = """
import os
from pyspark.sql import SparkSession
from lowwater.api import CollectionSource, StreamExecutionEnvironment
from lowwater.core.errors import ConfigurationError
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.spark.engine import SparkRuntime

spark = SparkSession.builder.remote("sc://127.0.0.1:9").getOrCreate()  # a client only: nothing is asked of it
env = StreamExecutionEnvironment()
env.from_source(CollectionSource([[{{"k": "a", "ts": 1}}]]),
                WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")).collect()
try:
    SparkRuntime({ck!r}, spark=spark).execute(env)
except ConfigurationError as e:
    print("refused:", e)
print("claimed:", os.path.exists({ck!r}), flush=True)
os._exit(0)  # the client's exit would try to release its session with the server there is not
"""


def test_a_spark_connect_session_is_refused_before_the_checkpoint_is_claimed(tmp_path: Path) -> None:
    """Over Spark Connect a job failed at once with Spark's pickling error for ``foreachBatch``,
    which blamed a function the user had not written, after the checkpoint was claimed (a user
    probe, session 59). A Connect client session, in a process of its own (it would be the
    active session of this one's tests)."""
    import subprocess
    import sys

    script = tmp_path / "connect.py"
    script.write_text(_CONNECT.format(ck=str(tmp_path / "ck")))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refused: spark: a Spark Connect session (SparkSession.builder.remote(...)) cannot run a lowwater job" \
        in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "claimed: False" in proc.stdout, proc.stdout
