"""Several sources on Spark: one query reads both, each (source, partition) is its own lane.

The same exactly-once guarantee as one source: a driver SIGKILLed between batches, after a
state commit and between two sinks, then restarted, writes exactly what an uninterrupted
run writes. Accounting is checked for every in-process run by tests/conftest.py.

The uninterrupted reference run is in-process, on the session's SparkSession; only the runs
that are killed, and the restart, are their own ``python several_sources_job.py`` (a driver
and a JVM each, with crash_series.JVM_OPTIONS: C1 only and serial GC, as the crash series).
Both tests read the same two logs, written once for the module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import StreamExecutionEnvironment
from lowwater.io import PartitionedLogWriter, SyntheticStream
from lowwater.runtime.reference import ReferenceRuntime
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import read_directory

pytestmark = pytest.mark.spark

JOB = Path(__file__).with_name("several_sources_job.py")

# imported as tests.spark.several_sources_job, a module the executors' Python workers can import
# too (their working directory is the repository's): the keyed path runs its functions there
from tests.spark.crash_job import write_frames  # noqa: E402
from tests.spark.crash_series import JVM_OPTIONS  # noqa: E402
from tests.spark.several_sources_job import build  # noqa: E402


def _logs(root: Path) -> tuple[Path, Path]:
    clicks, orders = root / "clicks", root / "orders"
    SyntheticStream(partitions=2, keys=8, events_per_second=400, disorder_ms=600, lagging_partition=1,
                    lag_ms=1500, late_fraction=0.03, late_by_ms=3000, seed=3).write_to(
        PartitionedLogWriter(clicks, "jsonl"), batches=4, rows_per_batch=200)
    SyntheticStream(partitions=1, keys=8, events_per_second=150, disorder_ms=200, late_fraction=0.02,
                    late_by_ms=2500, seed=4).write_to(PartitionedLogWriter(orders, "jsonl"), batches=4,
                                                      rows_per_batch=80)
    return clicks, orders


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _logs(tmp_path_factory.mktemp("several-sources") / "logs")


def _run(logs: tuple[Path, Path], ckpt: Path, out: Path, fault: str | None, path: str) -> int:
    """One fresh ``python several_sources_job.py --frames`` (driver and JVM) on write_frames' folders."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "JDK_JAVA_OPTIONS": JVM_OPTIONS}
    env.pop("LOWWATER_FAULT", None)
    if fault:
        env["LOWWATER_FAULT"] = fault
    proc = subprocess.run([sys.executable, str(JOB), str(logs[0]), str(logs[1]), str(ckpt), str(out), "union", path,
                           "--frames"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, -9), proc.stderr[-3000:]
    return proc.returncode


def _contents(out: Path) -> tuple[list[str], list[str]]:
    def rows(kind: str) -> list[str]:
        return sorted(json.dumps(r, sort_keys=True) for r in read_directory(out / kind))

    return rows("results"), rows("late")


# CI kills the keyed path (what a union into a window takes); LOWWATER_SEVERAL_CRASH_PATHS=keyed,general
# kills the general path too
@pytest.mark.parametrize("path", os.environ.get("LOWWATER_SEVERAL_CRASH_PATHS", "keyed").split(","))
def test_a_killed_and_restarted_union_of_two_sources_equals_an_uninterrupted_run(
    spark: Any, logs: tuple[Path, Path], tmp_path: Path, path: str
) -> None:
    # the logs' records as Parquet files read by Spark's file source through two DataFrameSources
    # (the other tests read the partitioned logs' own source)
    frames = (tmp_path / "clicks", tmp_path / "orders")
    assert (write_frames(logs[0], frames[0]), write_frames(logs[1], frames[1])) == (8, 4)
    env = StreamExecutionEnvironment()  # the uninterrupted run, as several_sources_job.main runs it
    build(env, str(frames[0]), str(frames[1]), str(tmp_path / "out-clean"), "union", spark=spark)
    SparkRuntime(str(tmp_path / "ck-clean"), spark=spark, path=path, clock=lambda b: 1_000 * b,  # type: ignore[arg-type]
                 end_of_input=True).execute(env, "several sources")
    clean = _contents(tmp_path / "out-clean")
    assert clean[0] and clean[1], "the job should produce results and late rows"
    # CI kills between the sinks (after the state commit); LOWWATER_CRASH_POINTS=all after the commit too
    faults = ["1:after_state", "2:after_first_sink"] if os.environ.get("LOWWATER_CRASH_POINTS") == "all" \
        else ["2:after_first_sink"]
    for fault in faults:
        assert _run(frames, tmp_path / "ck", tmp_path / "out", fault, path) == -9, f"not killed at {fault}"
    assert _run(frames, tmp_path / "ck", tmp_path / "out", None, path) == 0
    assert _contents(tmp_path / "out") == clean
    lines = [json.loads(x) for x in (tmp_path / "ck" / "lowwater" / "metrics.jsonl").read_text().splitlines()]
    last = {x["batch_id"]: x for x in lines}
    assert sum(int(x.get("rows_in") or 0) for x in last.values()) == 4 * 200 + 4 * 80


@pytest.mark.parametrize("path", ["keyed", "general"])
def test_a_connected_process_function_on_spark_fires_every_timer_the_reference_runtime_fires(
    spark: Any, logs: tuple[Path, Path], tmp_path: Path, path: str
) -> None:
    env = StreamExecutionEnvironment()
    build(env, str(logs[0]), str(logs[1]), str(tmp_path / "out"), "connect")
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, clock=lambda b: 1_000 * b,  # type: ignore[arg-type]
                       end_of_input=True).execute(env, "connect")
    assert job.path == path
    on_spark = read_directory(tmp_path / "out" / "results")

    ref_env = StreamExecutionEnvironment()
    build(ref_env, str(logs[0]), str(logs[1]), str(tmp_path / "out-ref"), "connect")
    ReferenceRuntime().execute(ref_env)
    reference = read_directory(tmp_path / "out-ref" / "results")
    # batches are cut differently (files per trigger vs records per batch), so the watermark
    # that fires a timer may differ; which timers fire, and the final counts, may not
    assert sorted((r["key"], r["timer"]) for r in on_spark) == sorted((r["key"], r["timer"]) for r in reference)
    assert len(on_spark) > 50
    final = {r["key"]: r["count"] for r in on_spark}  # in the order they fired: the last one per key
    assert sum(final.values()) == 4 * 200 + 4 * 80


