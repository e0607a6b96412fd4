"""The keyed path (window operators of any kind, and keyed process functions, per key on the
executors) equals the reference runtime.

Each pipeline here cannot take the native path: sessions, a count trigger with a process window
function, a user AggregateFunction over sliding windows, a keyed process function with state and
timers, Python key selectors, maps, filters and flat_maps. Each runs on the reference runtime and
on Spark over the same partitioned log with the
same micro-batches, and every output must be equal, element for element.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import CollectSink, OutputTag, StreamExecutionEnvironment
from lowwater.core.process import KeyedProcessFunction, ValueStateDescriptor
from lowwater.core.watermarks import Watermark, WatermarkGenerator, WatermarkStrategy
from lowwater.core.windows import (
    CountTrigger,
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from lowwater.core.windows.functions import AggregateFunction
from lowwater.io import PartitionedLogWriter, SyntheticStream
from lowwater.runtime.reference import ReferenceRuntime
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sources import BatchFilesSource, PartitionedLogSource

pytestmark = pytest.mark.spark

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]


class Average(AggregateFunction[dict[str, Any], list[int], float]):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: dict[str, Any], accumulator: list[int]) -> list[int]:
        return [accumulator[0] + int(value["value"]), accumulator[1] + 1]

    def get_result(self, accumulator: list[int]) -> float:
        return accumulator[0] / accumulator[1]

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


def _count_in_window(key: Any, context: Any, elements: Iterable[dict[str, Any]]) -> Iterable[tuple[Any, ...]]:
    rows = list(elements)
    yield (key, context.window.start, context.window.end, len(rows), sum(int(r["value"]) for r in rows))


def _strategy() -> WatermarkStrategy[Any]:
    return WatermarkStrategy.for_bounded_out_of_orderness(500).with_timestamp_assigner("ts")


def _sessions(env: StreamExecutionEnvironment, source: Any) -> list[CollectSink]:
    late = OutputTag("late")
    out = (env.from_source(source, _strategy())
           .map(lambda r: {**r, "value": int(r["value"]) * 2})
           .key_by(lambda r: r["key"].upper())
           .window(EventTimeSessionWindows.with_gap(400))
           .allowed_lateness(1000)
           .side_output_late_data(late)
           .sum("value"))
    return [out.collect(), out.get_side_output(late).collect()]


def _count_trigger(env: StreamExecutionEnvironment, source: Any) -> list[CollectSink]:
    out = (env.from_source(source, _strategy())
           .filter(lambda r: int(r["value"]) % 7 != 0)
           .key_by("key")
           .window(TumblingEventTimeWindows.of(2000))
           .trigger(CountTrigger.of(3))
           .process(_count_in_window))
    return [out.collect()]


def _user_aggregate(env: StreamExecutionEnvironment, source: Any) -> list[CollectSink]:
    late = OutputTag("late")
    out = (env.from_source(source, _strategy())
           .flat_map(lambda r: [r, {**r, "key": r["key"] + "-copy"}] if int(r["value"]) % 2 else [r])
           .key_by("key")
           .window(SlidingEventTimeWindows.of(3000, 1000))
           .allowed_lateness(500)
           .side_output_late_data(late)
           .aggregate(Average()))
    return [out.collect(), out.get_side_output(late).collect()]


class RunningTotal(KeyedProcessFunction):
    """Per key: a running total in keyed state, reported by an event-time timer 1 s after each element."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(ValueStateDescriptor("total"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.total.update((self.total.value() or 0) + int(value["value"]))
        ctx.timer_service().register_event_time_timer(int(value["ts"]) + 1000)
        return None

    def on_timer(self, timestamp: int, ctx: Any, *out: Any) -> Any:
        yield (ctx.get_current_key(), timestamp, self.total.value(), ctx.timer_service().current_watermark())


def _process_function(env: StreamExecutionEnvironment, source: Any) -> list[CollectSink]:
    return [env.from_source(source, _strategy()).key_by("key").process(RunningTotal()).collect()]


def _sessions_by_field(env: StreamExecutionEnvironment, source: Any) -> list[CollectSink]:
    late = OutputTag("late")
    out = (env.from_source(source, _strategy()).key_by("key").window(EventTimeSessionWindows.with_gap(400))
           .allowed_lateness(1000).side_output_late_data(late).sum("value"))
    return [out.collect(), out.get_side_output(late).collect()]


PIPELINES = {"process_function": _process_function, "sessions": _sessions, "count_trigger_process": _count_trigger,
             "user_aggregate": _user_aggregate, "sessions_by_field": _sessions_by_field}
SQL_LANES = {"process_function", "sessions_by_field"}
"""Straight from the source, keyed by a field, timestamped by a field with a built-in generator:
stage A runs as SQL, with no Python per row (``SqlLanes``)."""


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("keyed") / "log"
    stream = SyntheticStream(partitions=3, keys=25, events_per_second=400, disorder_ms=700, lagging_partition=2,
                             lag_ms=2000, late_fraction=0.04, late_by_ms=3000, seed=11)
    stream.write_to(PartitionedLogWriter(root, "jsonl"), batches=4, rows_per_batch=250)
    return root


def _rows(sink: CollectSink) -> list[str]:
    return sorted(json.dumps(r, default=repr, sort_keys=True) if isinstance(r, dict) else repr(r) for r in sink.results)


@pytest.mark.parametrize("name", [*sorted(PIPELINES), "sessions on a file:// checkpoint URI"])
def test_the_keyed_path_equals_the_reference_runtime(spark: Any, log: Path, name: str, tmp_path: Path) -> None:
    """The last case keeps the whole checkpoint behind Hadoop's FileSystem API (as on HDFS or S3)."""
    uri = name.endswith("URI")
    build = PIPELINES[name.split(" ")[0]]
    env = StreamExecutionEnvironment()
    expected = build(env, PartitionedLogSource(log, FIELDS, segments_per_batch=1))
    ReferenceRuntime().execute(env)

    env = StreamExecutionEnvironment()
    actual = build(env, PartitionedLogSource(log, FIELDS, segments_per_batch=1))
    checkpoint = (tmp_path / "ck").as_uri() if uri else str(tmp_path / "ck")
    compact = name == "sessions"  # every 2 batches one directory gets the whole keyed state
    job = SparkRuntime(checkpoint, spark=spark, clock=lambda b: 1000 * b, end_of_input=True,
                       snapshot_every=2 if compact else 20).execute(env)
    assert job.path == "keyed", job.reason
    assert len(job.batches()) >= 4, "one micro-batch per segment, and the end of input"
    stage_a = {b["metrics"]["stage_a"] for b in job.batches()} - {None}
    assert stage_a == ({"sql"} if name.split(" ")[0] in SQL_LANES else {"python"})
    in_columns = sum(b["metrics"].get("keys_in_columns", 0) for b in job.batches())
    assert (in_columns > 0) == (name == "sessions_by_field"), in_columns  # keyed_sessions: a sum of a field
    for want, got in zip(expected, actual, strict=True):
        assert want.results, f"{name}: the reference run should produce output"
        assert _rows(got) == _rows(want)
    keyed = tmp_path / "ck" / "lowwater" / "keyed"
    assert any(keyed.glob("batch=*/*.parquet")), "the keyed state is Parquet under the checkpoint"
    assert not [f for f in keyed.rglob("*") if f.name.startswith(("_", "._"))], \
        "no _SUCCESS marker (or its .crc), no _temporary directory: nothing but the state's files"
    on_disk = sum(f.stat().st_size for f in keyed.rglob("*") if f.is_file())
    assert job.batches()[-1]["metrics"]["state_bytes"] >= on_disk > 0, "state_bytes counts the keyed state"
    if compact:  # the directories a compaction replaced are gone; a few newer ones remain
        kept = sorted(int(d.name.split("=")[1]) for d in keyed.glob("batch=*"))
        assert len(kept) <= 3 and kept[0] >= len(job.batches()) - 4, kept


