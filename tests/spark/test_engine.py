"""The Spark engine against Flink's transcripts and the reference runtime, on real local Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import CollectSink, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.io import PartitionedLogWriter, SyntheticStream
from lowwater.scenario import run_scenario
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import read_directory
from lowwater.spark.sources import PartitionedLogSource
from tests.spark.crash_job import SHAPES as CRASH_SHAPES
from tests.spark.crash_job import build as build_crash_job
from tests.spark.crash_job import write_frames
from tests.spark.crash_series import JVM_OPTIONS

pytestmark = pytest.mark.spark

SHARED = Path(__file__).resolve().parents[3] / "shared" / "scenarios"
SCENARIOS = sorted(p for p in SHARED.glob("*.json") if not p.name.endswith(".expected.json"))
NEXT = sorted(p for p in SHARED.glob("next/*.json") if not p.name.endswith(".expected.json"))
NEXT_ONE_SOURCE = [p for p in NEXT if "sources" not in json.loads(p.read_text())]
NEXT_SEVERAL_SOURCES = [p for p in NEXT if p not in NEXT_ONE_SOURCE]
FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]


def _compare(expected: dict[str, Any], actual: dict[str, Any]) -> None:
    def results(d: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sorted((r["key"], r["window_start"], r["window_end"], r["value"], r.get("fire_index", 0))
                      for r in d.get("results", []))

    def late(d: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sorted((r["key"], r["ts"], r["value"], r.get("partition", 0), r.get("source", ""))
                      for r in d.get("late", []))

    def elements(d: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(e["source"], e["key"], e["ts"], e["current_watermark"]) for e in d.get("elements", [])]

    def timers(d: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sorted((t["timer"], t["key"], t["current_watermark"]) for t in d.get("timers", []))

    assert results(actual) == results(expected)
    assert late(actual) == late(expected)
    assert elements(actual) == elements(expected)
    assert timers(actual) == timers(expected)
    if expected.get("batch_watermarks") is not None:
        assert actual["batch_watermarks"] == expected["batch_watermarks"]
    else:
        forwarded = [w["watermark"] for w in expected["watermarks"] if w.get("forwarded", True)]
        assert [w["watermark"] for w in actual["watermarks"]] == forwarded


def test_the_shared_scenarios_are_present() -> None:
    assert len(SCENARIOS) >= 9, f"expected Flink's transcripts in {SHARED}"


# The keyed path runs the reference runtime's operators per key; what is its own is the control plane
# around them (late side output, re-firing, min-combine, batch form, idleness, ticks, all idle).
# LOWWATER_KEYED_SCENARIOS=all runs every one-source transcript on it.
KEYED = [p for p in SCENARIOS + NEXT_ONE_SOURCE if os.environ.get("LOWWATER_KEYED_SCENARIOS") == "all"
         or p.stem.split("_")[0] in ("03", "04", "07", "12", "17", "18", "20")]


@pytest.mark.parametrize(("scenario", "path"), [(s, path) for s in SCENARIOS + NEXT_ONE_SOURCE
                                                for path in ("native", "executor", "general")]
                         + [(s, "keyed") for s in KEYED], ids=lambda x: x.stem if isinstance(x, Path) else x)
def test_spark_runtime_reproduces_flink(spark: Any, scenario: Path, path: str, tmp_path: Path) -> None:
    expected = json.loads(scenario.with_name(scenario.stem + ".expected.json").read_text())
    actual = run_scenario(scenario, runtime="spark", path=path, spark=spark, workdir=str(tmp_path))
    assert actual["spark_path"] == path
    _compare(expected, actual)


# CI: the keyed path (what auto takes); LOWWATER_SEVERAL_PATHS=all runs them on the general path too
SEVERAL_PATHS = ("auto", "general") if os.environ.get("LOWWATER_SEVERAL_PATHS") == "all" else ("auto",)


@pytest.mark.parametrize(("scenario", "path"), [(s, path) for s in NEXT_SEVERAL_SOURCES for path in SEVERAL_PATHS],
                         ids=lambda x: x.stem if isinstance(x, Path) else x)
def test_several_sources_on_spark_reproduce_flink(spark: Any, scenario: Path, path: str, tmp_path: Path) -> None:
    """One query reads every source; a union into a window and a keyed connect take the keyed path
    (per key on the executors, a lane per (source, partition) on the driver), or the general one."""
    expected = json.loads(scenario.with_name(scenario.stem + ".expected.json").read_text())
    actual = run_scenario(scenario, runtime="spark", path=path, spark=spark, workdir=str(tmp_path))
    assert actual["spark_path"] == ("keyed" if path == "auto" else path)
    _compare(expected, actual)


def _events(*rows: tuple[str, int, int, int]) -> list[dict[str, Any]]:
    return [{"key": k, "ts": ts, "value": v, "partition": p} for k, ts, v, p in rows]


GENERATED = {
    "session_merging_with_lateness": {
        "partitions": 2,
        "batches": [
            _events(("a", 1000, 1, 0), ("a", 3000, 2, 1), ("b", 2000, 4, 0)),
            _events(("a", 9000, 8, 0), ("a", 20000, 16, 1)),
            _events(("a", 5500, 32, 0), ("a", 30000, 64, 1), ("b", 30000, 1, 0)),
            _events(("a", 2500, 128, 1), ("b", 1000, 256, 0)),
        ],
        "watermark": {"kind": "bounded_out_of_orderness", "max_out_of_orderness_ms": 500},
        "window": {"kind": "session", "gap_ms": 3000},
        "allowed_lateness_ms": 4000,
        "aggregate": "sum",
    },
    "sliding_with_lateness_refires": {
        "batches": [
            _events(("a", 1000, 1, 0), ("a", 7000, 2, 0), ("b", 4000, 3, 0)),
            _events(("a", 16000, 4, 0), ("a", 6000, 5, 0), ("a", 3000, 6, 0)),
            _events(("a", 9000, 7, 0), ("a", 1000, 8, 0), ("b", 30000, 9, 0)),
        ],
        "watermark": {"kind": "monotonous"},
        "window": {"kind": "sliding", "size_ms": 10000, "slide_ms": 5000},
        "allowed_lateness_ms": 5000,
        "aggregate": "max",
    },
    # panes (the native path): a window re-fired by late elements in two batches (its fire index counts
    # the first batch's), and an element too late for one of its windows and in time for the other
    "sliding_panes_late_twice": {
        "partitions": 2,
        "batches": [
            _events(("a", 1000, 1, 0), ("a", 5000, 2, 0), ("a", 5000, 64, 1)),
            _events(("a", 1500, 4, 0), ("a", 9000, 8, 0), ("a", 9000, 128, 1)),
            _events(("a", 3000, 16, 1), ("a", 100, 32, 0), ("b", 3500, 256, 1)),
            _events(("a", 20000, 512, 0), ("b", 20000, 1024, 1)),
        ],
        "watermark": {"kind": "monotonous"},
        "window": {"kind": "sliding", "size_ms": 4000, "slide_ms": 2000},
        "allowed_lateness_ms": 6000,
        "aggregate": "sum",
    },
    "punctuated_per_event": {
        "events": [
            {"key": "a", "ts": 1000, "value": 1, "mark": False},
            {"key": "a", "ts": 6000, "value": 2, "mark": True},
            {"key": "a", "ts": 2000, "value": 4, "mark": False},
            {"key": "b", "ts": 12000, "value": 8, "mark": True},
        ],
        "watermark": {"kind": "punctuated", "field": "mark"},
        "window": {"kind": "tumbling", "size_ms": 5000},
        "aggregate": "count",
    },
    "legacy_bounded_two_partitions": {
        "partitions": 2,
        "batches": [
            _events(("a", 1000, 1, 0), ("b", 500, 2, 1)),
            _events(("a", 11000, 3, 0), ("a", 4000, 4, 1)),
            _events(("a", 2000, 5, 0), ("b", 12000, 6, 1)),
        ],
        "watermark": {"kind": "legacy_bounded", "max_out_of_orderness_ms": 1000},
        "window": {"kind": "tumbling", "size_ms": 5000, "offset_ms": 1000},
        "aggregate": "min",
    },
}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_spark_runtime_equals_the_reference_runtime(spark: Any, name: str, tmp_path: Path) -> None:
    scenario = GENERATED[name]
    reference = run_scenario(dict(scenario), runtime="reference")
    on_spark = run_scenario(dict(scenario), runtime="spark", spark=spark, workdir=str(tmp_path))
    _compare(reference, on_spark)
    assert reference["results"], "the scenario should fire windows"


def _sliding_scenario(seed: int, multiple: bool = True) -> dict[str, Any]:
    """Sliding windows whose size is a multiple of their slide, or not (the native path keeps their
    panes, a slide or the sizes' greatest common divisor long), with offsets, lateness, elements late
    for some of their windows and on time for others, and elements too late for all, over partitions
    that lag each other."""
    import random

    rnd = random.Random(seed)
    slide = rnd.choice([1000, 2000])
    size = slide * rnd.randint(2, 4)
    if not multiple:
        size, slide = rnd.choice([(2500, 1000), (3500, 1000), (5000, 2000), (3000, 2000), (4000, 1500), (2000, 1500)])
    partitions = rnd.randint(1, 3)
    batches, now = [], 0
    for _ in range(rnd.randint(3, 5)):
        now += 500 * rnd.randint(2, 14)
        # on a 500 ms grid, so that watermarks meet window ends exactly
        batches.append(_events(*[(rnd.choice("abc"), max(0, now - 500 * rnd.randint(0, 24)), rnd.randint(-5, 50),
                                  rnd.randrange(partitions)) for _ in range(rnd.randint(2, 9))]))
    return {"partitions": partitions, "batches": batches,
            "watermark": {"kind": "bounded_out_of_orderness", "max_out_of_orderness_ms": rnd.choice([0, 500, 1500])},
            "window": {"kind": "sliding", "size_ms": size, "slide_ms": slide,
                       "offset_ms": rnd.choice([0, 0, 300, -700])},
            "allowed_lateness_ms": rnd.choice([0, 1000, 4000, 8000]),
            "aggregate": rnd.choice(["sum", "count", "min", "max", "avg"])}


@pytest.mark.parametrize(("seed", "path", "multiple"),
                         [(seed, "native", True) for seed in range(10)] + [(10, "executor", True)]
                         + [(seed, "native", False) for seed in range(11, 16)] + [(16, "executor", False)])
def test_sliding_windows_in_panes_equal_the_reference_runtime(spark: Any, seed: int, path: str, multiple: bool,
                                                               tmp_path: Path) -> None:
    """The native path keeps a sliding window's partials per pane (a slide long, or the greatest
    common divisor of size and slide where the size is not a multiple: session 61) and fires a window
    from its panes, where it exploded each element into every window it is in (Spark's own sliding
    windows do: docs/performance.md, session 59). Random scenarios, against the reference runtime:
    results, fire indexes of late re-firings, late elements, watermarks. Odd seeds fire each window
    from a table of (pane, window) pairs joined in, as a firing of many partials does; even seeds
    from the lambda over the window range, as a small one does (``NativeProcessor.JOIN_ROWS``)."""
    from lowwater.spark.native import NativeProcessor

    scenario = _sliding_scenario(seed, multiple)
    reference = run_scenario(dict(scenario), runtime="reference")
    states: list[Any] = []
    original = NativeProcessor.state_to_json
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(NativeProcessor, "JOIN_ROWS", 0 if seed % 2 else 10**12)
        patch.setattr(NativeProcessor, "state_to_json",
                      staticmethod(lambda st: states.append(st.panes) or original(st)))
        on_spark = run_scenario(dict(scenario), runtime="spark", path=path, spark=spark, workdir=str(tmp_path))
    assert on_spark["spark_path"] == path
    assert states and all(states), "the state should keep panes"
    _compare(reference, on_spark)
    assert reference["results"], "the scenario should fire windows"


# -- exactly-once across crashes --------------------------------------------------------------
def _write_log(root: Path) -> None:
    writer = PartitionedLogWriter(root, "jsonl")
    stream = SyntheticStream(partitions=3, keys=20, events_per_second=500, disorder_ms=800,
                             lagging_partition=2, lag_ms=3000, late_fraction=0.02, late_by_ms=4000, seed=7)
    stream.write_to(writer, batches=6, rows_per_batch=600)


def _run_job(log: Path, ckpt: Path, out: Path, fault: str | None, path: str = "native") -> int:
    """One fresh ``python crash_job.py --both`` (driver and JVM): both shapes, the fault waiting for both queries."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "JDK_JAVA_OPTIONS": JVM_OPTIONS,  # as the crash series
           "LOWWATER_FAULT_QUERIES": str(len(CRASH_SHAPES))}
    env.pop("LOWWATER_FAULT", None)
    if fault:
        env["LOWWATER_FAULT"] = fault
    job = Path(__file__).with_name("crash_job.py")
    proc = subprocess.run([sys.executable, str(job), str(log), str(ckpt), str(out), path, "--frames", "--both"],
                          env=env, capture_output=True, text=True, timeout=300)
    if fault:
        said = "; ".join([f"batch {fault.replace(':', ', ')}"] * len(CRASH_SHAPES))
        assert f"LOWWATER_FAULT: killing the driver at {said}" in proc.stderr, proc.stderr[-3000:]
    return proc.returncode