def test_a_dead_letter_of_a_union_on_the_keyed_path_names_its_source(spark: Any, tmp_path: Path) -> None:
    from lowwater.api import CollectSink
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import EventTimeSessionWindows
    from lowwater.io import PartitionedLogWriter
    from lowwater.spark.sources import PartitionedLogSource

    fields = [("key", "STRING"), ("ts", "BIGINT")]
    PartitionedLogWriter(tmp_path / "a", "jsonl").append(0, [{"key": "x", "ts": 1000}, {"key": "y", "ts": "oops"}])
    PartitionedLogWriter(tmp_path / "b", "jsonl").append(0, [{"key": "x", "ts": 2000}])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(100).with_timestamp_assigner("ts")
    env = StreamExecutionEnvironment()
    a = env.from_source(PartitionedLogSource(tmp_path / "a", fields), strategy, name="clicks")
    b = env.from_source(PartitionedLogSource(tmp_path / "b", fields), strategy, name="orders")
    out = a.union(b).key_by("key").window(EventTimeSessionWindows.with_gap(5000)).count().collect()
    dead = CollectSink()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, dead_letter_sink=dead, end_of_input=True,
                       clock=lambda b: 1_000 * b).execute(env, "dead letters of a union")  # type: ignore[arg-type]
    assert job.path == "keyed"
    assert [(r.key, r.value) for r in out.results] == [("x", 2)]
    assert [(d["source"], d["partition"], d["offset"]) for d in dead.results] == [("clicks", 0, 1)]