def test_a_compaction_keeps_the_state_of_keys_it_does_not_visit(spark: Any, tmp_path: Path) -> None:
    """Key ``a`` opens a long session in batch 0 and is not seen again until the end of input:
    the compactions in between (every 2 batches) must carry its state, which no batch visits,
    into the one directory they leave."""
    batches = [[{"key": "a", "ts": 1_000, "value": 5, "partition": 0}]]
    batches += [[{"key": "b", "ts": 1_000 + 1_000 * b, "value": b, "partition": 0}] for b in range(1, 7)]
    BatchFilesSource.write(tmp_path / "in", batches)
    src = BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), [0])
    env = StreamExecutionEnvironment()
    sink = CollectSink()
    (env.from_source(src, WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(EventTimeSessionWindows.with_gap(100_000)).sum("value").add_sink(sink))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path="keyed", clock=lambda b: 1000 * b, end_of_input=True,
                       snapshot_every=2).execute(env)
    assert job.path == "keyed"
    assert sorted((r.key, r.window_start, r.window_end, r.value) for r in sink.results) == [
        ("a", 1_000, 101_000, 5), ("b", 2_000, 107_000, sum(range(1, 7)))]
    kept = sorted(int(d.name.split("=")[1]) for d in (tmp_path / "ck" / "lowwater" / "keyed").glob("batch=*"))
    assert kept[0] >= 4, f"compactions should have replaced the first directories: {kept}"


def _session_sums(spark: Any, tmp_path: Path, batches: list[list[dict[str, Any]]], gap: int,
                  path: str) -> tuple[Any, list[Any]]:
    """Sums over sessions of ``gap`` ms by ``key``, of ``batches`` (one partition), on ``path``:
    the job and its results ``(key, start, end, sum)``, sorted."""
    if not (tmp_path / "in").exists():
        BatchFilesSource.write(tmp_path / "in", batches)
    src = BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), [0])
    env = StreamExecutionEnvironment()
    sink = CollectSink()
    (env.from_source(src, WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(EventTimeSessionWindows.with_gap(gap)).sum("value").add_sink(sink))
    job = SparkRuntime(str(tmp_path / f"ck-{path}"), spark=spark, path=path, clock=lambda b: 1000 * b,
                       end_of_input=True).execute(env)
    assert job.path == path, job.reason
    return job, sorted((r.key, r.window_start, r.window_end, r.value) for r in sink.results)


def test_a_batch_that_visits_every_live_key_leaves_one_state_directory(spark: Any, tmp_path: Path) -> None:
    """Keys ``a`` and ``b`` come in every batch; ``c`` once, and its session fires and leaves no
    state. A batch that visits every live key writes the whole state to its directory: the next
    batch reads that one directory (no compaction is due: ``snapshot_every`` is 20), and the older
    ones are deleted. Results equal the general path's."""
    batches = [[{"key": k, "ts": 1_000 * b + i, "value": b, "partition": 0} for i, k in enumerate("ab")]
               for b in range(6)]
    batches[0].append({"key": "c", "ts": 0, "value": 100, "partition": 0})
    job, got = _session_sums(spark, tmp_path, batches, 1_500, "keyed")
    assert got == _session_sums(spark, tmp_path, batches, 1_500, "general")[1]
    assert ("c", 0, 1_500, 100) in got and ("a", 0, 6_500, sum(range(6))) in got
    # batch 1 does not visit c (its session's timer is not due yet), so batch 0's directory stays;
    # batch 2 fires c's session, and from then on each batch's directory replaces those before it
    assert [b["metrics"]["state_batches"] for b in job.batches()][:6] == [1, 2, 1, 1, 1, 1]
    kept = sorted(int(d.name.split("=")[1]) for d in (tmp_path / "ck-keyed" / "lowwater" / "keyed").glob("batch=*"))
    assert len(kept) <= 2 and kept[0] >= 4, f"the replaced directories are deleted: {kept}"


def test_a_run_leaves_the_caller_s_session_the_active_one(spark: Any, tmp_path: Path) -> None:
    """Each micro-batch's DataFrames belong to Spark's clone of the query's session. A batch
    with nothing to output made its empty frames with PySpark's ``createDataFrame`` on that
    clone, which made it the process's active session: after a run,
    ``SparkSession.getActiveSession()`` (and so ``get_or_create_session``) returned the last
    batch's clone instead of the session the caller ran with."""
    from pyspark.sql import SparkSession

    batches = [[{"key": "a", "ts": 1_000 * b, "value": b, "partition": 0}] for b in range(3)]
    BatchFilesSource.write(tmp_path / "in", batches)
    src = BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), [0])
    env = StreamExecutionEnvironment()
    (env.from_source(src, WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(EventTimeSessionWindows.with_gap(1_500)).sum("value").add_sink(CollectSink()))
    before = SparkSession.getActiveSession()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path="keyed", clock=lambda b: 1000 * b).execute(env)
    assert job.path == "keyed" and len(job.batches()) == 3  # the first batch has no state yet: empty frames
    assert SparkSession.getActiveSession() is before


def test_a_batch_that_read_many_old_versions_makes_the_next_one_compact(spark: Any, tmp_path: Path) -> None:
    """Key ``a`` opens a long session in batch 0 and is not seen again; ``b`` and ``c`` come in
    every batch, so every directory holds a new version of them and none holds the whole state.
    Once a batch reads more than twice as many stored rows as there are live keys, the next one
    compacts (``snapshot_every`` is 20): the directories stay few. Results equal the general path's."""
    batches = [[{"key": k, "ts": 1_000 * b + i, "value": b, "partition": 0} for i, k in enumerate("bc")]
               for b in range(10)]
    batches[0].append({"key": "a", "ts": 0, "value": 7, "partition": 0})
    job, got = _session_sums(spark, tmp_path, batches, 100_000, "keyed")
    assert got == _session_sums(spark, tmp_path, batches, 100_000, "general")[1]
    assert ("a", 0, 100_000, 7) in got and ("b", 0, 109_000, sum(range(10))) in got
    # batch 3 reads 7 rows (a, and b and c from 3 directories) for 3 live keys: batch 4 compacts
    assert [b["metrics"]["state_batches"] for b in job.batches()][:10] == [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]