def _contents(out: Path) -> tuple[list[Any], list[Any]]:
    def rows(kind: str) -> list[Any]:
        return sorted(json.dumps(r, sort_keys=True) for r in read_directory(out / kind))

    return rows("results"), rows("late")


# The native path is killed at seeded random points, PostgreSQL sink included, in test_faults.py.
# CI kills the keyed path (what single-source pipelines that are not native take), with tumbling
# windows (the reference window operator per key) and with sessions (in columns), the two as two
# queries of each driver (crash_job.py --both); the general path is killed with
# LOWWATER_CRASH_PATHS=keyed,general (and LOWWATER_SEVERAL_CRASH_PATHS=keyed,general).
@pytest.mark.parametrize("path", os.environ.get("LOWWATER_CRASH_PATHS", "keyed").split(","))
def test_killed_and_restarted_queries_equal_uninterrupted_runs(spark: Any, tmp_path: Path, path: str) -> None:
    # the log's records as Parquet files read by Spark's file source through a DataFrameSource (the
    # seeded series in test_faults.py kill the partitioned log's own source)
    log = tmp_path / "frames"
    _write_log(tmp_path / "log")
    assert write_frames(tmp_path / "log", log) == 18  # 6 segments of 3 partitions: 3 files a batch
    clean: dict[str, tuple[list[Any], list[Any]]] = {}
    last: set[int] = set()

    def uninterrupted(shape: str, sessions: bool) -> Any:
        env = StreamExecutionEnvironment()
        build_crash_job(env, str(log), str(tmp_path / "out-clean" / shape), sessions=sessions, spark=spark)
        return SparkRuntime(str(tmp_path / "ck-clean" / shape), spark=spark, path=path,  # type: ignore[arg-type]
                            clock=lambda b: 1_000 * b, end_of_input=True).execute(env, f"crash test {shape}")

    # the uninterrupted runs in-process, two queries at once as crash_job.main runs them
    with ThreadPoolExecutor(len(CRASH_SHAPES)) as pool:
        jobs = {shape: pool.submit(uninterrupted, shape, sessions) for shape, sessions in CRASH_SHAPES.items()}
    for shape, sessions in CRASH_SHAPES.items():
        job = jobs[shape].result()
        in_columns = sum(b["metrics"].get("keys_in_columns", 0) for b in job.batches())
        assert (in_columns > 0) == (sessions and path == "keyed"), in_columns
        clean[shape] = _contents(tmp_path / "out-clean" / shape)
        assert clean[shape][0] and clean[shape][1], f"the {shape} job should produce results and late rows"
        last.add(_last_batch(tmp_path / "ck-clean" / shape))
    assert len(last) == 1, f"both shapes end in the same step: {last}"

    # SIGKILL between batches, after a state commit, between two sinks, and in the final step. Each
    # kill is a fresh driver and JVM (about 45 s of CI's time) where both queries stop at the point
    # and the second to get there kills the driver (LOWWATER_FAULT_QUERIES). CI kills between the
    # sinks and in the final step; a kill between the sinks is after the state commit too, and its
    # replay rewrites the batch's state and both sinks, one of them never written: what a kill
    # right after the commit tests. LOWWATER_CRASH_POINTS=all kills at all four.
    every = {"start": "2:start", "after_state": "3:after_state", "after_first_sink": "4:after_first_sink",
             "final": f"{last.pop()}:after_state"}
    chosen = ("after_first_sink", "final")
    faults = list(every.values()) if os.environ.get("LOWWATER_CRASH_POINTS") == "all" else [every[c] for c in chosen]
    for fault in faults:
        code = _run_job(log, tmp_path / "ck", tmp_path / "out", fault, path)
        assert code == -9, f"the driver should have been killed at {fault} (exit {code})"
    assert _run_job(log, tmp_path / "ck", tmp_path / "out", None, path) == 0
    for shape in CRASH_SHAPES:
        assert _contents(tmp_path / "out" / shape) == clean[shape], shape


