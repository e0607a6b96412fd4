"""Pipelines built with the public API and run on the reference runtime.

Each test states a rule of DESIGN §1 or Flink's DataStream API and checks the outputs
(and, where the rule is about time, the micro-batch in which they appear).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from lowwater.api import (
    CollectionSource,
    CollectSink,
    DataStream,
    OutputTag,
    StreamExecutionEnvironment,
)
from lowwater.core.clock import ManualClock
from lowwater.core.errors import ConfigurationError, LowwaterError, PipelineError, UserFunctionError
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.time_characteristic import TimeCharacteristic
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows, WindowResult

BY_TS = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(
    lambda e, prev: e["ts"]
)


def _ev(key: str, ts: int, value: int = 1, p: int = 0) -> dict[str, Any]:
    return {"key": key, "ts": ts, "value": value, "p": p}


def _source(*batches: list[Any], partitions: int | list[int] = 1, **kw: Any) -> CollectionSource:
    return CollectionSource(list(batches), partitions=partitions, partition_of="p", **kw)


def _window_sum(stream: DataStream, size: int = 10_000, late: OutputTag | None = None) -> Any:
    w = stream.key_by("key").window(TumblingEventTimeWindows.of(size))
    if late is not None:
        w = w.side_output_late_data(late)
    return w.sum("value")


def _run(env: StreamExecutionEnvironment, **kw: Any) -> Any:
    kw.setdefault("clock", ManualClock(0))
    return env.execute(**kw)


def _rows(sink: CollectSink) -> list[tuple[Any, ...]]:
    return sorted(
        (r.key, r.window_start, r.window_end, r.value, r.fire_index) for r in sink.results
    )


def _window_metrics(job: Any) -> list[dict[str, Any]]:
    return [next(iter(b.windows.values())) for b in job.batches]


# -- stateless operators around the assigner ---------------------------------------------------
def test_map_before_assignment_shapes_what_the_assigner_sees() -> None:
    env = StreamExecutionEnvironment()
    raw = _source([("a", 1_000, 2), ("a", 3_000, 5), ("a", 12_000, 7)])
    stream = (
        env.from_source(raw)
        .map(lambda t: {"key": t[0], "ts": t[1], "value": t[2]})
        .assign_timestamps_and_watermarks(BY_TS)
    )
    out = _window_sum(stream).collect()
    _run(env)
    assert _rows(out) == [("a", 0, 10_000, 7, 0), ("a", 10_000, 20_000, 7, 0)]


def test_filter_after_assignment_still_lets_the_dropped_elements_move_the_watermark() -> None:
    env = StreamExecutionEnvironment()
    src = _source([_ev("a", 1_000, 1), _ev("x", 25_000, 99)])
    stream = (
        env.from_source(src)
        .assign_timestamps_and_watermarks(BY_TS)
        .filter(lambda e: e["key"] != "x")
    )
    out = _window_sum(stream).collect()
    _run(env)
    # the generator saw ts 25000 (watermark 24999), so [0, 10000) fires in batch 0
    assert out.by_batch[0] == [WindowResult("a", 0, 10_000, 1, 0)]
    assert _rows(out) == [("a", 0, 10_000, 1, 0)]


def test_filter_before_assignment_hides_the_elements_from_the_generator() -> None:
    env = StreamExecutionEnvironment()
    src = _source([_ev("a", 1_000, 1), _ev("x", 25_000, 99)])
    stream = (
        env.from_source(src)
        .filter(lambda e: e["key"] != "x")
        .assign_timestamps_and_watermarks(BY_TS)
    )
    out = _window_sum(stream).collect()
    _run(env)
    assert out.by_batch[0] == []  # watermark 999 only
    assert out.by_batch[1] == [WindowResult("a", 0, 10_000, 1, 0)]  # end of input


def test_flat_map_before_and_after_assignment() -> None:
    env = StreamExecutionEnvironment()
    src = _source([{"key": "a", "stamps": [1_000, 2_000]}, {"key": "b", "stamps": [15_000]}])
    stream = (
        env.from_source(src)
        .flat_map(lambda e: [{"key": e["key"], "ts": t, "value": 1} for t in e["stamps"]])
        .assign_timestamps_and_watermarks(BY_TS)
        .flat_map(lambda e: [e, {**e, "value": 10}] if e["key"] == "a" else [e])
    )
    out = _window_sum(stream).collect()
    _run(env)
    assert _rows(out) == [("a", 0, 10_000, 22, 0), ("b", 10_000, 20_000, 1, 0)]


def test_a_map_after_the_window_sees_the_window_results() -> None:
    env = StreamExecutionEnvironment()
    src = _source([_ev("a", 1, 3), _ev("a", 2, 4)])
    out = _window_sum(env.from_source(src, BY_TS)).map(lambda r: (r.key, r.value * 10)).collect()
    _run(env)
    assert out.results == [("a", 70)]


# -- timestamps --------------------------------------------------------------------------------
def test_without_an_assigner_the_source_timestamps_are_used() -> None:
    env = StreamExecutionEnvironment()
    src = _source([_ev("a", 0, 1), _ev("a", 0, 2)], timestamp_of=lambda e: 15_000 + e["value"])
    out = _window_sum(env.from_source(src, WatermarkStrategy.for_monotonous_timestamps())).collect()
    _run(env)
    assert _rows(out) == [("a", 10_000, 20_000, 3, 0)]


def test_an_assigner_overrides_the_source_timestamps() -> None:
    env = StreamExecutionEnvironment()
    src = _source([_ev("a", 1_000, 1), _ev("a", 2_000, 2)], timestamp_of=lambda e: 55_000)
    out = _window_sum(env.from_source(src).assign_timestamps_and_watermarks(BY_TS)).collect()
    _run(env)
    assert _rows(out) == [("a", 0, 10_000, 3, 0)]


def test_the_assigner_receives_the_source_timestamp_as_previous_timestamp() -> None:
    env = StreamExecutionEnvironment()
    src = _source([_ev("a", 0, 1)], timestamp_of=lambda e: 20_000)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda e, prev: prev + 5_000
    )
    out = _window_sum(env.from_source(src).assign_timestamps_and_watermarks(strategy)).collect()
    _run(env)
    assert _rows(out) == [("a", 20_000, 30_000, 1, 0)]


def test_a_second_assignment_overrides_the_first() -> None:
    env = StreamExecutionEnvironment()
    src = _source([_ev("a", 1_000, 1)])
    shifted = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda e, prev: e["ts"] + 30_000
    )
    stream = env.from_source(src, BY_TS).assign_timestamps_and_watermarks(shifted)
    out = _window_sum(stream).collect()
    _run(env)
    assert _rows(out) == [("a", 30_000, 40_000, 1, 0)]


def test_an_event_time_window_without_timestamps_says_what_to_call() -> None:
    env = StreamExecutionEnvironment()
    _window_sum(env.from_source(_source([_ev("a", 1)]))).collect()
    with pytest.raises(ConfigurationError, match="assign_timestamps_and_watermarks"):
        _run(env)


# -- combining inputs --------------------------------------------------------------------------
def test_union_takes_the_minimum_of_its_inputs_watermarks() -> None:
    env = StreamExecutionEnvironment()
    fast = env.from_source(_source([_ev("a", 1_000, 1)], [_ev("a", 30_000, 2)]), BY_TS, name="fast")
    slow = env.from_source(_source([_ev("a", 2_000, 4)], [_ev("a", 5_000, 8)]), BY_TS, name="slow")
    out = _window_sum(fast.union(slow)).collect()
    job = _run(env)
    combined = [m["combined_watermark"] for m in _window_metrics(job)]
    assert combined[:2] == [999, 4_999]  # min(1000-1, 2000-1), then min(29999, 4999)
    assert out.by_batch[1] == []  # [0, 10000) is held back by the slow input
    assert _rows(out) == [("a", 0, 10_000, 13, 0), ("a", 30_000, 40_000, 2, 0)]


def test_union_needs_another_stream() -> None:
    env = StreamExecutionEnvironment()
    with pytest.raises(PipelineError):
        env.from_source(_source([_ev("a", 1)])).union()


def test_connect_co_map_watermark_is_the_minimum_of_both_inputs() -> None:
    env = StreamExecutionEnvironment()
    first = env.from_source(_source([_ev("a", 1_000, 1)], [_ev("a", 30_000, 2)]), BY_TS)
    second = env.from_source(
        _source([{"k": "a", "t": 2_000}], [{"k": "a", "t": 4_000}]),
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
            lambda e, prev: e["t"]
        ),
    )
    merged = first.connect(second).map(
        lambda e: e, lambda e: {"key": e["k"], "ts": e["t"], "value": 100}
    )
    sink = CollectSink()
    merged.key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value").add_sink(sink)
    _run(env)
    assert sink.by_batch[1] == []  # second input is at 3999: [0, 10000) must wait
    assert sorted((r.window_start, r.value, r.fire_index) for r in sink.results) == [
        (0, 201, 0),
        (30_000, 2, 0),
    ]


def test_connect_accepts_an_object_with_map1_and_map2() -> None:
    class Tag:
        def map1(self, e: Any) -> Any:
            return ("first", e["value"])

        def map2(self, e: Any) -> Any:
            return ("second", e["value"])

    env = StreamExecutionEnvironment()
    a = env.from_source(_source([_ev("a", 1, 1)]), BY_TS)
    b = env.from_source(_source([_ev("b", 2, 2)]), BY_TS)
    out = a.connect(b).map(Tag()).collect()
    _run(env)
    assert sorted(out.results) == [("first", 1), ("second", 2)]


def test_connect_map_with_one_plain_function_is_rejected() -> None:
    env = StreamExecutionEnvironment()
    a = env.from_source(_source([_ev("a", 1)]), BY_TS)
    with pytest.raises(ConfigurationError):
        a.connect(a).map(lambda e: e)


def test_connect_flat_map_may_emit_zero_or_many_per_element() -> None:
    env = StreamExecutionEnvironment()
    a = env.from_source(_source([_ev("a", 1, 2)]), BY_TS)
    b = env.from_source(_source([_ev("b", 2, 3), _ev("b", 3, 0)]), BY_TS)
    out = (
        a.connect(b)
        .flat_map(lambda e: [e["value"]] * e["value"], lambda e: [-e["value"]])
        .collect()
    )
    _run(env)
    assert sorted(out.results) == [-3, 0, 2, 2]


def test_a_stream_unioned_with_itself_carries_every_element_twice() -> None:
    env = StreamExecutionEnvironment()
    stream = env.from_source(_source([_ev("a", 1, 1), _ev("a", 2, 2)]), BY_TS)
    out = _window_sum(stream.union(stream)).collect()
    _run(env)
    assert _rows(out) == [("a", 0, 10_000, 6, 0)]


# -- late data and chaining --------------------------------------------------------------------
def test_the_late_side_output_is_a_stream_that_can_be_transformed() -> None:
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    src = CollectionSource.per_element(
        [_ev("a", 15_000, 1), _ev("a", 3_000, 2), _ev("a", 4_000, 3)]
    )
    result = _window_sum(env.from_source(src, BY_TS), late=late)
    on_time = result.collect()
    late_values = (
        result.get_side_output(late)
        .filter(lambda e: e["value"] > 2)
        .map(lambda e: e["ts"])
        .collect()
    )
    everything_late = result.get_side_output(late).collect()
    _run(env)
    assert late_values.results == [4_000]
    assert [e["value"] for e in everything_late.results] == [2, 3]
    assert _rows(on_time) == [("a", 10_000, 20_000, 1, 0)]


def test_late_elements_are_dropped_but_counted_without_a_side_output() -> None:
    env = StreamExecutionEnvironment()
    src = CollectionSource.per_element([_ev("a", 15_000, 1), _ev("a", 3_000, 2)])
    out = _window_sum(env.from_source(src, BY_TS)).collect()
    job = _run(env)
    assert _rows(out) == [("a", 10_000, 20_000, 1, 0)]
    assert _window_metrics(job)[-1]["rows_late"] == 1


def test_window_results_are_emitted_before_the_watermark_that_fired_them() -> None:
    # A second window of the same size sees the first one's results (timestamp end - 1)
    # before the watermark that fired them; forwarded first, they would all be late.
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    src = CollectionSource.per_element(
        [_ev("a", 1_000, 1), _ev("b", 2_000, 2), _ev("a", 25_000, 4)]
    )
    first = _window_sum(env.from_source(src, BY_TS))
    second = (
        first.map(lambda r: {"key": "all", "value": r.value})
        .key_by("key")
        .window(TumblingEventTimeWindows.of(10_000))
        .side_output_late_data(late)
        .sum("value")
    )
    out = second.collect()
    lost = second.get_side_output(late).collect()
    _run(env)
    assert lost.results == []
    assert _rows(out) == [("all", 0, 10_000, 3, 0), ("all", 20_000, 30_000, 4, 0)]


def test_get_side_output_is_only_for_window_operators() -> None:
    env = StreamExecutionEnvironment()
    from lowwater.api import SingleOutputStream

    plain = env.from_source(_source([_ev("a", 1)]), BY_TS).map(lambda e: e)
    SingleOutputStream(env, plain.transformation).get_side_output(OutputTag("x")).collect()
    with pytest.raises(PipelineError):
        _run(env)


def test_count_window_fires_and_purges_every_n_elements_per_key() -> None:
    env = StreamExecutionEnvironment()
    src = _source([_ev("a", 1, 1), _ev("b", 1, 10), _ev("a", 1, 2), _ev("a", 1, 4), _ev("a", 1, 8)])
    out = env.from_source(src, BY_TS).key_by("key").count_window(2).sum("value").collect()
    _run(env)
    assert sorted((r.key, r.value) for r in out.results) == [("a", 3), ("a", 12)]


def test_function_and_foreach_batch_sinks_receive_every_row() -> None:
    from lowwater.api import ForeachBatchSink, FunctionSink

    env = StreamExecutionEnvironment()
    rows: list[Any] = []
    batches: list[tuple[int, list[Any]]] = []
    stream = env.from_source(_source([1, 2], [3]))
    stream.add_sink(FunctionSink(rows.append))
    stream.add_sink(ForeachBatchSink(lambda b, batch_id: batches.append((batch_id, b))))
    _run(env)
    assert rows == [1, 2, 3]
    assert batches[:2] == [(0, [1, 2]), (1, [3])]


# -- time characteristics ----------------------------------------------------------------------
def test_time_window_in_event_time_is_tumbling_or_sliding_by_event_time() -> None:
    env = StreamExecutionEnvironment()
    env.set_stream_time_characteristic(TimeCharacteristic.EVENT_TIME)
    stream = env.from_source(_source([_ev("a", 7_000, 1)]), BY_TS).key_by("key")
    tumbling = stream.time_window("10 s").sum("value").collect()
    sliding = stream.time_window("10 s", "5 s").sum("value").collect()
    _run(env)
    assert _rows(tumbling) == [("a", 0, 10_000, 1, 0)]
    assert _rows(sliding) == [("a", 0, 10_000, 1, 0), ("a", 5_000, 15_000, 1, 0)]


def test_processing_time_windows_follow_the_batch_clock() -> None:
    env = StreamExecutionEnvironment()
    env.set_stream_time_characteristic(TimeCharacteristic.PROCESSING_TIME)
    src = _source(
        [{"key": "a", "value": 1}],
        [{"key": "a", "value": 2}],
        [],
        [{"key": "a", "value": 4}],
        processing_times_ms=[1_000, 1_500, 1_998, 2_000],
    )
    out = env.from_source(src).key_by("key").time_window(1_000).sum("value").collect()
    _run(env)
    assert out.by_batch[2] == []  # the clock is at 1998: [1000, 2000) is still open
    assert out.by_batch[3] == [WindowResult("a", 1_000, 2_000, 3, 0)]


def test_processing_time_windows_ignore_event_timestamps() -> None:
    env = StreamExecutionEnvironment()
    env.set_stream_time_characteristic(TimeCharacteristic.PROCESSING_TIME)
    src = _source([_ev("a", 99_999_999, 1)], [], processing_times_ms=[500, 1_000])
    out = env.from_source(src, BY_TS).key_by("key").time_window(1_000).sum("value").collect()
    _run(env)
    assert _rows(out) == [("a", 0, 1_000, 1, 0)]


def test_ingestion_time_stamps_records_with_the_clock_and_ascending_watermarks() -> None:
    env = StreamExecutionEnvironment()
    env.set_stream_time_characteristic(TimeCharacteristic.INGESTION_TIME)
    src = _source(
        [{"key": "a", "value": 1}],
        [{"key": "a", "value": 2}],
        [{"key": "a", "value": 4}],
        processing_times_ms=[1_000, 5_000, 12_000],
    )
    out = env.from_source(src).key_by("key").time_window(10_000).sum("value").collect()
    job = _run(env)
    assert [m["combined_watermark"] for m in _window_metrics(job)][:3] == [999, 4_999, 11_999]
    assert out.by_batch[2] == [WindowResult("a", 0, 10_000, 3, 0)]
    assert _rows(out) == [("a", 0, 10_000, 3, 0), ("a", 10_000, 20_000, 4, 0)]


def test_the_time_characteristic_must_be_an_enum_member() -> None:
    with pytest.raises(ConfigurationError):
        StreamExecutionEnvironment().set_stream_time_characteristic("event_time")  # type: ignore[arg-type]


# -- partitions --------------------------------------------------------------------------------
def test_a_partition_appearing_mid_stream_holds_back_but_never_regresses_the_watermark() -> None:
    env = StreamExecutionEnvironment()
    src = _source(
        [_ev("a", 10_000, 1, p=0)],
        [_ev("a", 20_000, 2, p=0), _ev("a", 12_000, 4, p=1)],
        [_ev("a", 30_000, 8, p=0)],
        [_ev("a", 40_000, 16, p=0), _ev("a", 35_000, 32, p=1)],
        partitions=[0],
    )
    out = _window_sum(env.from_source(src, BY_TS)).collect()
    job = _run(env)
    metrics = _window_metrics(job)
    combined = [m["combined_watermark"] for m in metrics]
    assert combined[:4] == [9_999, 11_999, 11_999, 34_999]
    assert all(a <= b for a, b in pairwise(combined))
    assert set(metrics[0]["partition_watermarks"]) == {"0"}
    assert set(metrics[1]["partition_watermarks"]) == {"0", "1"}
    assert sorted(out.by_batch[3], key=lambda r: r.window_start) == [
        WindowResult("a", 10_000, 20_000, 5, 0),
        WindowResult("a", 20_000, 30_000, 2, 0),
    ]


def test_a_partition_with_no_data_holds_back_the_watermark() -> None:
    env = StreamExecutionEnvironment()
    out = _window_sum(
        env.from_source(_source([_ev("a", 50_000, 1)], partitions=2), BY_TS)
    ).collect()
    job = _run(env)
    assert _window_metrics(job)[0]["combined_watermark"] == MIN_TIMESTAMP
    assert out.by_batch[0] == []
    assert _rows(out) == [("a", 50_000, 60_000, 1, 0)]


def test_idle_partitions_release_the_watermark_in_the_reference_runtime() -> None:
    env = StreamExecutionEnvironment()
    strategy = BY_TS.with_idleness(1_000)
    src = _source(
        [_ev("a", 1_000, 1, p=0), _ev("b", 2_000, 2, p=1)],
        [_ev("a", 15_000, 4, p=0)],
        [_ev("a", 16_000, 8, p=0)],
        [_ev("a", 17_000, 16, p=0)],
        partitions=2,
        processing_times_ms=[0, 1_000, 2_000, 2_001],
    )
    out = _window_sum(env.from_source(src, strategy)).collect()
    job = _run(env)
    metrics = _window_metrics(job)
    # p1 quiet from batch 1: timer starts at 1000; 2000 - 1000 = 1000 is not > 1000; 2001 is.
    assert [m["idle_partitions"] for m in metrics[:4]] == [[], [], [], ["1"]]
    assert [m["combined_watermark"] for m in metrics[:4]] == [999, 1_999, 1_999, 16_999]
    assert sorted(out.by_batch[3], key=lambda r: r.key) == [
        WindowResult("a", 0, 10_000, 1, 0),
        WindowResult("b", 0, 10_000, 2, 0),
    ]


# -- errors ------------------------------------------------------------------------------------
def test_a_failing_map_raises_user_function_error_naming_function_partition_and_offset() -> None:
    def explode(e: dict[str, Any]) -> dict[str, Any]:
        if e["value"] == 3:
            raise ZeroDivisionError("boom")
        return e

    env = StreamExecutionEnvironment()
    src = _source(
        [_ev("a", 1, 1, p=1), _ev("a", 2, 2, p=0), _ev("a", 3, 2, p=1), _ev("a", 4, 3, p=1)],
        partitions=2,
    )
    env.from_source(src, BY_TS).map(explode).collect()
    with pytest.raises(UserFunctionError) as e:
        _run(env)
    msg = str(e.value)
    assert "explode" in msg
    assert "partition 1" in msg
    assert "offset 2" in msg
    assert "ZeroDivisionError" in msg
    assert (e.value.partition, e.value.offset) == (1, 2)


def test_a_failing_co_map_function_raises_user_function_error_with_its_position() -> None:
    def second(e: dict[str, Any]) -> Any:
        return e["missing"]

    env = StreamExecutionEnvironment()
    a = env.from_source(_source([_ev("a", 1, 1)]), BY_TS)
    b = env.from_source(_source([_ev("b", 1, 1, p=0), _ev("b", 2, 2, p=1)], partitions=2), BY_TS)
    a.connect(b).map(lambda e: e, second).collect()
    with pytest.raises(UserFunctionError) as e:
        _run(env)
    assert "second" in str(e.value)
    assert (e.value.partition, e.value.offset) == (0, 0)


def test_a_failing_key_selector_raises_user_function_error() -> None:
    env = StreamExecutionEnvironment()
    stream = env.from_source(_source([{"ts": 1, "value": 1}]), BY_TS)
    stream.key_by(lambda e: e["key"]).window(TumblingEventTimeWindows.of(10)).sum("value").collect()
    with pytest.raises(UserFunctionError) as e:
        _run(env)
    assert "key_by" in str(e.value) and "KeyError" in str(e.value)
    assert e.value.offset == 0


def test_a_failing_timestamp_assigner_raises_user_function_error() -> None:
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda e, prev: e["nope"]
    )
    env.from_source(_source([_ev("a", 1, p=0)]), strategy).collect()
    with pytest.raises(UserFunctionError) as e:
        _run(env)
    assert "KeyError" in str(e.value)
    assert (e.value.partition, e.value.offset) == (0, 0)


def test_a_failing_monotony_handler_fails_the_job() -> None:
    from lowwater.core.errors import MonotonyViolationError
    from lowwater.core.watermarks import AscendingTimestampExtractor, FailingHandler

    env = StreamExecutionEnvironment()
    extractor = AscendingTimestampExtractor(lambda e: e["ts"], FailingHandler())
    env.from_source(_source([_ev("a", 5_000), _ev("a", 3_000)])).assign_timestamps_and_watermarks(
        extractor
    ).collect()
    with pytest.raises(MonotonyViolationError, match=r"3000.*5000"):
        _run(env)


def test_execute_without_a_sink_says_how_to_add_one() -> None:
    env = StreamExecutionEnvironment()
    env.from_source(_source([_ev("a", 1)]), BY_TS)
    with pytest.raises(LowwaterError, match="collect"):
        env.execute()


def test_bad_api_arguments_name_the_parameter() -> None:
    env = StreamExecutionEnvironment()
    stream = env.from_source(_source([_ev("a", 1)]), BY_TS)
    windowed = stream.key_by("key").window(TumblingEventTimeWindows.of(10))
    cases = [
        (lambda: windowed.allowed_lateness(-1), "allowed_lateness"),
        (lambda: windowed.aggregate("median", field="value"), "aggregate"),
        (lambda: stream.key_by("key").window("tumbling"), "assigner"),  # type: ignore[arg-type]
        (lambda: stream.key_by(42), "key_selector"),  # type: ignore[arg-type]
        (lambda: stream.key_by("key").time_window(0), "size"),
        (lambda: stream.key_by("key").time_window(10, 20), "slide"),
        (lambda: env.from_source([1, 2]), "source"),  # type: ignore[arg-type]
        (lambda: stream.assign_timestamps_and_watermarks("bounded"), "strategy"),  # type: ignore[arg-type]
    ]
    for call, parameter in cases:
        with pytest.raises(ConfigurationError) as e:
            call()
        assert e.value.parameter == parameter


def test_windowed_stream_builders_return_new_objects() -> None:
    env = StreamExecutionEnvironment()
    windowed = (
        env.from_source(_source([_ev("a", 1)]), BY_TS)
        .key_by("key")
        .window(TumblingEventTimeWindows.of(10))
    )
    later = windowed.allowed_lateness("1 s")
    tagged = later.side_output_late_data(OutputTag("late"))
    assert windowed.allowed_lateness_ms == 0
    assert later.allowed_lateness_ms == 1_000
    assert later.late_tag is None
    assert tagged.late_tag == OutputTag("late")


def test_end_of_input_sends_max_through_the_window_operator() -> None:
    env = StreamExecutionEnvironment()
    _window_sum(env.from_source(_source([_ev("a", 1)]), BY_TS)).collect()
    job = _run(env)
    assert job.combined_watermarks()[-1] == MAX_TIMESTAMP
    assert job.batches[-1].end_of_input is True