def test_stage_a_in_sql_dead_letters_and_watermarks_as_stage_a_in_python(spark: Any, tmp_path: Path) -> None:
    """Integer keys, and every kind of row stage A rejects: no key (whose timestamp still moves its
    partition's watermark, as the generator sees it before the key selector), no timestamp, Flink's
    no-timestamp marker, a line that does not parse. The keyed path with stage A in SQL equals the
    general path (the reference operators on the driver) in results, late rows, dead letters,
    watermarks and accounting."""
    from lowwater.core.time import MIN_TIMESTAMP

    fields = [("key", "BIGINT"), ("ts", "BIGINT"), ("value", "BIGINT")]
    log = tmp_path / "log"
    w = PartitionedLogWriter(log, "jsonl")
    w.append(0, [{"key": 1, "ts": 1000, "value": 1}, {"key": -7, "ts": 1200, "value": 2},
                 {"key": None, "ts": 6000, "value": 3},          # no key, the partition's largest timestamp
                 {"key": 2, "ts": None, "value": 4}, {"key": 2, "ts": MIN_TIMESTAMP, "value": 5},
                 {"key": 1, "ts": 1300, "value": 6}])
    with open(next((log / "partition=0").glob("segment-*.jsonl")), "a") as f:
        f.write('{"partition": 0, "offset": 6, "value": {"key": 3, "ts": 4000\n')  # does not parse
    w.append(1, [{"key": 1, "ts": 7000, "value": 7}, {"key": 2, "ts": 7100, "value": 8}])
    w.append(0, [{"key": 1, "ts": 5200, "value": 9}, {"key": -7, "ts": 900, "value": 10}])  # late, then very late
    w.append(1, [{"key": 2, "ts": 9000, "value": 11}])

    def run(path: str) -> tuple[Any, list[list[str]]]:
        env = StreamExecutionEnvironment()
        sinks = _sessions_by_field(env, PartitionedLogSource(log, fields, segments_per_batch=1))
        dead = CollectSink()
        job = SparkRuntime(str(tmp_path / f"ck-{path}"), spark=spark, path=path, dead_letter_sink=dead,  # type: ignore[arg-type]
                           clock=lambda b: 1000 * b, end_of_input=True).execute(env)
        assert job.path == path, job.reason
        return job, [_rows(s) for s in [*sinks, dead]]

    keyed, got = run("keyed")
    general, want = run("general")
    assert [b["metrics"]["stage_a"] for b in keyed.batches()] == ["sql", "sql", None], "two batches, and the end"
    assert [line.get("stage_a") for line in keyed.metrics()] == ["sql", "sql", None], "and the metrics log says so"
    assert got == want
    results, late, dead = got
    assert results and late, "sessions fired, and an element came too late for any"
    assert sorted(json.loads(d)["offset"] for d in dead) == [2, 3, 4, 6]
    marks = [[b["metrics"]["combined_watermark"], b["metrics"]["partition_watermarks"]] for b in keyed.batches()]
    assert marks == [[b["metrics"]["combined_watermark"], b["metrics"]["partition_watermarks"]]
                     for b in general.batches()]
    assert marks[0][1]["0"] == 6000 - 500 - 1, "the keyless row's timestamp moved its partition's watermark"
    assert str(keyed.accounting()) == str(general.accounting())


def test_a_connected_process_functions_account_covers_every_record_on_both_paths(spark: Any, tmp_path: Path) -> None:
    """Two sources ``connect``ed into a ``KeyedCoProcessFunction``: a record with no timestamp is
    dead-lettered at its source, one with no key at the function, and the account covers every
    record read on the keyed and the general path alike. The general path's covered only the
    function's inputs, leaving the first out of every term (``3 rows in = 2 + 0 + 1``)."""
    from lowwater.core.process import KeyedCoProcessFunction

    class Users(KeyedCoProcessFunction):
        def process_element1(self, value: Any, ctx: Any) -> Any:
            yield value["user"]

        def process_element2(self, value: Any, ctx: Any) -> Any:
            yield value["user"]

    fields = [("user", "STRING"), ("ms", "BIGINT")]
    BatchFilesSource.write(tmp_path / "a", [[{"user": "a", "ms": 1000}, {"user": "a", "ms": None},
                                             {"user": None, "ms": 1200}]])
    BatchFilesSource.write(tmp_path / "b", [[{"user": "b", "ms": 5}]])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ms")
    accounts = {}
    for path in ("keyed", "general"):
        env = StreamExecutionEnvironment()
        a = env.from_source(BatchFilesSource(tmp_path / "a", fields, [0]), strategy, name="A")
        b = env.from_source(BatchFilesSource(tmp_path / "b", fields, [0]), strategy, name="B")
        out = a.connect(b).key_by("user", "user").process(Users()).collect()
        dead = CollectSink()
        job = SparkRuntime(str(tmp_path / f"ck-{path}"), spark=spark, path=path, dead_letter_sink=dead,  # type: ignore[arg-type]
                           end_of_input=True).execute(env)
        assert job.path == path, job.reason
        assert sorted(out.results) == ["a", "b"] and len(dead.results) == 2, (out.results, dead.results)
        accounts[path] = str(job.accounting())
    assert accounts == {path: "4 rows in = 2 processed + 0 late + 2 dead-lettered" for path in accounts}


def _badly_keyed(record: dict[str, Any]) -> str:
    if int(record["value"]) == 13:
        raise ValueError("no key for 13")
    return str(record["key"])


def test_a_raising_key_selector_is_named_with_its_record_and_a_bad_one_is_dead_lettered_alone(
        spark: Any, tmp_path: Path) -> None:
    from lowwater.core.errors import BadRecordError, PipelineError
    from lowwater.io import PartitionedLogWriter

    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, [{"key": "a", "ts": 1000, "value": 1},
                                                  {"key": "a", "ts": 1500, "value": 13}])

    def build(key_selector: Any, fan_out: Any = None) -> tuple[StreamExecutionEnvironment, CollectSink, CollectSink]:
        env = StreamExecutionEnvironment()
        stream = env.from_source(PartitionedLogSource(log, FIELDS), _strategy())
        if fan_out is not None:
            stream = stream.flat_map(fan_out)
        out = stream.key_by(key_selector).window(EventTimeSessionWindows.with_gap(1000)).sum("value").collect()
        return env, out, CollectSink()

    env, _, dead = build(_badly_keyed)
    with pytest.raises(PipelineError) as info:
        SparkRuntime(str(tmp_path / "ck"), spark=spark, dead_letter_sink=dead, end_of_input=True).execute(env)
    assert "key_by _badly_keyed" in str(info.value) and "partition 0, offset 1" in str(info.value)

    def bad_copy(record: dict[str, Any]) -> str:  # a BadRecordError: that one element is dead-lettered
        if record.get("copy"):
            raise BadRecordError("copies have no key")
        return str(record["key"])

    env, out, dead = build(bad_copy, fan_out=lambda r: [r, {**r, "copy": True}])
    job = SparkRuntime(str(tmp_path / "ck2"), spark=spark, dead_letter_sink=dead, end_of_input=True).execute(env)
    assert job.path == "keyed"
    assert [(r.key, r.value) for r in out.results] == [("a", 14)]
    assert sorted((d["offset"], d["reason"]) for d in dead.results) == [(0, "copies have no key"),
                                                                        (1, "copies have no key")]
    assert str(job.accounting()) == "4 rows in = 2 windowed + 0 late + 2 dead-lettered (at the window operator)"

    def no_key_for_copies(record: dict[str, Any]) -> str | None:  # None: no key, a dead letter (was key None)
        return None if record.get("copy") else str(record["key"])

    env, out, dead = build(no_key_for_copies, fan_out=lambda r: [r, {**r, "copy": True}])
    job = SparkRuntime(str(tmp_path / "ck3"), spark=spark, dead_letter_sink=dead, end_of_input=True).execute(env)
    assert [(r.key, r.value) for r in out.results] == [("a", 14)]
    assert [d["reason"] for d in dead.results] == [
        "missing key (test_a_raising_key_selector_is_named_with_its_record_and_a_bad_one_is_dead_lettered_alone."
        "<locals>.no_key_for_copies)"] * 2