def _last_batch(ckpt: Path) -> int:
    return max(int(p.stem) for p in (ckpt / "lowwater" / "batches").glob("*.json"))


# -- periodic emission with no data ------------------------------------------------------------
def _wait(predicate: Any, timeout_s: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


class _Feeder:
    """Keeps partition 0 busy (one new segment per call, event time +2 s), while partition 1 is silent."""

    def __init__(self, writer: PartitionedLogWriter) -> None:
        self.writer = writer
        self.ts = 1000

    def __call__(self) -> None:
        self.writer.append(0, [{"key": "a", "ts": self.ts, "value": 1}, {"key": "a", "ts": self.ts + 1000, "value": 1}])
        self.ts += 2000


def _idle_job(spark: Any, tmp_path: Path, idleness: bool) -> tuple[Any, CollectSink, _Feeder]:
    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    feeder = _Feeder(writer)
    feeder()
    writer.append(1, [{"key": "b", "ts": 1000, "value": 1}])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    if idleness:
        strategy = strategy.with_idleness(2000)
    env = StreamExecutionEnvironment()
    sink = (
        env.from_source(PartitionedLogSource(log, FIELDS), strategy)
        .key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value").collect()
    )
    runtime = SparkRuntime(str(tmp_path / "ck"), spark=spark, trigger="300 ms", clock=lambda b: 1000 * b)
    return runtime.execute(env, f"idle-{idleness}"), sink, feeder


def _feeding(feeder: _Feeder, done: Any) -> Any:
    def check() -> bool:
        if done():
            return True
        if feeder.ts < 40_000:
            feeder()
        return False

    return check


def test_an_idle_partition_stops_holding_windows_back_with_idleness(spark: Any, tmp_path: Path) -> None:
    job, sink, feeder = _idle_job(spark, tmp_path, idleness=True)
    try:
        ok = _wait(_feeding(feeder, lambda: len(sink.results) >= 3))
        assert ok, "windows should close once partition 1 is idle"
    finally:
        job.stop()
    fired = {(r.key, r.window_start) for r in sink.results}
    assert {("a", 0), ("b", 0), ("a", 10_000)} <= fired
    assert any("1" in b["idle_partitions"] for b in job.watermarks())


def test_without_idleness_an_idle_partition_holds_windows_open(spark: Any, tmp_path: Path) -> None:
    job, sink, feeder = _idle_job(spark, tmp_path, idleness=False)
    try:
        assert _wait(_feeding(feeder, lambda: len(job.batches()) >= 10)), "batches should keep coming"
    finally:
        job.stop()
    assert sink.results == []
    assert all(b["combined_watermark"] <= 999 for b in job.watermarks())


def test_a_query_stopped_in_the_middle_of_a_batch_stops_cleanly_and_the_batch_runs_again(
        spark: Any, tmp_path: Path) -> None:
    """``job.stop()`` while a batch's Spark job runs interrupts the batch's py4j call. Spark's stream
    thread reads the Python error's text to tell a stop from a failure, with a regex that recursed
    once per character of it: the Py4JJavaError's 10,000 characters overflowed the thread's stack,
    which died printing a thousand lines of a StackOverflowError, its status still "Processing new
    data". The batch, not committed, runs again when the query starts again.

    The first run's first batch runs a Spark job of 3 s in its sink, so the stop surely lands in one
    (a wait for any of the batches' own short jobs, polled, missed them all once in CI)."""
    import threading

    from lowwater.spark.sinks import ForeachDataFrameSink

    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    for p in range(2):
        writer.append(p, [{"key": f"k{i % 7}", "ts": i * 10, "value": 1} for i in range(20_000)])
    inside, fired, slow = threading.Event(), [], [True]

    def write(df: Any, batch_id: int) -> None:
        if slow[0] and batch_id == 0:
            inside.set()
            df.sparkSession.range(2).repartition(2).foreach(lambda _: time.sleep(3))
        fired.extend((r.key, r.window_start, r.value) for r in df.collect())

    def build() -> StreamExecutionEnvironment:
        env = StreamExecutionEnvironment()
        (env.from_source(PartitionedLogSource(log, FIELDS, records_per_batch=5_000),
                         WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
         .key_by("key").window(TumblingEventTimeWindows.of(100_000)).sum("value")
         .add_sink(ForeachDataFrameSink(write)))
        return env

    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, trigger="1 s").execute(build())
    try:
        assert inside.wait(120), "the first batch should reach the sink"
        time.sleep(0.5)
    finally:
        job.stop(wait_s=0)  # at once: in the middle of the batch
    assert job.query is not None and job.query.exception() is None
    assert job.query.status["message"] == "Stopped"
    committed = [p.name for p in (tmp_path / "ck" / "spark" / "commits").iterdir() if p.name.isdigit()]
    assert committed == [], "the first batch was cut short"
    slow[0] = False
    SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(build())
    assert len({(k, ws) for k, ws, _ in fired}) == len(fired) == 14  # 7 keys, 2 windows, each fired once
    assert sum(v for _, _, v in fired) == 40_000


def test_stop_lets_the_batch_in_progress_end_and_commit_first(spark: Any, tmp_path: Path) -> None:
    """``job.stop()`` on a live job waits for the batch it finds running: a stop at once nearly always
    cut a batch short, and its Spark tasks logged the cancellation with their stacks (a user probe,
    session 64). Here the sink runs a Spark job of 3 s in the first batch; the stop, asked 0.5 s into it, returns
    once Spark has committed the batch, and a run after it has nothing to do again."""
    import threading

    from lowwater.spark.sinks import ForeachDataFrameSink

    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, [{"key": "a", "ts": 500, "value": 7}])
    inside, batches = threading.Event(), []

    def slow(df: Any, batch_id: int) -> None:  # in the first batch, a Spark job of 3 s: what a stop at once interrupts
        batches.append(batch_id)
        if batch_id == 0:
            inside.set()
            df.sparkSession.range(2).repartition(2).foreach(lambda _: time.sleep(3))

    def build() -> StreamExecutionEnvironment:
        env = StreamExecutionEnvironment()
        (env.from_source(PartitionedLogSource(log, FIELDS),
                         WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
         .key_by("key").window(TumblingEventTimeWindows.of(1000)).sum("value").add_sink(ForeachDataFrameSink(slow)))
        return env

    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, trigger="200 ms").execute(build())
    try:
        assert inside.wait(120), "the first batch should reach the sink"
        time.sleep(0.5)
    finally:
        started = time.monotonic()
        job.stop(wait_s=60)  # (10 s by default; a loaded machine may take longer over the 3 s)
    assert 1.0 < time.monotonic() - started < 60, "the stop waited for the batch"
    assert job.query is not None and job.query.exception() is None
    committed = sorted(int(p.name) for p in (tmp_path / "ck" / "spark" / "commits").iterdir() if p.name.isdigit())
    planned = sorted(int(p.name) for p in (tmp_path / "ck" / "spark" / "offsets").iterdir() if p.name.isdigit())
    assert committed == planned, "every batch Spark planned was committed: none was cut short"
    first = list(batches)
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(build())
    assert batches[:len(first)] == first and all(b > max(first) for b in batches[len(first):]), \
        "no batch ran again"


