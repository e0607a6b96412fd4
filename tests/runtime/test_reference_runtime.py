"""The reference runtime's micro-batch rules (DESIGN §1, "How micro-batches map onto this").

* Periodic emission happens at the end of each batch: every partition's generator emits
  first, then the partitions are combined once.
* Elements of batch ``k`` are judged against the watermark combined at the end of ``k-1``.
* Punctuated watermarks found in a batch take effect at its end (the largest per partition).
* Per batch, ``JobResult`` reports the combined and per-partition watermarks, idle
  partitions and late rows (in total and per partition).
"""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.api import CollectionSource, CollectSink, OutputTag, StreamExecutionEnvironment
from lowwater.core.clock import ManualClock
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows, WindowResult
from lowwater.runtime import JobResult, ReferenceRuntime

BY_TS = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(
    lambda e, prev: e["ts"]
)


def _ev(ts: int, value: int = 1, p: int = 0, key: str = "a", **extra: Any) -> dict[str, Any]:
    return {"key": key, "ts": ts, "value": value, "p": p, **extra}


def _pipeline(
    batches: list[list[dict[str, Any]]],
    strategy: WatermarkStrategy[Any] = BY_TS,
    partitions: int = 1,
    size: int = 10_000,
    **source_kw: Any,
) -> tuple[StreamExecutionEnvironment, CollectSink, CollectSink]:
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    src = CollectionSource(batches, partitions=partitions, partition_of="p", **source_kw)
    result = (
        env.from_source(src, strategy)
        .key_by("key")
        .window(TumblingEventTimeWindows.of(size))
        .side_output_late_data(late)
        .sum("value")
    )
    return env, result.collect(), result.get_side_output(late).collect()


def _metrics(job: JobResult) -> list[dict[str, Any]]:
    return [next(iter(b.windows.values())) for b in job.batches]


def test_elements_of_a_batch_are_judged_against_the_previous_batchs_watermark() -> None:
    env, out, late = _pipeline([[_ev(20_000), _ev(1_000, 2)], [_ev(3_000, 4)]])
    ReferenceRuntime(clock=ManualClock(0)).execute(env)
    # 1000 arrives in the same batch as 20000: the watermark is still MIN, so it is on time.
    # 3000 arrives after the batch-0 watermark 19999: late.
    assert [e["ts"] for e in late.results] == [3_000]
    assert out.by_batch[0] == [WindowResult("a", 0, 10_000, 2, 0)]


def test_the_same_input_one_element_per_batch_is_judged_element_by_element() -> None:
    env, _, late = _pipeline([[_ev(20_000)], [_ev(1_000, 2)], [_ev(3_000, 4)]])
    ReferenceRuntime(clock=ManualClock(0)).execute(env)
    assert [e["ts"] for e in late.results] == [1_000, 3_000]


def test_all_partitions_emit_before_one_combine_per_batch() -> None:
    # Batch 1: p0 jumps to 30000 and p1 to 15000. Combining after each partition would
    # pass 29999 or an intermediate value; one combine gives only min = 14999.
    env, out, _ = _pipeline(
        [[_ev(1_000, p=0), _ev(1_000, p=1)], [_ev(30_000, p=0), _ev(15_000, p=1)]], partitions=2
    )
    job = ReferenceRuntime(clock=ManualClock(0)).execute(env)
    assert job.combined_watermarks() == [999, 14_999, MAX_TIMESTAMP]
    assert out.by_batch[1] == [WindowResult("a", 0, 10_000, 2, 0)]


def test_punctuated_watermarks_take_effect_at_the_end_of_the_batch() -> None:
    strategy = WatermarkStrategy.for_punctuated(
        lambda e, ts: ts if e.get("mark") else None
    ).with_timestamp_assigner(lambda e, prev: e["ts"])
    env, out, late = _pipeline(
        [[_ev(12_000, mark=True), _ev(5_000, 2), _ev(11_000, 4, mark=True)], [_ev(6_000, 8)]],
        strategy=strategy,
    )
    job = ReferenceRuntime(clock=ManualClock(0)).execute(env)
    # 5000 is on time inside the batch; the batch-end watermark is the largest mark, 12000
    assert job.combined_watermarks()[0] == 12_000
    assert out.by_batch[0] == [WindowResult("a", 0, 10_000, 2, 0)]
    assert [e["ts"] for e in late.results] == [6_000]


def test_time_lag_watermarks_advance_in_empty_batches() -> None:
    env, out, _ = _pipeline(
        [[_ev(3_000)], [], []],
        strategy=WatermarkStrategy.for_time_lag(5_000).with_timestamp_assigner(
            lambda e, prev: e["ts"]
        ),
        processing_times_ms=[6_000, 9_000, 15_000],
    )
    job = ReferenceRuntime().execute(env)
    assert job.combined_watermarks()[:3] == [1_000, 4_000, 10_000]
    assert out.by_batch[2] == [WindowResult("a", 0, 10_000, 1, 0)]


