"""A NaN key is one key across micro-batches and restarts, on every path.

``canonical_key`` makes every NaN key the one object ``_NAN``, which a dict finds by identity (a
NaN is not equal to itself). A key restored from stored state is another NaN object: on the keyed
path each batch's stored slice came back under it, so the key's state and windows started afresh
every batch, the earlier elements lost without a word (a user probe, session 57); the general
path's state did the same after a restart."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import EventTimeSessionWindows, TumblingEventTimeWindows
from lowwater.runtime.reference import ReferenceRuntime
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sources import BatchFilesSource

pytestmark = pytest.mark.spark

BATCHES = [[{"ts": 1000, "x": 1}, {"ts": 1100, "x": 2}], [{"ts": 3000, "x": 3}], [{"ts": 4000, "x": 4}]]


def _write(directory: Path, batches: list[list[dict[str, Any]]], first: int = 0) -> None:
    """``batches`` as the batch files ``first, first + 1, ...`` (their offsets go on from ``first``'s)."""
    offset = sum(len(b) for b in BATCHES[:first])
    directory.mkdir(parents=True, exist_ok=True)
    for i, batch in enumerate(batches, first):
        path = directory / f"batch-{i:08d}.jsonl"
        lines = []
        for seq, e in enumerate(batch):
            lines.append(f'{{"partition": 0, "offset": {offset}, "seq": {seq}, "value": {{"ts": {e["ts"]}, '
                         f'"x": {e["x"]}}}}}\n')
            offset += 1
        path.write_text("".join(lines))
        os.utime(path, (1_000_000 + i, 1_000_000 + i))


def _pipelines(directory: Path, kind: str) -> tuple[StreamExecutionEnvironment, Any]:
    from lowwater.core.process import KeyedProcessFunction
    from lowwater.core.process.state import ValueStateDescriptor

    class Count(KeyedProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.n = runtime_context.get_state(ValueStateDescriptor("n"))

        def process_element(self, value: Any, ctx: Any) -> Any:
            n = (self.n.value() or 0) + value["x"]
            self.n.update(n)
            yield n

    env = StreamExecutionEnvironment()
    keyed = (env.from_source(BatchFilesSource(directory, [("ts", "BIGINT"), ("x", "BIGINT")], [0]),
                             WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
             .key_by(lambda r: float("nan")))
    if kind != "process":
        windows = TumblingEventTimeWindows.of(10_000) if kind == "window" else EventTimeSessionWindows.with_gap(10_000)
        out = keyed.window(windows).reduce(lambda a, b: {**a, "x": a["x"] + b["x"]})
    else:
        out = keyed.process(Count())
    return env, out.collect()


def _values(kind: str, results: list[Any]) -> list[Any]:
    return list(results) if kind == "process" else [(r.window_start, r.value["x"]) for r in results]


@pytest.mark.parametrize("kind", ["window", "session", "process"])
@pytest.mark.parametrize("path", ["keyed", "general"])
def test_a_nan_key_keeps_its_state_across_batches_and_a_restart(spark: Any, tmp_path: Path, kind: str,
                                                                path: str) -> None:
    _write(tmp_path / "all", BATCHES)
    env, out = _pipelines(tmp_path / "all", kind)
    ReferenceRuntime().execute(env)
    expected = _values(kind, out.results)
    assert expected == {"window": [(0, 10)], "session": [(1000, 10)], "process": [1, 3, 6, 10]}[kind]

    _write(tmp_path / "in", BATCHES[:2])  # two batches, then a restart on the same checkpoint, then the third
    got = []
    for end in (False, True):
        if end:
            _write(tmp_path / "in", BATCHES[2:], first=2)
        env, out = _pipelines(tmp_path / "in", kind)
        job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, end_of_input=end).execute(env)
        assert job.path == path
        got += _values(kind, out.results)
    assert got == expected


@pytest.mark.parametrize(("sliding", "key_type"), [(False, "DOUBLE"), (True, "DOUBLE"), (True, "FLOAT")])
def test_a_negative_zero_key_re_fired_late_is_the_key_zero(spark: Any, tmp_path: Path, sliding: bool,
                                                           key_type: str) -> None:
    """-0.0 is the key 0.0 on every path (docs/semantics.md), a window's late re-firing included: the
    native path took a late element's key as the element had it, so the re-firing of window (0.0,
    [0, 20000)) came out under -0.0 and its first firing under 0.0, two keys in a file sink (probe P,
    session 60). Tumbling windows, and sliding windows in panes; a FLOAT key stays a FLOAT in the
    results' DataFrame, late re-firings and first firings alike."""
    from lowwater.api import CollectSink
    from lowwater.core.windows import SlidingEventTimeWindows
    from lowwater.spark.sinks import ForeachDataFrameSink

    batches = [[{"key": -0.0, "ts": 1000, "value": 1}], [{"key": -0.0, "ts": 25000, "value": 2}],
               [{"key": -0.0, "ts": 3000, "value": 4}]]  # the watermark fires [0, 20000); 3000 re-fires it
    BatchFilesSource.write(tmp_path / "in", batches)
    fields = [("key", key_type), ("ts", "BIGINT"), ("value", "BIGINT")]
    key_types: set[str] = set()

    def run(runtime: Any, source: Any) -> list[tuple[Any, ...]]:
        env = StreamExecutionEnvironment()
        sink = CollectSink()
        assigner = SlidingEventTimeWindows.of(20_000, 10_000) if sliding else TumblingEventTimeWindows.of(20_000)
        windowed = (env.from_source(source, WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts"))
                    .key_by("key").window(assigner).allowed_lateness(60_000).sum("value"))
        windowed.add_sink(sink)
        if isinstance(runtime, SparkRuntime):
            windowed.add_sink(ForeachDataFrameSink(lambda df, _: key_types.add(dict(df.dtypes)["key"])))
        job = runtime.execute(env, "zero")
        assert getattr(job, "path", "native") == "native"
        return sorted((r.window_start, r.fire_index, repr(r.key), r.value) for r in sink.results)

    source = BatchFilesSource(tmp_path / "in", fields, [0])
    on_spark = run(SparkRuntime(str(tmp_path / "ck"), spark=spark, path="native"), source)
    reference = run(ReferenceRuntime(max_batches=len(batches)), BatchFilesSource(tmp_path / "in", fields, [0]))
    assert on_spark == reference
    assert (0, 1, "0.0", 5) in on_spark, on_spark  # the re-firing: 1 + 4, under the key 0.0
    assert key_types == {key_type.lower()}, key_types
