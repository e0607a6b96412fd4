"""An integer sum wraps like Java's ``long`` on every path (issue 10, item 2): the native
Spark paths wrap in SQL (tests/spark/test_scale.py); the core's ``Sum``, which the
reference runtime and the general path use, wraps the same way."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lowwater.api import StreamExecutionEnvironment
from lowwater.api.sources import CollectionSource
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import Sum, TumblingEventTimeWindows

LONG = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def _java_long(x: int) -> int:
    return ((x + 2**63) % 2**64) - 2**63


def test_two_amounts_near_the_top_of_the_range_wrap_like_a_java_long() -> None:
    s = Sum("v")
    acc = s.add({"v": 2**63 - 10}, s.add({"v": 2**63 - 10}, s.create_accumulator()))
    assert s.get_result(acc) == -20


@given(st.lists(LONG, min_size=1, max_size=20))
def test_an_integer_sum_is_the_java_long_sum_in_any_order_and_grouping(values: list[int]) -> None:
    s = Sum("v")
    acc = s.create_accumulator()
    for v in values:
        acc = s.add({"v": v}, acc)
    half = len(values) // 2
    left, right = s.create_accumulator(), s.create_accumulator()
    for v in values[:half]:
        left = s.add({"v": v}, left)
    for v in values[half:]:
        right = s.add({"v": v}, right)
    assert s.get_result(acc) == s.get_result(s.merge(left, right)) == _java_long(sum(values))
    assert -(2**63) <= s.get_result(acc) <= 2**63 - 1


def test_float_sums_do_not_wrap() -> None:
    s = Sum("v")
    assert s.get_result(s.add({"v": 1e19}, s.add({"v": 1e19}, s.create_accumulator()))) == 2e19


def test_the_reference_runtime_wraps_an_overflowing_window_sum() -> None:
    env = StreamExecutionEnvironment()
    rows = [{"k": "a", "ts": 1_000, "v": 2**63 - 10}, {"k": "a", "ts": 2_000, "v": 2**63 - 10}]
    sink = (env.from_source(CollectionSource([rows]),
                            WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
            .key_by("k").window(TumblingEventTimeWindows.of(10_000)).sum("v").collect())
    env.execute()
    assert [r.value for r in sink.results] == [-20]