def test_sessions_in_columns_reach_dataframe_sinks_as_the_reference_results(spark: Any, log: Path,
                                                                          tmp_path: Path) -> None:
    """Sessions keyed by a field with a sum of a field run in columns (``keyed_sessions``); their
    results reach a DataFrame sink (JSON written from the fields) and a row-list sink (the fields
    pickled) as the reference runtime's, and the late output as its."""
    from lowwater.spark.sinks import DirectorySink

    env = StreamExecutionEnvironment()
    expected = _sessions_by_field(env, PartitionedLogSource(log, FIELDS, segments_per_batch=1))
    ReferenceRuntime().execute(env)

    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    out = (env.from_source(PartitionedLogSource(log, FIELDS, segments_per_batch=1), _strategy()).key_by("key")
           .window(EventTimeSessionWindows.with_gap(400)).allowed_lateness(1000).side_output_late_data(late)
           .sum("value"))
    out.add_sink(DirectorySink(tmp_path / "results", "parquet"))
    rows = out.collect()
    late_rows = out.get_side_output(late).collect()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, clock=lambda b: 1000 * b, end_of_input=True).execute(env)
    assert job.path == "keyed", job.reason
    assert sum(b["metrics"].get("keys_in_columns", 0) for b in job.batches()) > 0
    want = sorted((r.key, r.window_start, r.window_end, r.value, r.fire_index) for r in expected[0].results)
    assert sorted((r.key, r.window_start, r.window_end, r.value, r.fire_index) for r in rows.results) == want
    results = spark.read.parquet(str(tmp_path / "results" / "batch=*"))
    assert sorted(tuple(r) for r in results.select("key", "window_start", "window_end", "value", "fire_index")
                  .collect()) == want
    assert results.where("unix_millis(window.start) != window_start").count() == 0
    assert _rows(late_rows) == _rows(expected[1]) and expected[1].results


def test_a_checkpoint_of_the_general_path_resumes_there_and_refuses_the_keyed_path(
        spark: Any, tmp_path: Path) -> None:
    """Sessions took the general path before the keyed path existed: such a checkpoint is not
    read by another path. On the default path it resumes where it was written (it was refused
    until session 53, so an upgrade stopped the job); asked for the keyed path, the error says how
    to resume it."""
    from lowwater.core.errors import ConfigurationError
    from lowwater.io import PartitionedLogWriter

    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, [{"key": "a", "ts": 1000, "value": 1}])

    def run(**kwargs: Any) -> Any:
        env = StreamExecutionEnvironment()
        (env.from_source(PartitionedLogSource(log, FIELDS), _strategy()).key_by("key")
         .window(EventTimeSessionWindows.with_gap(1000)).sum("value").collect())
        return SparkRuntime(str(tmp_path / "ck"), spark=spark, **kwargs).execute(env)

    assert run(path="general").path == "general"
    with pytest.raises(ConfigurationError, match=r"was 'general', now 'keyed'.*pass path='general' to SparkRuntime"):
        run(path="keyed")
    PartitionedLogWriter(log, "jsonl").append(0, [{"key": "a", "ts": 1500, "value": 2}])
    job = run()
    assert job.path == "general" and "its checkpoint was written on the general path" in job.reason, job.reason
    assert job.accounting().balanced


def test_dataframe_sinks_get_frames_the_executors_built_with_the_window_struct(
    spark: Any, log: Path, tmp_path: Path
) -> None:
    """A DataFrame sink on the keyed path gets a DataFrame Spark made from the executors' rows (no
    local relation: no row came through the driver), typed, with Spark's window struct; a row-list
    sink on the same output still gets the reference runtime's objects."""
    from lowwater.spark.sinks import DirectorySink, ForeachDataFrameSink, read_directory

    frames: list[Any] = []
    plans: list[str] = []

    def keep(df: Any, batch_id: int) -> None:
        plans.append(df._jdf.queryExecution().analyzed().toString())
        frames.append(df.collect())

    env = StreamExecutionEnvironment()
    expected = _sessions(env, PartitionedLogSource(log, FIELDS, segments_per_batch=1))
    ReferenceRuntime().execute(env)

    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    out = (env.from_source(PartitionedLogSource(log, FIELDS, segments_per_batch=1), _strategy())
           .map(lambda r: {**r, "value": int(r["value"]) * 2})
           .key_by(lambda r: r["key"].upper())
           .window(EventTimeSessionWindows.with_gap(400))
           .allowed_lateness(1000)
           .side_output_late_data(late)
           .sum("value"))
    out.add_sink(DirectorySink(tmp_path / "results", "parquet"))
    out.add_sink(ForeachDataFrameSink(keep))
    rows = out.collect()
    out.get_side_output(late).add_sink(DirectorySink(tmp_path / "late", "jsonl"))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, clock=lambda b: 1000 * b, end_of_input=True).execute(env)
    assert job.path == "keyed", job.reason

    assert _rows(rows) == _rows(expected[0])
    assert plans and not any("LocalRelation" in p for p in plans), plans[:1]
    results = spark.read.parquet(str(tmp_path / "results" / "batch=*"))
    assert results.dtypes == [("key", "string"), ("window_start", "bigint"), ("window_end", "bigint"),
                              ("value", "bigint"), ("fire_index", "int"),
                              ("window", "struct<start:timestamp,end:timestamp>")]  # the native path's order
    got = sorted((r["key"], r["window_start"], r["window_end"], r["value"], r["fire_index"]) for r in results.collect())
    assert got == sorted((r.key, r.window_start, r.window_end, r.value, r.fire_index) for r in expected[0].results)
    assert results.where("unix_millis(window.start) != window_start OR unix_millis(window.end) != window_end"
                         ).count() == 0
    assert sum(len(f) for f in frames) == len(got)
    # the late rows: the element, where it came from, and the session that rejected it (its own, [ts, ts + gap):
    # a session it would have merged with is still open, so it is not late)
    late_rows = read_directory(tmp_path / "late")
    assert all(r.pop("rejected_windows") == [{"start": r["ts"], "end": r["ts"] + 400}] for r in late_rows), late_rows
    positions = {(r.pop("partition"), r.pop("offset")) for r in late_rows}
    assert len(positions) == len(late_rows) and all(p in (0, 1, 2) and o >= 0 for p, o in positions), positions
    assert sorted(json.dumps(r, sort_keys=True) for r in late_rows) == _rows(expected[1])