def test_time_lag_watermarks_advance_with_no_data(spark: Any, tmp_path: Path) -> None:
    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, [{"key": "a", "ts": 500, "value": 7}])
    env = StreamExecutionEnvironment()
    sink = (
        env.from_source(PartitionedLogSource(log, FIELDS),
                        WatermarkStrategy.for_time_lag(2000).with_timestamp_assigner("ts"))
        .key_by("key").window(TumblingEventTimeWindows.of(1000)).sum("value").collect()
    )
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, trigger="300 ms", clock=lambda b: 1000 * b).execute(env)
    try:
        assert _wait(lambda: len(sink.results) == 1), "the window should fire on ticks alone"
    finally:
        job.stop()
    marks = [b["combined_watermark"] for b in job.watermarks()]
    assert marks == sorted(marks) and marks[-1] >= 999
    assert [(r.key, r.window_start, r.value) for r in sink.results] == [("a", 0, 7)]


def test_the_quickstart_gives_the_same_answer_on_spark(spark: Any, tmp_path: Path) -> None:
    from examples.quickstart import main

    from tests.test_quickstart import EXPECTED_TOTALS, totals

    out = main(["--out", str(tmp_path / "spark"), "--runtime", "spark"])
    assert totals(out) == EXPECTED_TOTALS
    assert [(e["user"], e["amount"]) for e in out["late"]] == [("ann", 100)]
    # the reference runtime's files hold the same rows, window struct and late row's position alike
    # (until session 37 its results had no window column)
    reference = main(["--out", str(tmp_path / "reference")])
    assert sorted(reference["totals"], key=str) == sorted(out["totals"], key=str)
    assert reference["late"] == out["late"]
    assert out["totals"][0]["window"] == {"start": "1970-01-01T00:00:00.000Z", "end": "1970-01-01T01:00:00.000Z"}


