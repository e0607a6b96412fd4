"""BatchFilesSource: both runtimes read a batch file's values by one set of rules.

Spark's JSON file source read them before, and the reference runtime read them with
``json.loads`` and no check: a number in a ``STRING`` field was its text on Spark and a number
in the element on the reference runtime, a ``DECIMAL`` with a place too many was rounded on
Spark, and a value of another type was null on Spark (a user probe, session 56)."""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import CollectSink
from lowwater.runtime.reference import ReferenceRuntime
from tests.io.test_batch_files import DEAD, LINES, _pipeline

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("runtime", ["reference", "spark"])
def test_both_runtimes_read_the_same_elements_and_dead_letters(spark: Any, tmp_path: Path, runtime: str) -> None:
    from lowwater.spark.engine import SparkRuntime

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "batch-00000000.jsonl").write_text("\n".join(LINES) + "\n")
    (tmp_path / "in" / "batch-00000001.jsonl").write_text("")  # an empty micro-batch
    (tmp_path / "in" / "batch-00000002.jsonl").write_text(
        '{"partition": 0, "offset": 8, "seq": 0, "value": {"key": "a", "ts": 5000, "amount": 0.01}}\n')
    for i in range(3):  # Spark takes new files in modification-time order, as BatchFilesSource.write sets it
        os.utime(tmp_path / "in" / f"batch-{i:08d}.jsonl", (1_000_000 + i, 1_000_000 + i))
    env, sums = _pipeline(tmp_path / "in")
    dead = CollectSink()
    if runtime == "spark":
        job = SparkRuntime(str(tmp_path / "ck"), spark=spark, dead_letter_sink=dead,  # type: ignore[arg-type]
                           end_of_input=True).execute(env)
        assert str(job.accounting()) == "9 rows in = 4 windowed + 0 late + 5 dead-lettered"
    else:
        ReferenceRuntime(dead_letter_sink=dead).execute(env)  # type: ignore[arg-type]
    assert sorted((r.key, r.window_start, r.value) for r in sums.results) == [
        ("a", 0, Decimal("10.60")), ("a", 5000, Decimal("0.01")), ("b", 0, Decimal("100.00"))]
    assert sorted((d["offset"], d["reason"]) for d in dead.results) == [
        (offset, f"record does not parse: {reason!r}") for offset, reason in DEAD]


@pytest.mark.parametrize("sink", ["rows", "dataframe"])
def test_a_float_timestamp_beyond_the_64_bit_range_has_the_reference_runtime_s_reason_on_the_native_path(
        spark: Any, tmp_path: Path, sink: str) -> None:
    """The native path casts a DOUBLE timestamp field to BIGINT with TRY_CAST, and a finite value
    beyond its range became null: "missing or non-numeric timestamp", where the reference runtime and
    the other paths say the value is out of the 64-bit millisecond range (a user probe, session 56)."""
    from lowwater.api import StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.sinks import ForeachDataFrameSink
    from lowwater.spark.sources import BatchFilesSource

    BatchFilesSource.write(tmp_path / "in", [[{"key": "a", "ts": 1e19, "v": 1}, {"key": "a", "ts": -9.3e18, "v": 1},
                                              {"key": "a", "ts": 5.5, "v": 2}, {"key": "a", "ts": 1.25e300, "v": 3}]])
    runs = {}
    for runtime in ("reference", "native"):
        env = StreamExecutionEnvironment()
        fields = [("key", "STRING"), ("ts", "DOUBLE"), ("v", "BIGINT")]
        sums = (env.from_source(BatchFilesSource(tmp_path / "in", fields, [0]),
                                WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
                .key_by("key").window(TumblingEventTimeWindows.of(1000)).sum("v")).collect()
        got: list[dict[str, Any]] = []
        dead: Any = CollectSink() if sink == "rows" or runtime == "reference" else \
            ForeachDataFrameSink(lambda df, _, got=got: got.extend(r.asDict() for r in df.collect()))
        if runtime == "native":
            job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path="native", dead_letter_sink=dead,
                               end_of_input=True).execute(env)
            assert job.path == "native"
        else:
            ReferenceRuntime(dead_letter_sink=dead).execute(env)
        letters = dead.results if isinstance(dead, CollectSink) else got
        runs[runtime] = ([(r.window_start, r.value) for r in sums.results],
                         sorted((d["offset"], d["reason"]) for d in letters))
    assert runs["native"] == runs["reference"] == ([(0, 2)], [
        (0, "timestamp out of the 64-bit millisecond range (ts): 1e+19"),
        (1, "timestamp out of the 64-bit millisecond range (ts): -9.3e+18"),
        (3, "timestamp out of the 64-bit millisecond range (ts): 1.25e+300")])