def test_the_late_output_has_the_native_path_s_columns(spark: Any, tmp_path: Path) -> None:
    """A window's late output to a DataFrame sink has, on the keyed path as on the native path, the
    element's fields, where it came from (``source_partition`` here, the element having a field
    ``partition``), and the windows that rejected it, with the same types; a row-list sink gets the
    element alone, as Flink's side output gives it, on both paths."""
    from lowwater.spark.sinks import DirectorySink

    batches = [[{"key": "a", "ts": 1000, "value": 1, "partition": 0}, {"key": "b", "ts": 7000, "value": 2,
                                                                        "partition": 1}],
               [{"key": "a", "ts": 31_000, "value": 4, "partition": 0}, {"key": "b", "ts": 31_000, "value": 4,
                                                                         "partition": 1}],
               [{"key": "b", "ts": 6000, "value": 8, "partition": 1}, {"key": "a", "ts": 12_000, "value": 16,
                                                                       "partition": 0},
                {"key": "a", "ts": 27_000, "value": 32, "partition": 0}],  # late for its windows but 27 s, on time
               [{"key": "c", "ts": 44_000, "value": 64, "partition": 1}],
               [{"key": "c", "ts": 3000, "value": 128, "partition": 1}]]
    BatchFilesSource.write(tmp_path / "in", batches)
    frames = {}
    for path in ("native", "keyed"):
        env = StreamExecutionEnvironment()
        late = OutputTag("late")
        out = (env.from_source(BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), [0, 1]),
                               WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
               .key_by("key").window(SlidingEventTimeWindows.of(10_000, 5000)).side_output_late_data(late)
               .max("value"))
        out.collect()
        out.get_side_output(late).add_sink(DirectorySink(tmp_path / path, "parquet"))
        rows = out.get_side_output(late).collect()
        job = SparkRuntime(str(tmp_path / f"ck-{path}"), spark=spark, path=path,  # type: ignore[arg-type]
                           end_of_input=True).execute(env)
        assert job.path == path, job.reason
        assert sorted(r["ts"] for r in rows.results) == [3000, 6000, 12_000], path
        assert all(set(r) == {"key", "ts", "value", "partition"} for r in rows.results), rows.results
        frames[path] = spark.read.parquet(str(tmp_path / path / "batch=*"))

    position = ["source_partition", "offset", "rejected_windows"]
    native, keyed = frames["native"], frames["keyed"]
    assert native.columns == keyed.columns == ["key", "ts", "value", "partition", *position]  # the source's order
    assert [t for c, t in native.dtypes if c in position] == [t for c, t in keyed.dtypes if c in position] \
        == ["int", "bigint", "array<struct<start:bigint,end:bigint>>"]
    columns = ["key", "ts", "value", "partition", *position]
    got = {path: sorted(tuple(r) for r in df.select(*columns).collect()) for path, df in frames.items()}
    assert got["keyed"] == got["native"], got
    assert [(r[1], [tuple(w) for w in r[6]]) for r in sorted(got["keyed"], key=lambda r: r[1])] == [
        (3000, [(0, 10_000), (-5000, 5000)]), (6000, [(5000, 15_000), (0, 10_000)]),
        (12_000, [(10_000, 20_000), (5000, 15_000)])]


@pytest.mark.parametrize(("aggregate", "field"), [("max", "d"), ("min", "f")])
def test_a_built_in_aggregates_results_have_the_native_path_s_types_on_the_keyed_and_general_paths(
    spark: Any, tmp_path: Path, aggregate: str, field: str,
) -> None:
    """The same window's results have the same columns and types on every path: an INT key an INT,
    the maximum of a ``DECIMAL(10,2)`` a ``DECIMAL(10,2)``, the minimum of a FLOAT a FLOAT.
    They were the Python values' types on the keyed path (BIGINT, ``DECIMAL(38,2)``, DOUBLE) until
    session 39, and on the general path (a processing-time or count window's) until session 44,
    so a table the native path made refused them once the window moved off the native path."""
    from lowwater.spark.sinks import DirectorySink

    batches = [[{"k": 1, "ts": 100, "d": Decimal("10.25"), "f": 0.5}, {"k": 2, "ts": 200, "d": Decimal("-3.5"),
                                                                         "f": 1.25}],
               [{"k": 1, "ts": 1500, "d": Decimal("99999999.99"), "f": -2.75}, {"k": 1, "ts": 300, "d": None,
                                                                                "f": 8.0}]]
    BatchFilesSource.write(tmp_path / "in", batches)
    fields = [("k", "INT"), ("ts", "BIGINT"), ("d", "DECIMAL(10,2)"), ("f", "FLOAT")]
    frames = {}
    for path in ("native", "keyed", "general"):
        env = StreamExecutionEnvironment()
        window = (env.from_source(BatchFilesSource(tmp_path / "in", fields, [0]),
                                  WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
                  .key_by("k").window(TumblingEventTimeWindows.of(1000)))
        out = getattr(window, aggregate)(field)
        out.add_sink(DirectorySink(tmp_path / path, "parquet"))
        job = SparkRuntime(str(tmp_path / f"ck-{path}"), spark=spark, path=path,  # type: ignore[arg-type]
                           end_of_input=True).execute(env)
        assert job.path == path, job.reason
        frames[path] = spark.read.parquet(str(tmp_path / path / "batch=*"))
    native = frames["native"]
    for path in ("keyed", "general"):
        assert frames[path].dtypes == native.dtypes, (path, frames[path].dtypes, native.dtypes)
    assert dict(native.dtypes)["key"] == "int"
    assert dict(native.dtypes)["value"] == {"max": "decimal(10,2)", "min": "float"}[aggregate]
    columns = ["key", "window_start", "window_end", "value", "fire_index"]
    got = {path: sorted(tuple(r) for r in df.select(*columns).collect()) for path, df in frames.items()}
    assert got["keyed"] == got["native"] == got["general"], got
    assert len(got["keyed"]) == 3, got


@pytest.mark.parametrize("path", ["native", "keyed", "general"])
def test_a_late_elements_fields_are_columns_of_the_sources_types_when_null_in_every_late_row(
        spark: Any, tmp_path: Path, path: str) -> None:
    """The late output of a window fed straight from its source has the element's fields as the
    source declares them, on every path: an INT an INT, a ``DECIMAL(10,2)`` a ``DECIMAL(10,2)``, and a
    field null in every late row of a batch still a column. On the keyed and general paths the
    columns were typed from the late rows' JSON: ``n`` a BIGINT, ``amount`` a ``DECIMAL(38,2)``, and
    ``note``, null in the one late row, no column at all, so a Parquet reader without ``mergeSchema``
    read files without it."""
    from lowwater.spark.sinks import DirectorySink

    fields = [("key", "STRING"), ("ts", "BIGINT"), ("n", "INT"), ("amount", "DECIMAL(10,2)"), ("note", "STRING")]
    log = PartitionedLogWriter(tmp_path / "log", "jsonl")
    log.append(0, [{"key": "a", "ts": 5000, "n": 1, "amount": 1.5, "note": "first"}])  # W = 4999 after it
    log.append(0, [{"key": "a", "ts": 100, "n": 2, "amount": 2.25, "note": None}])  # late: [0, 1 s) closed
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    out = (env.from_source(PartitionedLogSource(tmp_path / "log", fields, segments_per_batch=1),
                           WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
           .key_by("key").window(TumblingEventTimeWindows.of(1000)).side_output_late_data(late).sum("n"))
    out.get_side_output(late).add_sink(DirectorySink(tmp_path / "late", "parquet"))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path,  # type: ignore[arg-type]
                       end_of_input=True).execute(env)
    assert job.path == path, job.reason
    got = spark.read.parquet(str(tmp_path / "late" / "batch=*"))
    assert got.dtypes == [("key", "string"), ("ts", "bigint"), ("n", "int"), ("amount", "decimal(10,2)"),
                          ("note", "string"), ("partition", "int"), ("offset", "bigint"),
                          ("rejected_windows", "array<struct<start:bigint,end:bigint>>")], got.dtypes
    assert [r.asDict(recursive=True) for r in got.collect()] == [
        {"key": "a", "ts": 100, "n": 2, "amount": Decimal("2.25"), "note": None, "partition": 0, "offset": 1,
         "rejected_windows": [{"start": 0, "end": 1000}]}]


@pytest.mark.parametrize("path", ["native", "keyed"])
def test_an_element_field_named_as_a_late_column_keeps_its_value(spark: Any, tmp_path: Path, path: str) -> None:
    """An element with fields ``offset`` and ``rejected_windows`` keeps them in the late output; the
    late output's own columns of those names are ``source_offset`` and ``source_rejected_windows``
    (on the keyed path its JSON document used to overwrite the element's field)."""
    from lowwater.spark.sinks import DirectorySink

    batches = [[{"key": "a", "ts": 21_000, "value": 1, "offset": "o-1", "rejected_windows": "mine"}],
               [{"key": "a", "ts": 2000, "value": 2, "offset": "o-2", "rejected_windows": "kept"}]]
    BatchFilesSource.write(tmp_path / "in", batches)
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    out = (env.from_source(BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), [0]),
                           WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
           .key_by("key").window(TumblingEventTimeWindows.of(10_000)).side_output_late_data(late).sum("value"))
    out.collect()
    out.get_side_output(late).add_sink(DirectorySink(tmp_path / "late", "parquet"))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path,  # type: ignore[arg-type]
                       end_of_input=True).execute(env)
    assert job.path == path, job.reason
    rows = [r.asDict(recursive=True) for r in spark.read.parquet(str(tmp_path / "late" / "batch=*")).collect()]
    assert rows == [{"key": "a", "ts": 2000, "value": 2, "offset": "o-2", "rejected_windows": "kept", "partition": 0,
                     "source_offset": rows[0]["source_offset"],
                     "source_rejected_windows": [{"start": 0, "end": 10_000}]}], rows
    assert isinstance(rows[0]["source_offset"], int)


