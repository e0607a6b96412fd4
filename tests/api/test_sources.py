"""Sources: collections with partitions and offsets, and the classic ``SourceFunction``.

A ``SourceFunction`` may supply event time itself (``collect_with_timestamp``,
``emit_watermark``) and mark its partition idle; each watermark or idle mark closes a
micro-batch, and a source's watermarks take effect at the end of the batch.
"""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.api import (
    CollectionSource,
    FunctionSource,
    OutputTag,
    SourceContext,
    SourceFunction,
    SourceIdle,
    SourceRecord,
    SourceWatermark,
    StreamExecutionEnvironment,
)
from lowwater.core.clock import ManualClock
from lowwater.core.errors import ConfigurationError
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows, WindowResult


def _metrics(job: Any) -> list[dict[str, Any]]:
    return [next(iter(b.windows.values())) for b in job.batches]


class TwoPartitions(SourceFunction):
    """Partition 0 carries data and watermarks; partition 1 idles or stays silent."""

    def __init__(self, idle: bool) -> None:
        self.idle = idle

    def run(self, ctx: SourceContext) -> None:
        if ctx.partition == 0:
            ctx.collect_with_timestamp({"key": "a", "value": 1}, 1_000)
            ctx.emit_watermark(1_000)
            ctx.collect_with_timestamp({"key": "a", "value": 2}, 12_000)
            ctx.emit_watermark(12_000)
        elif self.idle:
            ctx.mark_as_temporarily_idle()


def _run_source(fn: SourceFunction, parallelism: int) -> tuple[Any, Any]:
    env = StreamExecutionEnvironment()
    out = (
        env.add_source(fn, parallelism=parallelism)
        .key_by("key")
        .window(TumblingEventTimeWindows.of(10_000))
        .sum("value")
        .collect()
    )
    return out, env.execute(clock=ManualClock(0))


def test_a_source_function_supplies_timestamps_and_watermarks() -> None:
    out, job = _run_source(TwoPartitions(idle=False), parallelism=1)
    assert [m["combined_watermark"] for m in _metrics(job)][:2] == [1_000, 12_000]
    assert out.by_batch[1] == [WindowResult("a", 0, 10_000, 1, 0)]


def test_a_source_partition_marked_idle_does_not_hold_back_the_watermark() -> None:
    out, job = _run_source(TwoPartitions(idle=True), parallelism=2)
    metrics = _metrics(job)
    assert metrics[0]["idle_partitions"] == ["1"]
    assert metrics[1]["combined_watermark"] == 12_000
    assert out.by_batch[1] == [WindowResult("a", 0, 10_000, 1, 0)]


def test_a_silent_source_partition_holds_back_the_watermark() -> None:
    out, job = _run_source(TwoPartitions(idle=False), parallelism=2)
    assert all(not r for b, r in out.by_batch.items() if b < len(job.batches) - 1)
    assert sorted(r.window_start for r in out.results) == [0, 10_000]  # only at end of input


def test_source_watermarks_judge_lateness_when_no_assigner_overrides_them() -> None:
    class AheadOfData(SourceFunction):
        def run(self, ctx: SourceContext) -> None:
            ctx.collect_with_timestamp({"key": "a", "ts": 1_000, "value": 1}, 1_000)
            ctx.emit_watermark(50_000)
            ctx.collect_with_timestamp({"key": "a", "ts": 5_000, "value": 2}, 5_000)

    late = OutputTag("late")

    def pipeline(assign: bool) -> tuple[list[Any], list[Any]]:
        env = StreamExecutionEnvironment()
        stream = env.add_source(AheadOfData())
        if assign:
            stream = stream.assign_timestamps_and_watermarks(
                WatermarkStrategy.for_bounded_out_of_orderness(10_000).with_timestamp_assigner(
                    lambda e, prev: e["ts"]
                )
            )
        result = (
            stream.key_by("key")
            .window(TumblingEventTimeWindows.of(10_000))
            .side_output_late_data(late)
            .sum("value")
        )
        on_time, dropped = result.collect(), result.get_side_output(late).collect()
        env.execute(clock=ManualClock(0))
        return on_time.results, dropped.results

    on_time, dropped = pipeline(assign=False)
    assert [e["value"] for e in dropped] == [2]  # the source's 50000 passed [0, 10000)
    on_time, dropped = pipeline(assign=True)
    assert dropped == []  # the assigner replaced the source's watermarks
    assert on_time == [WindowResult("a", 0, 10_000, 3, 0)]


def test_source_context_closes_a_segment_at_each_watermark_and_idle_mark() -> None:
    ctx = SourceContext(partition=3)
    ctx.collect("x")
    ctx.collect_with_timestamp("y", 7)
    ctx.emit_watermark(5)
    ctx.mark_as_temporarily_idle()
    assert ctx._segments == [
        [SourceRecord("x", 3, 0, None), SourceRecord("y", 3, 1, 7), SourceWatermark(3, 5)],
        [SourceIdle(3)],
        [],
    ]


def test_function_source_gives_each_partition_its_own_function() -> None:
    class Counter(SourceFunction):
        def __init__(self) -> None:
            self.calls = 0

        def run(self, ctx: SourceContext) -> None:
            self.calls += 1
            ctx.collect(self.calls)

    fn = Counter()
    batches = list(FunctionSource(fn, parallelism=3).batches())
    assert [r.value for r in batches[0].items] == [1, 1, 1]
    assert [r.partition for r in batches[0].items] == [0, 1, 2]
    assert fn.calls == 0


def test_function_source_rejects_a_non_positive_parallelism() -> None:
    with pytest.raises(ConfigurationError) as e:
        FunctionSource(TwoPartitions(idle=False), parallelism=0)
    assert e.value.parameter == "parallelism"


# -- CollectionSource --------------------------------------------------------------------------
def test_collection_source_numbers_offsets_per_partition_in_arrival_order() -> None:
    src = CollectionSource([[{"p": 0}, {"p": 1}, {"p": 0}], [{"p": 1}]], partition_of="p")
    items = [i for b in src.batches() for i in b.items]
    assert [(i.partition, i.offset) for i in items] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert src.partitions() == [0, 1]


def test_collection_source_declares_partitions_even_without_data() -> None:
    assert CollectionSource([[]], partitions=3).partitions() == [0, 1, 2]


def test_collection_source_per_element_makes_one_batch_per_element() -> None:
    batches = list(CollectionSource.per_element(["a", "b", "c"]).batches())
    assert [[i.value for i in b.items] for b in batches] == [["a"], ["b"], ["c"]]


def test_collection_source_needs_one_processing_time_per_batch() -> None:
    with pytest.raises(ConfigurationError) as e:
        CollectionSource([[1], [2]], processing_times_ms=[5])
    assert e.value.parameter == "processing_times_ms"
    times = [
        b.processing_time_ms
        for b in CollectionSource([[1], [2]], processing_times_ms=[5, 9]).batches()
    ]
    assert times == [5, 9]


def test_collection_source_rejects_zero_partitions() -> None:
    with pytest.raises(ConfigurationError) as e:
        CollectionSource([[1]], partitions=0)
    assert e.value.parameter == "partitions"


def test_from_collection_is_one_micro_batch() -> None:
    env = StreamExecutionEnvironment()
    out = env.from_collection([1, 2, 3]).map(lambda x: x * 2).collect()
    job = env.execute(clock=ManualClock(0))
    assert out.by_batch[0] == [2, 4, 6]
    assert job.batches[0].rows_in == 3