@pytest.mark.parametrize("path", ["keyed", "general"])
def test_every_batch_of_a_unions_dead_letters_to_a_dataframe_sink_has_the_source_column(
        spark: Any, tmp_path: Path, path: str) -> None:
    """A Parquet dead-letter directory of a union: the batches without dead letters wrote files
    without ``source`` (the keyed path) and Spark's reader of the directory then took their schema and
    dropped the column of the batch that had one, without a word; the general path had no ``source``
    at all, so a letter's partition and offset did not say which source they were in. Two unnamed
    sources are told apart by their place (``source#0``, ``source#1``)."""
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.io import PartitionedLogWriter
    from lowwater.spark.sinks import DirectorySink
    from lowwater.spark.sources import PartitionedLogSource

    fields = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]
    a, b = PartitionedLogWriter(tmp_path / "a", "jsonl"), PartitionedLogWriter(tmp_path / "b", "jsonl")
    a.append(0, [{"key": "x", "ts": 1000, "value": 1}])
    b.append(0, [{"key": "y", "ts": 1500, "value": 1}])
    a.append(0, [{"key": "x", "ts": 2000, "value": 1}, {"ts": 2100, "value": 1}])  # batch 1: no key
    b.append(0, [{"key": "y", "ts": 2500, "value": 1}])
    b.append(0, [{"key": "y", "ts": 2600, "value": 2}])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    env = StreamExecutionEnvironment()
    sa = env.from_source(PartitionedLogSource(tmp_path / "a", fields, segments_per_batch=1), strategy)
    sb = env.from_source(PartitionedLogSource(tmp_path / "b", fields, segments_per_batch=1), strategy)
    sa.union(sb).key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value").collect()
    dead_dir = tmp_path / "dead"
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, dead_letter_sink=DirectorySink(str(dead_dir)),
                       end_of_input=True, path=path).execute(env)  # type: ignore[arg-type]
    assert job.path == path
    import pyarrow.parquet as pq

    files = sorted(dead_dir.rglob("*.parquet"))
    assert len({f.parent.name for f in files}) >= 3  # the batches without dead letters wrote files too
    assert {tuple(pq.read_schema(f).names) for f in files} == {("reason", "partition", "offset", "file", "record",
                                                                "source")}
    got = spark.read.parquet(str(dead_dir)).select("source", "partition", "offset", "record").collect()
    assert [tuple(r) for r in got] == [("source#0", 0, 2, '{"ts":2100,"value":1}')]
    # the batch's sample, and so run's warning and status, say which source's partition 0 it was
    sample = next(b["metrics"]["dead_letter_sample"] for b in job.batches() if b["metrics"].get("dead_letter_sample"))
    assert (sample["source"], sample["partition"], sample["offset"]) == ("source#0", 0, 2), sample
    from lowwater.observe.metrics import read_checkpoint
    from lowwater.observe.status import render_status

    shown = render_status(tmp_path / "ck", read_checkpoint(str(tmp_path / "ck")))
    assert "  e.g. partition source#0:0 offset 2: missing key (key)" in shown, shown
    table = shown.split("watermarks after")[1]  # named by the labels the dead letters carry (not ``0:0``)
    assert "source#0:0 " in table and "source#1:0 " in table and " 0:0 " not in table, shown