def _best(key: Any, context: Any, elements: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    """A process window function whose result has a field that is null in some windows (``best_even``)."""
    best = max(int(e["value"]) for e in elements)
    yield {"key": key, "start": context.window.start, "best_even": best if best % 2 == 0 else None,
           "ratio": best / 2}


def _whole_or_not(key: Any, context: Any, elements: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    """``ratio`` an int where it is whole: a BIGINT in one batch, a DOUBLE in another."""
    best = max(int(e["value"]) for e in elements)
    yield {"key": key, "ratio": best if best < 2 else best / 2}


@pytest.mark.parametrize("path", ["keyed", "general"])
def test_a_dataframe_output_keeps_its_columns_types_across_batches_and_a_restart(
        spark: Any, tmp_path: Path, path: str) -> None:
    """Each batch of a keyed output to a DataFrame sink has the columns the batches before it had:
    a field null in every row of a batch is no column until a value gives it a type (Spark's
    inference made it a STRING, and the table's files could not be read together); the schema is
    kept in the checkpoint (after the restart every ``best_even`` is null, and the column stays);
    a function that changes a field's type fails the batch, naming the field, before anything of
    the batch is written. Once the columns are known, a batch without output gets an empty
    DataFrame of them, as Spark's foreachBatch gets one: a directory per batch, a call per batch
    (no DataFrame before the first rows: nothing says the columns yet).

    The general path's DataFrame sinks get the same frames (the schema kept in its pickled state).
    Until session 35 they got ``createDataFrame(rows)``: the batch whose every ``best_even`` was null
    failed with ``CANNOT_DETERMINE_TYPE``, and the query stopped."""
    import os
    import shutil

    from lowwater.core.errors import PipelineError
    from lowwater.spark.sinks import DirectorySink, ForeachDataFrameSink

    batches = [[{"key": "a", "ts": 1000, "value": 1}], [{"key": "a", "ts": 12_000, "value": 2}],
               [{"key": "a", "ts": 25_000, "value": 3}], [{"key": "a", "ts": 26_000, "value": 3}],
               [{"key": "a", "ts": 40_000, "value": 5}], [{"key": "a", "ts": 55_000, "value": 1}]]
    BatchFilesSource.write(tmp_path / "all", batches)
    files = sorted((tmp_path / "all").iterdir())
    fields = BatchFilesSource.infer_fields(batches)

    def run(fn: Any, out: Path, ck: Path, upto: int, end: bool) -> None:
        (tmp_path / "in").mkdir(exist_ok=True)
        for i, f in enumerate(files[:upto]):
            if not (tmp_path / "in" / f.name).exists():
                shutil.copy(f, tmp_path / "in" / f.name)
                os.utime(tmp_path / "in" / f.name, (1_700_000_000 + i, 1_700_000_000 + i))  # Spark reads in this order
        env = StreamExecutionEnvironment()
        results = (env.from_source(BatchFilesSource(tmp_path / "in", fields, [0]),
                                   WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
                   .key_by("key").window(TumblingEventTimeWindows.of(10_000)).process(fn))
        results.add_sink(DirectorySink(out, "parquet"))
        results.add_sink(ForeachDataFrameSink(lambda df, b: calls.append((b, len(df.columns), df.count()))))
        job = SparkRuntime(str(ck), spark=spark, end_of_input=end, path=path).execute(env)
        assert job.path == path, job.reason

    def columns(d: Path) -> dict[str, str]:
        return dict(spark.read.parquet(str(d)).dtypes)

    calls: list[tuple[int, int, int]] = []
    run(_best, tmp_path / "out", tmp_path / "ck", 4, False)  # [0, 10 s) fires alone (best 1), then [10, 20 s)
    first = sorted((tmp_path / "out").glob("batch=*"))
    assert [d.name for d in first] == ["batch=1", "batch=2", "batch=3"]
    assert [columns(d) for d in first] == [{"key": "string", "start": "bigint", "ratio": "double"},
                                           {"key": "string", "start": "bigint", "ratio": "double",
                                            "best_even": "bigint"},
                                           {"key": "string", "start": "bigint", "ratio": "double",
                                            "best_even": "bigint"}]  # no window fired: no rows, the columns
    assert calls == [(1, 3, 1), (2, 4, 1), (3, 4, 0)]
    run(_best, tmp_path / "out", tmp_path / "ck", 6, True)  # after a restart: best 3, 5, 1, all odd
    later = sorted(set((tmp_path / "out").glob("batch=*")) - set(first))
    assert later and all(columns(d) == columns(first[1]) for d in later), [columns(d) for d in later]
    got = sorted(tuple(r) for r in spark.read.option("mergeSchema", "true").parquet(str(tmp_path / "out" / "batch=*"))
                 .select("start", "best_even", "ratio").collect())
    assert got == [(0, None, 0.5), (10_000, 2, 1.0), (20_000, None, 1.5), (40_000, None, 2.5), (50_000, None, 0.5)]

    shutil.rmtree(tmp_path / "in")
    with pytest.raises(PipelineError, match=r"the field ratio holds DOUBLE values, where earlier "
                                            r"batches made it a BIGINT column") as failed:
        run(_whole_or_not, tmp_path / "out2", tmp_path / "ck2", 6, True)  # 1.0 after 1
    assert str(failed.value).endswith("processing resumes from the last completed batch."), "cut short"
    assert [columns(d) for d in sorted((tmp_path / "out2").glob("batch=*"))] == [{"key": "string", "ratio": "bigint"}]


def test_an_outputs_columns_come_in_the_order_its_values_name_them(spark: Any, tmp_path: Path) -> None:
    """A process function's dicts give their DataFrame's columns in their own order, as a row-list
    sink and the reference runtime's Parquet files have them, not in order of name (Spark's
    inference); a field first given by a later value comes after, where that value names it."""
    from lowwater.spark.sinks import ForeachDataFrameSink

    batches = [[{"key": "a", "ts": 1000, "value": 1}, {"key": "b", "ts": 2000, "value": 2}],
               [{"key": "a", "ts": 12_000, "value": 3}]]
    BatchFilesSource.write(tmp_path / "in", batches)
    env = StreamExecutionEnvironment()
    out = (env.from_source(BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), [0]),
                           WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
           .key_by("key").window(TumblingEventTimeWindows.of(10_000)).process(_ordered))
    columns: list[list[str]] = []
    out.add_sink(ForeachDataFrameSink(lambda df, _: columns.append(df.columns)))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    assert job.path == "keyed", job.reason
    assert columns == [["user", "window", "total", "average", "zeta"], ["user", "window", "total", "average", "zeta"]]


def _ordered(key: Any, context: Any, elements: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    values = [int(e["value"]) for e in elements]
    yield {"user": key, "window": context.window.start, "total": sum(values), "average": sum(values) / len(values)}
    if key == "b":
        yield {"user": key, "zeta": True, "total": 0}


class _LaterByProcessingTime(KeyedProcessFunction):
    """A processing-time timer 500 ms after each element."""

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 500)
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        yield (ctx.get_current_key(), timestamp, ctx.timer_service().current_processing_time())


@pytest.mark.parametrize("path", ["keyed", "general"])
def test_a_processing_time_timer_pending_at_the_end_of_input_does_not_fire(
        spark: Any, tmp_path: Path, path: str) -> None:
    """The end of input fires event time (MAX) and leaves processing time where the last batch left
    it, as the reference runtime does and Flink, whose end of input quiesces the processing-time
    service. The keyed path read the end step's later clock, and fired ``b``'s timer there alone."""
    log = tmp_path / "log"
    for key, ts in (("a", 1), ("c", 2), ("b", 3)):  # one batch each, at clocks 1000, 2000 and 3000
        PartitionedLogWriter(log, "jsonl").append(0, [{"key": key, "ts": ts, "value": 1}])

    def build() -> tuple[StreamExecutionEnvironment, Any]:
        env = StreamExecutionEnvironment()
        out = (env.from_source(PartitionedLogSource(log, FIELDS, segments_per_batch=1), _strategy())
               .key_by("key").process(_LaterByProcessingTime()).collect())
        return env, out

    env, reference = build()
    ReferenceRuntime(clock=_BatchClock()).execute(env)
    assert reference.results == [("a", 1500, 2000), ("c", 2500, 3000)]  # b's 3500 is pending at the end
    env, out = build()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, clock=lambda b: 1000 * (b + 1),
                       end_of_input=True).execute(env)  # type: ignore[arg-type]
    assert job.path == path
    assert out.results == reference.results


def _count_window(env: StreamExecutionEnvironment, source: Any) -> list[CollectSink]:
    return [env.from_source(source, _strategy()).key_by("key").count_window(3).sum("value").collect()]


def _processing_time_tumbling(env: StreamExecutionEnvironment, source: Any) -> list[CollectSink]:
    late = OutputTag("late")  # never late: lateness is an event-time window's
    out = (env.from_source(source, _strategy()).key_by("key").window(TumblingProcessingTimeWindows.of(1500))
           .side_output_late_data(late).sum("value"))
    return [out.collect(), out.get_side_output(late).collect()]


def _processing_time_sliding(env: StreamExecutionEnvironment, source: Any) -> list[CollectSink]:
    return [env.from_source(source, _strategy()).key_by("key").window(SlidingProcessingTimeWindows.of(2000, 1000))
            .process(_count_in_window).collect()]


def _ingestion_time(env: StreamExecutionEnvironment, source: Any) -> list[CollectSink]:
    from lowwater.core.time_characteristic import TimeCharacteristic

    env.set_stream_time_characteristic(TimeCharacteristic.INGESTION_TIME)  # timestamps: the batch's clock
    late = OutputTag("late")
    out = env.from_source(source).key_by("key").time_window(1500).side_output_late_data(late).sum("value")
    return [out.collect(), out.get_side_output(late).collect()]


UNTIMED = {"count_window": _count_window, "processing_time_tumbling": _processing_time_tumbling,
           "processing_time_sliding": _processing_time_sliding, "ingestion_time": _ingestion_time}
"""Windows that are not event time's, and an ingestion-time pipeline: they stepped on the driver (the
general path) until session 53."""


@pytest.mark.parametrize("name", sorted(UNTIMED))
def test_count_and_processing_time_windows_run_per_key_and_equal_the_reference_runtime(
        spark: Any, log: Path, name: str, tmp_path: Path) -> None:
    """Each batch's processing time is the clock's (1000 ms times the batch's number from 1) on both
    runtimes, so a processing-time window holds the same elements on each."""
    env = StreamExecutionEnvironment()
    expected = UNTIMED[name](env, PartitionedLogSource(log, FIELDS, segments_per_batch=1))
    ReferenceRuntime(clock=_BatchClock()).execute(env)
    env = StreamExecutionEnvironment()
    actual = UNTIMED[name](env, PartitionedLogSource(log, FIELDS, segments_per_batch=1))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, clock=lambda b: 1000 * (b + 1),
                       end_of_input=True).execute(env)
    assert job.path == "keyed", job.reason
    assert expected[0].results, f"{name}: the reference run should produce output"
    for want, got in zip(expected, actual, strict=True):
        assert _rows(got) == _rows(want)


