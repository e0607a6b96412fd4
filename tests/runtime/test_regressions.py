"""Regressions for bugs found while testing the reference runtime."""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.api import CollectionSource, StreamExecutionEnvironment
from lowwater.core.clock import ManualClock
from lowwater.core.errors import UserFunctionError
from lowwater.core.time import MAX_TIMESTAMP, to_millis
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows

BY_TS = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")


@pytest.mark.parametrize(("text", "ms"), [("16.1 s", 16_100), ("1.15 h", 4_140_000),
                                           ("9007199254740993", 9_007_199_254_740_993)])
def test_decimal_durations_are_exact(text: str, ms: int) -> None:
    assert to_millis(text) == ms


def test_a_finished_source_no_longer_holds_back_a_union() -> None:
    env = StreamExecutionEnvironment()
    a = env.from_source(CollectionSource([[{"key": "a", "ts": 1000, "value": 1}]]), BY_TS)
    b = env.from_source(CollectionSource([
        [{"key": "a", "ts": 2000, "value": 2}], [{"key": "a", "ts": 15000, "value": 4}],
        [{"key": "a", "ts": 25000, "value": 8}],
    ]), BY_TS)
    sink = a.union(b).key_by("key").window(TumblingEventTimeWindows.of(10000)).sum("value").collect()
    job = env.execute(clock=ManualClock(0))
    # Flink: a source that finishes emits MAX, so the union follows the other source alone
    assert job.combined_watermarks() == [999, 14999, 24999, MAX_TIMESTAMP]
    assert {b: [(r.window_start, r.value) for r in rows] for b, rows in sink.by_batch.items() if rows} == {
        1: [(0, 3)], 2: [(10000, 4)], 3: [(20000, 8)],
    }


def test_a_failing_window_function_names_itself_and_the_record() -> None:
    def boom(key: Any, ctx: Any, elements: Any) -> Any:
        raise RuntimeError("window fn bug")

    env = StreamExecutionEnvironment()
    s = env.from_source(CollectionSource([[{"key": "a", "ts": 1, "value": 1}]]), BY_TS)
    s.key_by("key").window(TumblingEventTimeWindows.of(10)).process(boom).collect()
    with pytest.raises(UserFunctionError, match="window function") as info:
        env.execute(clock=ManualClock(0))
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_failing_reduce_names_the_partition_and_offset() -> None:
    env = StreamExecutionEnvironment()
    s = env.from_source(CollectionSource([[{"key": "a", "ts": 1, "value": 1}, {"key": "a", "ts": 2, "value": 2}]]),
                        BY_TS)
    s.key_by("key").window(TumblingEventTimeWindows.of(10)).reduce(lambda x, y: x["nope"]).collect()
    with pytest.raises(UserFunctionError) as info:
        env.execute(clock=ManualClock(0))
    assert info.value.partition == 0 and info.value.offset == 1


@pytest.mark.parametrize("by", ["field", "function", "tuple"])
def test_a_nan_key_is_one_key_and_negative_zero_is_zero(by: str) -> None:
    """A NaN is not equal to itself: each record's NaN was a key of its own (a window and a result
    per record), where Flink's ``Double.equals`` and Spark's grouping (the native path) make it one
    key. ``-0.0`` and ``0.0`` are one key ``0.0``, as Spark's grouping makes them."""
    values = [float("nan"), -0.0, 0.0, float("nan"), 1.5, -0.0, float("nan")]
    env = StreamExecutionEnvironment()
    s = env.from_source(CollectionSource([[{"k": k, "ts": i, "value": 1} for i, k in enumerate(values)]]), BY_TS)
    key: Any = {"field": "k", "function": lambda e: e["k"], "tuple": lambda e: ("x", (e["k"],))}[by]
    sink = s.key_by(key).window(TumblingEventTimeWindows.of(1000)).sum("value").collect()
    env.execute(clock=ManualClock(0))
    got = sorted((repr(r.key), r.value) for r in sink.results)
    shown = {"field": repr, "function": repr, "tuple": lambda v: repr(("x", (v,)))}[by]
    assert got == sorted([(shown(float("nan")), 3), (shown(0.0), 3), (shown(1.5), 1)])


@pytest.mark.parametrize("order", [[1.0, float("nan"), 2.0], [float("nan"), 2.0, 1.0], [2.0, 1.0, float("nan")]])
def test_a_nan_value_is_the_max_and_never_the_min_wherever_it_comes(order: list[float]) -> None:
    """Java's ``Double.compareTo`` (Flink's aggregators) and Spark's ``max``/``min`` (the native
    path) put NaN above every number; Python's ``>`` is False both ways, so a NaN was the max only
    when it came first, and the min then too."""
    from lowwater.core.windows.aggregations import Max, Min

    got = {}
    for agg in (Max("v"), Min("v")):
        acc = agg.create_accumulator()
        for v in order:
            acc = agg.add({"v": v}, acc)
        halves = [agg.create_accumulator(), agg.create_accumulator()]
        for i, v in enumerate(order):
            halves[i % 2] = agg.add({"v": v}, halves[i % 2])
        merged = agg.merge(halves[0], halves[1])
        got[agg.name] = (repr(agg.get_result(acc)), repr(agg.get_result(merged)))
    assert got == {"max": ("nan", "nan"), "min": ("1.0", "1.0")}


def test_a_processing_time_timers_outputs_carry_no_event_time_and_an_event_time_timers_carry_its() -> None:
    """Flink's KeyedProcessOperator erases the timestamp of what a processing-time timer emits; an
    event-time timer stamps its outputs with its time. lowwater stamped both with the timer's time,
    so an event-time window downstream grouped the processing-time timer's outputs by the wall clock
    (a user probe, session 58). Without a timestamp they are dead letters there, counted."""
    from lowwater.api import KeyedProcessFunction
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows

    class Ping(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 10)
            ctx.timer_service().register_event_time_timer(value["ts"] + 500)
            yield {"k": value["k"], "what": "element"}

        def on_timer(self, t: int, ctx: Any) -> Any:
            assert ctx.timestamp() == t  # the timer's time, in either domain
            yield {"k": ctx.get_current_key(), "what": f"{ctx.time_domain().name.lower()}@{t}"}

    env = StreamExecutionEnvironment()
    source = CollectionSource([[{"k": "a", "ts": 1000}], [{"k": "a", "ts": 12_000}], []],
                              processing_times_ms=[50_000, 60_000, 70_000])
    windows = (env.from_source(source, WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts"))
               .key_by("k").process(Ping()).key_by("k").window(TumblingEventTimeWindows.of(10_000))
               .process(lambda key, ctx, elements: [(ctx.window.start, sorted(e["what"] for e in elements))])
               .collect())
    result = env.execute()
    assert sorted(windows.results) == [(0, ["element", "event_time@1500"]), (10_000, ["element", "event_time@12500"])]
    dead = sorted(d["record"]["what"] for d in result.dead_letters)
    assert dead == ["processing_time@50010", "processing_time@60010"]