def test_records_that_cannot_be_windowed_go_to_the_dead_letter_sink(spark: Any, tmp_path: Path) -> None:
    from lowwater.api import CollectSink
    from lowwater.spark.sources import BatchFilesSource

    batches = [[
        {"key": "a", "ts": 1000, "value": 1},
        {"key": None, "ts": 2000, "value": 2},      # no key
        {"key": "a", "ts": "soon", "value": 4},     # a BIGINT field that is not a number: not read
        {"key": "b", "ts": 3000, "value": 8},
    ]]
    BatchFilesSource.write(tmp_path / "in", batches)
    env = StreamExecutionEnvironment()
    source = BatchFilesSource(tmp_path / "in", [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")], [0])
    results = (env.from_source(source, WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
               .key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value").collect())
    dead = CollectSink()
    job = env.execute(runtime="spark", checkpoint_location=str(tmp_path / "ck"), spark=spark, dead_letter_sink=dead,
                      end_of_input=True)
    assert sorted((r.key, r.value) for r in results.results) == [("a", 1), ("b", 8)]
    assert sorted((d["offset"], d["reason"].split(" (")[0]) for d in dead.results) == [
        (1, "missing key"), (2, "record does not parse: \"field 'ts': 'soon' is not a BIGINT\"")]
    first = job.batches()[0]["metrics"]
    assert (first["rows_in"], first["rows_dead_lettered"], first["rows_late"]) == (4, 2, 0)


def test_a_checkpoint_of_another_pipeline_is_refused_before_any_data_is_read(spark: Any, tmp_path: Path) -> None:
    from lowwater.core.errors import ConfigurationError
    from lowwater.spark.sources import BatchFilesSource

    BatchFilesSource.write(tmp_path / "in", [[{"key": "a", "ts": 1, "value": 1}]])
    fields = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]

    def pipeline(size_ms: int) -> StreamExecutionEnvironment:
        env = StreamExecutionEnvironment()
        (env.from_source(BatchFilesSource(tmp_path / "in", fields, [0]),
                         WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
         .key_by("key").window(TumblingEventTimeWindows.of(size_ms)).sum("value").collect())
        return env

    SparkRuntime(str(tmp_path / "ck"), spark=spark).execute(pipeline(1000))
    SparkRuntime(str(tmp_path / "ck"), spark=spark).execute(pipeline(1000))  # the same pipeline resumes
    batches_before = len(list((tmp_path / "ck" / "lowwater" / "batches").iterdir()))
    with pytest.raises(ConfigurationError, match="belongs to a different pipeline"):
        SparkRuntime(str(tmp_path / "ck"), spark=spark).execute(pipeline(2000))
    assert len(list((tmp_path / "ck" / "lowwater" / "batches").iterdir())) == batches_before


def test_a_failing_monotony_handler_fails_the_job_like_the_reference_runtime(spark: Any, tmp_path: Path) -> None:
    scenario = {
        "batches": [[{"key": "a", "ts": 1000, "value": 1}, {"key": "a", "ts": 12000, "value": 2}],
                    [{"key": "a", "ts": 5000, "value": 4}, {"key": "a", "ts": 13000, "value": 8}]],
        "watermark": {"kind": "legacy_ascending", "violation_handler": "fail"},
        "window": {"kind": "tumbling", "size_ms": 10000}, "aggregate": "sum",
    }
    reference = run_scenario(dict(scenario))
    on_spark = run_scenario(dict(scenario), runtime="spark", spark=spark, workdir=str(tmp_path))
    assert "MonotonyViolationError" in on_spark["error"]["message"]
    assert "5000 is smaller than last timestamp 12000" in on_spark["error"]["message"]
    assert on_spark["results"] == reference["results"] == [
        {"key": "a", "window_start": 0, "window_end": 10000, "value": 1, "fire_index": 0}]
    assert on_spark["watermarks"] == reference["watermarks"]


# -- a job that runs for months keeps a bounded number of files ---------------------------------
def test_old_batch_records_are_forgotten_and_the_metrics_log_keeps_every_batch(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lowwater.spark.engine as engine

    monkeypatch.setattr(engine, "KEEP_BATCH_RECORDS", 2)
    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    for b in range(5):
        writer.append(0, [{"key": "a", "ts": 10_000 * b + i, "value": 1} for i in range(3)])
    env = StreamExecutionEnvironment()
    sink = (env.from_source(PartitionedLogSource(log, FIELDS, max_files_per_trigger=1),
                            WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
            .key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value").collect())
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, clock=lambda b: 1000 * b, end_of_input=True).execute(env)
    kept = sorted(int(p.stem) for p in (tmp_path / "ck" / "lowwater" / "batches").glob("*.json"))
    assert kept == [4, 5], "the newest two: the last micro-batch and the end-of-input step"
    assert [m["batch_id"] for m in job.metrics()] == [0, 1, 2, 3, 4, 5]
    assert str(job.accounting()) == "15 rows in = 15 windowed + 0 late + 0 dead-lettered"
    assert sorted(r.value for r in sink.results) == [3, 3, 3, 3, 3]


def test_the_tick_source_runs_batches_without_a_row_or_a_column_in_them(spark: Any, tmp_path: Path) -> None:
    """The tick source is one of the query's sources (Spark counts its row per batch), but the
    batch handed to ``foreachBatch`` is the data alone: its own columns, its own rows, and no
    tick filter left for each batch's plan. An empty data source still makes a batch."""
    from lowwater.spark.engine import _with_ticks

    data = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).load().selectExpr("value AS v")
    seen: list[tuple[int, list[str], list[int]]] = []

    def batch(df: Any, batch_id: int) -> None:
        seen.append((batch_id, df.columns, sorted(r.v for r in df.collect())))

    united = _with_ticks(spark, data)
    assert united.columns == ["v"]
    q = (united.writeStream.foreachBatch(batch).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert seen == [(0, ["v"], [0, 1, 2, 3, 4])]
    assert [s["numInputRows"] for s in q.lastProgress["sources"]] == [5, 1], "the tick source's row is read"

    empty = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).load() \
        .selectExpr("value AS v").where("v < 0")
    seen.clear()
    q = (_with_ticks(spark, empty).writeStream.foreachBatch(batch)
         .option("checkpointLocation", str(tmp_path / "ck2")).trigger(availableNow=True).start())
    q.awaitTermination()
    assert seen == [(0, ["v"], [])]


def test_a_directory_another_job_wrote_is_refused_before_its_batches_are_replaced(spark: Any, tmp_path: Path) -> None:
    """A new checkpoint (which a changed pipeline is told to use) starts its batch ids at 0: its
    ``batch=0/`` replaced the first job's, whose later batches stayed beside, one directory of two
    jobs' rows, without a word. The job that wrote it resumes; a reference run, a new job each time,
    is refused."""
    from lowwater.core.errors import ConfigurationError
    from lowwater.spark.sinks import DirectorySink

    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    for ts in (1000, 12_000, 25_000):
        writer.append(0, [{"key": "a", "ts": ts, "value": 1}])

    def build(size: int) -> StreamExecutionEnvironment:
        env = StreamExecutionEnvironment()
        (env.from_source(PartitionedLogSource(log, FIELDS, segments_per_batch=1),
                         WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
         .key_by("key").window(TumblingEventTimeWindows.of(size)).sum("value")
         .add_sink(DirectorySink(tmp_path / "out")))
        return env

    SparkRuntime(str(tmp_path / "ck1"), spark=spark).execute(build(10_000))
    first = sorted(p.name for p in (tmp_path / "out").iterdir())
    with pytest.raises(ConfigurationError, match="holds the batches of another job"):
        SparkRuntime(str(tmp_path / "ck2"), spark=spark).execute(build(20_000))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == first  # nothing replaced
    SparkRuntime(str(tmp_path / "ck1"), spark=spark, end_of_input=True).execute(build(10_000))  # its own job resumes
    assert [(r["window_start"], r["value"]) for r in read_directory(tmp_path / "out")] == [
        (0, 1), (10_000, 1), (20_000, 1)]
    with pytest.raises(ConfigurationError, match="holds the batches of another job"):
        build(10_000).execute()  # a reference run is a new job too (until session 55 it replaced batch=0..k)
    assert [(r["window_start"], r["value"]) for r in read_directory(tmp_path / "out")] == [
        (0, 1), (10_000, 1), (20_000, 1)]