def test_a_count_window_checkpoint_written_on_the_general_path_resumes_there(spark: Any, tmp_path: Path) -> None:
    """A count window's checkpoint from before it took the keyed path holds the general path's
    state: a run on the default path resumes it there (it was refused as another pipeline's), and
    the two runs together equal one on the reference runtime."""
    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    for i in range(4):  # two runs, each over two more rounds of appends: 8 elements of a, 4 of b
        writer.append(0, [{"key": "a", "ts": 10 * i, "value": i}, {"key": "b", "ts": 10 * i + 1, "value": 100 * i}])
        writer.append(0, [{"key": "a", "ts": 10 * i + 2, "value": i + 10}])
        if i == 1:
            env = StreamExecutionEnvironment()
            first = _count_window(env, PartitionedLogSource(log, FIELDS, segments_per_batch=1))[0]
            job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path="general").execute(env)
            assert job.path == "general"
    env = StreamExecutionEnvironment()
    second = _count_window(env, PartitionedLogSource(log, FIELDS, segments_per_batch=1))[0]
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    assert job.path == "general" and "its checkpoint was written on the general path" in job.reason, job.reason
    env = StreamExecutionEnvironment()
    reference = _count_window(env, PartitionedLogSource(log, FIELDS, segments_per_batch=1))[0]
    ReferenceRuntime().execute(env)
    # a: 0, 10, 1 | 11, 2, 12 | 3, 13 (open); b: 0, 100, 200 | 300 (open)
    assert [(r.key, r.value) for r in reference.results] == [("a", 11), ("b", 300), ("a", 25)]
    assert [(r.key, r.value) for r in first.results] == [("a", 11)]
    assert [(r.key, r.value) for r in second.results] == [("b", 300), ("a", 25)]


class _BatchClock:
    """1000 ms times the batch's number (from 1), read once per batch by the reference runtime."""

    def __init__(self) -> None:
        self.batch = 0

    def now_ms(self) -> int:
        self.batch += 1
        return 1000 * self.batch