def test_batch_metrics_report_watermarks_idleness_and_late_rows_per_partition() -> None:
    env, _, late = _pipeline(
        [
            [_ev(10_000, p=0), _ev(20_000, p=1)],
            [_ev(1_000, p=0), _ev(2_000, p=1), _ev(3_000, p=1)],
            [_ev(25_000, p=1)],
            [_ev(26_000, p=1)],
        ],
        strategy=BY_TS.with_idleness(500),
        partitions=2,
        processing_times_ms=[0, 100, 200, 701],
    )
    job = ReferenceRuntime().execute(env)
    m = _metrics(job)
    assert [b.batch_id for b in job.batches] == [0, 1, 2, 3, 4]
    assert [b.processing_time_ms for b in job.batches][:4] == [0, 100, 200, 701]
    assert [b.rows_in for b in job.batches] == [2, 3, 1, 1, 0]
    assert [b.end_of_input for b in job.batches] == [False, False, False, False, True]
    assert m[0]["partition_watermarks"] == {"0": 9_999, "1": 19_999}
    assert m[0]["combined_watermark"] == 9_999
    # batch 1: all three elements are late against 9999 (windows [0, 10000) passed)
    assert m[1]["rows_late"] == 3
    assert {str(p): n for p, n in m[1]["rows_late_by_partition"].items()} == {"0": 1, "1": 2}
    assert len(late.results) == 3
    # p0 quiet from batch 2: timer starts at 200; at 701, 501 > 500 -> idle
    assert m[2]["idle_partitions"] == []
    assert m[3]["idle_partitions"] == ["0"]
    assert m[3]["combined_watermark"] == 25_999
    assert m[-1]["combined_watermark"] == MAX_TIMESTAMP
    assert m[-1]["open_windows"] == 0
    assert m[-1]["state_rows"] == 0
    assert m[-1]["windows_fired"] == 2  # [10000, 20000) and [20000, 30000)


def test_combined_watermark_metric_is_min_until_a_watermark_exists() -> None:
    env, _, _ = _pipeline([[_ev(1_000, p=0)]], partitions=2)
    job = ReferenceRuntime(clock=ManualClock(0)).execute(env)
    assert _metrics(job)[0]["combined_watermark"] == MIN_TIMESTAMP
    assert _metrics(job)[0]["partition_watermarks"]["1"] == MIN_TIMESTAMP


def test_max_batches_stops_early_without_an_end_of_input_watermark() -> None:
    env, out, _ = _pipeline([[_ev(1_000)], [_ev(2_000)], [_ev(3_000)]])
    job = ReferenceRuntime(clock=ManualClock(0), max_batches=2).execute(env)
    assert len(job.batches) == 2
    assert MAX_TIMESTAMP not in job.combined_watermarks()
    assert out.results == []


def test_end_of_input_fires_remaining_windows_in_a_final_batch() -> None:
    env, out, _ = _pipeline([[_ev(1_000)], [_ev(2_000)]])
    job = ReferenceRuntime(clock=ManualClock(0)).execute(env)
    assert job.batches[-1].end_of_input is True
    assert job.batches[-1].rows_in == 0
    assert out.by_batch[2] == [WindowResult("a", 0, 10_000, 2, 0)]


def test_combined_watermarks_needs_a_name_when_there_are_two_window_operators() -> None:
    env = StreamExecutionEnvironment()
    stream = env.from_source(CollectionSource([[_ev(1)]]), BY_TS).key_by("key")
    stream.window(TumblingEventTimeWindows.of(10)).sum("value").collect()
    stream.window(TumblingEventTimeWindows.of(20)).sum("value").collect()
    job = ReferenceRuntime(clock=ManualClock(0)).execute(env)
    assert len(job.watermark_history) == 2
    with pytest.raises(ValueError, match="name one"):
        job.combined_watermarks()
    for name in job.watermark_history:
        assert job.combined_watermarks(name) == [0, MAX_TIMESTAMP]


def test_operators_are_named_by_their_place_whatever_the_process_built_before() -> None:
    """The names key the metrics log's per-operator counts: a restarted job's lines must name the
    operators its checkpoint's older lines did. They held transformation ids, which count every
    transformation the process had made before."""

    def names() -> list[str]:
        env = StreamExecutionEnvironment()
        stream = env.from_source(CollectionSource([[_ev(1)]]), BY_TS).key_by("key")
        stream.window(TumblingEventTimeWindows.of(10)).sum("value").collect()
        stream.window(TumblingEventTimeWindows.of(20)).sum("value").name("twenties").collect()
        stream.window(TumblingEventTimeWindows.of(30)).sum("value").collect()
        return list(ReferenceRuntime(clock=ManualClock(0)).execute(env).watermark_history)

    first = names()
    assert names() == first == ["window aggregate#1", "twenties", "window aggregate#3"]


def test_a_collect_sink_replaces_a_replayed_batch() -> None:
    sink = CollectSink()
    sink.write_batch(0, [1, 2])
    sink.write_batch(1, [3])
    sink.write_batch(0, [9])
    assert sink.results == [9, 3]
    assert len(sink) == 2