@pytest.mark.parametrize("path", ["keyed", "general"])
def test_the_late_output_of_a_union_names_each_elements_source(spark: Any, tmp_path: Path, path: str) -> None:
    """Both sources have a partition 0 and an offset 1: without the source's name a late row would
    not say whose element it is (a dead letter names it the same way). The general path's late rows
    had the element's fields only, and no position or windows, until session 35."""
    from lowwater.api import OutputTag
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.io import PartitionedLogWriter
    from lowwater.spark.sinks import ForeachDataFrameSink
    from lowwater.spark.sources import PartitionedLogSource

    fields = [("key", "STRING"), ("ts", "BIGINT"), ("source", "STRING")]
    for name, first, late_ts in (("a", 5000, 100), ("b", 6000, 200)):
        log = PartitionedLogWriter(tmp_path / name, "jsonl")
        log.append(0, [{"key": "x", "ts": first, "source": f"web-{name}"}])  # batch 0: W = 4899 after it
        log.append(0, [{"key": "x", "ts": late_ts, "source": f"web-{name}"}])  # batch 1: [0, 1 s) closed
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(100).with_timestamp_assigner("ts")
    env = StreamExecutionEnvironment()
    a = env.from_source(PartitionedLogSource(tmp_path / "a", fields, segments_per_batch=1), strategy, name="clicks")
    b = env.from_source(PartitionedLogSource(tmp_path / "b", fields, segments_per_batch=1), strategy, name="orders")
    late = OutputTag("late")
    counts = a.union(b).key_by("key").window(TumblingEventTimeWindows.of(1000)).side_output_late_data(late).count()
    rows: list[tuple[Any, ...]] = []

    def keep(df: Any, _: int) -> None:
        assert df.columns == ["key", "ts", "source", "source_source", "partition", "offset", "rejected_windows"]
        rows.extend(tuple(r) for r in df.drop("rejected_windows").collect())

    counts.get_side_output(late).add_sink(ForeachDataFrameSink(keep))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True, path=path).execute(env, "late of a union")
    assert job.path == path
    assert sorted(rows) == [("x", 100, "web-a", "clicks", 0, 1), ("x", 200, "web-b", "orders", 0, 1)]


def _shorter_log_union(root: Path) -> tuple[StreamExecutionEnvironment, Any, Any]:
    """A union of two logs, one of them shorter: ``orders`` has one segment, ``clicks`` three, the
    third an element 7 s behind the second."""
    from lowwater.api import OutputTag
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.sources import PartitionedLogSource

    fields = [("user", "STRING"), ("ts", "BIGINT"), ("amount", "BIGINT")]
    clicks, orders = PartitionedLogWriter(root / "clicks", "jsonl"), PartitionedLogWriter(root / "orders", "jsonl")
    for ts, amount in ((1000, 1), (12_000, 2), (5000, 4)):
        clicks.append(0, [{"user": "a", "ts": ts, "amount": amount}])
    orders.append(0, [{"user": "a", "ts": 1000, "amount": 8}])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    env = StreamExecutionEnvironment()
    a = env.from_source(PartitionedLogSource(root / "clicks", fields, segments_per_batch=1), strategy, name="clicks")
    b = env.from_source(PartitionedLogSource(root / "orders", fields, segments_per_batch=1), strategy, name="orders")
    late = OutputTag("late")
    sums = a.union(b).key_by("user").window(TumblingEventTimeWindows.of(10_000)).side_output_late_data(late) \
        .sum("amount")
    return env, sums.collect(), sums.get_side_output(late).collect()


def test_a_log_whose_data_runs_out_first_holds_a_union_back_on_the_reference_runtime_as_on_spark(
        spark: Any, tmp_path: Path) -> None:
    """On Spark no stream finishes before the end of input: a log may grow. The reference runtime
    sent MAX for the shorter log as soon as its segments ran out, as for a bounded source in Flink,
    so the union moved on with ``clicks`` alone (11999) and ``a@5000`` was late there, and on time
    on Spark: the same pipeline over the same logs gave ``a[0, 10 s)`` 9 on one and 13 on the other."""
    env, sums, late = _shorter_log_union(tmp_path / "reference")
    ReferenceRuntime().execute(env)
    reference = ([(r.key, r.window_start, r.value) for r in sums.results], late.results)
    assert reference == ([("a", 0, 13), ("a", 10_000, 2)], [])
    env, sums, late = _shorter_log_union(tmp_path / "spark")
    SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True, path="keyed").execute(env)
    assert ([(r.key, r.window_start, r.value) for r in sums.results], late.results) == reference