@pytest.mark.parametrize("path", ["keyed", "general"])
def test_a_bad_record_error_from_a_window_function_fails_the_query_naming_the_function(
        spark: Any, tmp_path: Path, path: str) -> None:
    """No one record to dead-letter when a window fires: the query fails naming the function, as on
    the reference runtime (it failed with the bare ``BadRecordError``)."""
    from lowwater.core.errors import BadRecordError, LowwaterError

    def pwf(key: Any, ctx: Any, elements: Any) -> Any:
        raise BadRecordError("window with 13")

    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    writer.append(0, [{"key": "a", "ts": 100, "value": 13}])
    writer.append(0, [{"key": "a", "ts": 5000, "value": 1}])
    env = StreamExecutionEnvironment()
    (env.from_source(PartitionedLogSource(log, FIELDS, segments_per_batch=1), _strategy())
     .key_by("key").window(TumblingEventTimeWindows.of(1000)).process(pwf).collect())
    with pytest.raises(LowwaterError) as failed:
        SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, end_of_input=True).execute(env)  # type: ignore[arg-type]
    assert "user function window function of" in str(failed.value), str(failed.value)[:500]
    assert "raised BadRecordError: window with 13. Fix the function and restart" in str(failed.value)


_Stats = collections.namedtuple("_Stats", "max_ts count")


class _CountedBounded(WatermarkGenerator[Any]):
    """A user generator whose state is a namedtuple: ``max_ts - 1`` once it has seen two events."""

    def __init__(self) -> None:
        self.s = _Stats(None, 0)

    def on_event(self, event: Any, ts: int, out: Any) -> None:
        self.s = _Stats(ts if self.s.max_ts is None else max(self.s.max_ts, ts), self.s.count + 1)

    def on_periodic_emit(self, out: Any) -> None:
        if self.s.count >= 2:
            out.emit_watermark(Watermark(self.s.max_ts - 1))


_COUNTED_EVENTS = ((1000, 1), (12_000, 1), (3000, 10), (25_000, 1), (14_000, 100))
"""(ts, value) in arrival order, one segment each: 3000 and 14000 are late by _CountedBounded's watermark."""


def _counted_sums(log: Path) -> tuple[StreamExecutionEnvironment, Any]:
    """Sums per 10 s window of the log, watermarked by _CountedBounded."""
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_generator(_CountedBounded).with_timestamp_assigner("ts")
    out = (env.from_source(PartitionedLogSource(log, FIELDS, segments_per_batch=1), strategy)
           .key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value").collect())
    return env, out


def test_a_user_generators_namedtuple_state_is_kept_from_batch_to_batch(spark: Any, tmp_path: Path) -> None:
    """The keyed path carries the generators' state as JSON from batch to batch: a namedtuple was
    kept without its values, so the generator started over every batch, its watermark stayed at
    MIN and no element was late (the windows summed the late 10 and 100 in)."""
    log = tmp_path / "log"
    for ts, value in _COUNTED_EVENTS:
        PartitionedLogWriter(log, "jsonl").append(0, [{"key": "a", "ts": ts, "value": value}])
    env, reference = _counted_sums(log)
    ReferenceRuntime(clock=_BatchClock()).execute(env)
    expected = sorted((r.window_start, r.value) for r in reference.results)
    assert expected == [(0, 1), (10_000, 1), (20_000, 1)]  # 3000 and 14000 late
    env, out = _counted_sums(log)
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path="keyed", clock=lambda b: 1000 * (b + 1),
                       end_of_input=True).execute(env)
    assert sorted((r.window_start, r.value) for r in out.results) == expected
    assert [b["combined_watermark"] for b in job.watermarks()][1:4] == [11_999, 11_999, 24_999]


def test_a_user_generators_namedtuple_state_survives_an_executor_path_restart(spark: Any, tmp_path: Path) -> None:
    """The same generator across a restart: the executor path keeps its generators' state in the
    checkpoint's JSON too, and lost a namedtuple's values there until session 37 (the generator
    started over after the restart, and the late 14000 was summed in)."""
    path = "executor"
    log = tmp_path / "log"
    events = ((1000, 1), (12_000, 1), (3000, 10), (25_000, 1), (14_000, 100))

    for ts, value in events[:3]:
        PartitionedLogWriter(log, "jsonl").append(0, [{"key": "a", "ts": ts, "value": value}])
    env, first = _counted_sums(log)
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, clock=lambda b: 1000 * (b + 1)).execute(env)
    assert job.path == path, job.reason
    for ts, value in _COUNTED_EVENTS[3:]:
        PartitionedLogWriter(log, "jsonl").append(0, [{"key": "a", "ts": ts, "value": value}])
    env, second = _counted_sums(log)
    SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, clock=lambda b: 1000 * (b + 1),
                 end_of_input=True).execute(env)
    assert sorted((r.window_start, r.value) for r in first.results + second.results) == \
        [(0, 1), (10_000, 1), (20_000, 1)]  # 3000 and 14000 late, as on the reference runtime (above)


class _TimerRaises(KeyedProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> None:
        ctx.timer_service().register_event_time_timer(50_000)  # fires at the end of input only

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        raise ValueError(f"boom at {timestamp}")


def test_a_timer_that_raises_at_the_end_of_input_fails_the_job_as_in_a_batch(spark: Any, tmp_path: Path) -> None:
    """The end-of-input step runs outside the query: a user function's error there came out as
    PySpark's raw PythonException, its traceback in the message, where a batch's says which
    function failed (and, as on the reference runtime, that it was an ``on_timer``)."""
    from lowwater.core.errors import PipelineError

    PartitionedLogWriter(tmp_path / "log", "jsonl").append(0, [{"key": "a", "ts": 1000, "value": 1}])
    env = StreamExecutionEnvironment()
    (env.from_source(PartitionedLogSource(tmp_path / "log", FIELDS),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").process(_TimerRaises()).collect())
    with pytest.raises(PipelineError) as failed:
        SparkRuntime(str(tmp_path / "ck"), spark=spark, path="keyed", end_of_input=True).execute(env)
    assert str(failed.value) == (
        "the end-of-input step failed: UserFunctionError: user function process function of keyed process "
        "(on_timer) raised ValueError: boom at 50000. Fix the function and restart; processing resumes from the "
        f"last completed batch. It raised at {__file__} line {_TimerRaises.on_timer.__code__.co_firstlineno + 1}, "
        "in on_timer.")


class _Now(KeyedProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield (value["ts"], ctx.timer_service().current_processing_time())


def test_a_batch_files_sources_processing_times_are_the_clock_on_spark_too(spark: Any, tmp_path: Path) -> None:
    """The reference runtime read them and SparkRuntime (without a clock of its own) took the system
    clock: the same source gave other idleness, watermarks and outputs."""
    BatchFilesSource.write(tmp_path / "in", [[{"key": "a", "ts": 1}], [{"key": "a", "ts": 2}]])

    def build(env: StreamExecutionEnvironment) -> Any:
        src = BatchFilesSource(tmp_path / "in", [("key", "STRING"), ("ts", "BIGINT")], [0],
                               processing_times_ms=[1000, 2000])
        return (env.from_source(src, WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
                .key_by("key").process(_Now()).collect())

    env = StreamExecutionEnvironment()
    want = build(env)
    ReferenceRuntime().execute(env)
    assert want.results == [(1, 1000), (2, 2000)]
    env = StreamExecutionEnvironment()
    got = build(env)
    SparkRuntime(str(tmp_path / "ck"), spark=spark, path="keyed", end_of_input=True).execute(env)
    assert got.results == want.results