def test_a_union_whose_sources_give_a_field_two_types_is_refused_naming_both(spark: Any, tmp_path: Path) -> None:
    """Spark reads the sources as one DataFrame: a STRING ``user`` in one and a BIGINT in the other
    became one column, the text ``"1"`` cast to the number, so two keys were summed as one; a text
    that is no number failed the query with ``CAST_INVALID_INPUT``, naming neither source nor field.
    Numbers of two widths still unite."""
    from lowwater.core.errors import ConfigurationError
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.sources import PartitionedLogSource

    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")

    def run(orders_amount: str, user: Any, root: Path) -> Any:
        PartitionedLogWriter(root / "clicks", "jsonl").append(0, [{"user": "1", "ts": 1000, "amount": 1}])
        PartitionedLogWriter(root / "orders", "jsonl").append(0, [{"user": user, "ts": 2000, "amount": 5}])
        env = StreamExecutionEnvironment()
        a = env.from_source(PartitionedLogSource(root / "clicks", [("user", "STRING"), ("ts", "BIGINT"),
                                                                   ("amount", "BIGINT")]), strategy, name="clicks")
        b = env.from_source(PartitionedLogSource(root / "orders", [("user", "BIGINT" if user == 1 else "STRING"),
                                                                   ("ts", "BIGINT"), ("amount", orders_amount)]),
                            strategy, name="orders")
        out = a.union(b).key_by("user").window(TumblingEventTimeWindows.of(10_000)).sum("amount").collect()
        SparkRuntime(str(root / "ck"), spark=spark, end_of_input=True, path="keyed").execute(env)
        return sorted((repr(r.key), r.value) for r in out.results)

    with pytest.raises(ConfigurationError) as refused:  # a PipelineError until session 55
        run("BIGINT", 1, tmp_path / "mixed")
    assert "'clicks' and 'orders' give the field 'user' two types, STRING and BIGINT" in str(refused.value)
    assert not (tmp_path / "mixed" / "ck" / "spark" / "commits").exists()  # refused before Spark read
    assert run("DOUBLE", "1", tmp_path / "widths") == [("'1'", 6.0)]


@pytest.mark.parametrize("runtime", ["reference", "keyed", "general"])
def test_a_unions_late_counts_and_window_dead_letters_name_each_source(
        spark: Any, tmp_path: Path, runtime: str) -> None:
    """Two sources, each with a partition 0 and one late element there, and one element the window's
    sum rejects (no ``amount``). The late counts were keyed by the partition number alone (``{"0":
    2}``), where the watermarks name ``0:0`` and ``1:0``, so ``lowwater status`` showed no late row on
    either; and on the keyed path the window's dead letter had no ``source``."""
    from lowwater.api import CollectSink
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.sources import PartitionedLogSource

    fields = [("user", "STRING"), ("ts", "BIGINT"), ("amount", "BIGINT")]
    for name in ("clicks", "orders"):
        log = PartitionedLogWriter(tmp_path / name, "jsonl")
        log.append(0, [{"user": "a", "ts": 20_000, "amount": 1}])  # batch 0: the watermark 19999
        log.append(0, [{"user": "a", "ts": 1_000, "amount": 1}])  # batch 1: late
    PartitionedLogWriter(tmp_path / "orders", "jsonl").append(0, [{"user": "b", "ts": 30_000}])  # no amount
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    env = StreamExecutionEnvironment()
    a = env.from_source(PartitionedLogSource(tmp_path / "clicks", fields, segments_per_batch=1), strategy,
                        name="clicks")
    b = env.from_source(PartitionedLogSource(tmp_path / "orders", fields, segments_per_batch=1), strategy,
                        name="orders")
    a.union(b).key_by("user").window(TumblingEventTimeWindows.of(10_000)).sum("amount").collect()
    dead = CollectSink()
    if runtime == "reference":
        job: Any = ReferenceRuntime(dead_letter_sink=dead).execute(env)
        lines = [line.to_json() for line in job.lines()]
    else:
        job = SparkRuntime(str(tmp_path / "ck"), spark=spark, dead_letter_sink=dead, end_of_input=True,
                           path=runtime).execute(env)  # type: ignore[arg-type]
        assert job.path == runtime
        lines = job.metrics()
    late: dict[str, int] = {}
    for line in lines:
        for lane, n in (line.get("rows_late_by_partition") or {}).items():
            late[lane] = late.get(lane, 0) + n
    assert late == {"clicks:0": 1, "orders:0": 1}  # by the sources' names (until session 48 ``0:0``, ``1:0``)
    assert set(late) <= set(lines[-1]["partition_watermarks"])
    assert [(d["source"], d["offset"], d["reason"]) for d in dead.results] == [("orders", 2, "missing value (amount)")]
