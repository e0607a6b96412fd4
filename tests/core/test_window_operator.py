"""The window operator (Flink's ``WindowOperator``) element by element.

Rules (DESIGN §1, Flink's ``WindowOperator`` and ``EventTimeTrigger``):
* the default trigger fires when ``watermark >= max_timestamp``;
* an element is late for a window when ``max_timestamp + allowed_lateness <= watermark``,
  and late for all its windows goes to ``LateElement`` (always counted);
* a late-but-allowed element re-fires its window at once with the full contents;
* state is gone once ``watermark >= max_timestamp + allowed_lateness``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from lowwater.core.clock import ManualClock
from lowwater.core.errors import ConfigurationError
from lowwater.core.time import MAX_TIMESTAMP
from lowwater.core.windows import (
    AggregateFunction,
    AggregatingContents,
    EventTimeTrigger,
    LateElement,
    ListContents,
    ProcessWindowFunction,
    PurgingTrigger,
    ReducingContents,
    SideOutput,
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    WindowContext,
    WindowFired,
    WindowOperator,
    WindowResult,
    builtin_aggregate,
)


def _sum_op(size: int = 10, lateness: int = 0, **kw: Any) -> WindowOperator:
    return WindowOperator(
        TumblingEventTimeWindows(size),
        AggregatingContents(builtin_aggregate("sum")),
        allowed_lateness_ms=lateness,
        **kw,
    )


def _results(events: Iterable[Any]) -> list[WindowResult]:
    return [o for e in events if isinstance(e, WindowFired) for o in e.outputs]


def _fired(events: Iterable[Any]) -> list[WindowFired]:
    return [e for e in events if isinstance(e, WindowFired)]


# -- on-time firing ----------------------------------------------------------------------------
def test_a_window_fires_when_the_watermark_reaches_its_max_timestamp() -> None:
    op = _sum_op()
    assert op.process_element("a", 1, 1) == []
    assert op.process_element("a", 5, 9) == []
    assert op.advance_watermark(8) == []
    events = op.advance_watermark(9)
    assert _results(events) == [WindowResult("a", 0, 10, 6, 0)]
    [fired] = _fired(events)
    assert fired.watermark == 9
    assert fired.cause == "watermark"
    assert fired.window == TimeWindow(0, 10)


def test_keys_have_separate_windows() -> None:
    op = _sum_op()
    op.process_element("a", 1, 1)
    op.process_element("b", 2, 2)
    op.process_element("a", 3, 3)
    results = _results(op.advance_watermark(100))
    assert sorted(results, key=lambda r: r.key) == [
        WindowResult("a", 0, 10, 4, 0),
        WindowResult("b", 0, 10, 2, 0),
    ]


def test_one_watermark_fires_every_window_it_passes() -> None:
    op = _sum_op()
    for ts in (1, 11, 21, 31):
        op.process_element("a", ts, ts)
    results = _results(op.advance_watermark(29))
    assert {(r.window_start, r.value) for r in results} == {(0, 1), (10, 11), (20, 21)}


def test_the_end_of_input_max_watermark_fires_every_remaining_window() -> None:
    op = _sum_op(lateness=1_000)
    op.process_element("a", 1, 5)
    op.process_element("b", 2, 10_000)
    events = op.advance_watermark(MAX_TIMESTAMP)
    assert {(r.key, r.window_start) for r in _results(events)} == {("a", 0), ("b", 10_000)}
    assert all(f.cause == "end_of_input" for f in _fired(events))
    assert op.open_windows() == 0
    assert op.state_size() == 0


def test_a_watermark_that_does_not_advance_does_nothing() -> None:
    op = _sum_op()
    op.process_element("a", 1, 1)
    op.advance_watermark(9)
    assert op.advance_watermark(9) == []
    assert op.advance_watermark(5) == []
    assert op.current_watermark == 9


# -- lateness ----------------------------------------------------------------------------------
def test_an_element_whose_window_the_watermark_has_passed_is_late_without_lateness() -> None:
    op = _sum_op()
    op.advance_watermark(9)
    events = op.process_element("a", 7, 3)
    assert events == [LateElement("a", 7, 3, 9, (TimeWindow(0, 10),))]  # the window that rejected it
    assert op.late_count == 1
    assert op.open_windows() == 0


def test_an_element_exactly_at_max_timestamp_plus_lateness_is_late() -> None:
    op = _sum_op(lateness=5)
    op.advance_watermark(14)  # window [0, 10): 9 + 5 <= 14
    assert [type(e) for e in op.process_element("a", 1, 0)] == [LateElement]
    op2 = _sum_op(lateness=5)
    op2.advance_watermark(13)
    assert [type(e) for e in op2.process_element("a", 1, 0)] == [WindowFired]


def test_late_elements_are_always_counted() -> None:
    op = _sum_op()
    op.advance_watermark(100)
    for ts in range(5):
        op.process_element("a", ts, ts)
    assert op.late_count == 5


def test_allowed_lateness_refires_with_full_contents_and_increasing_fire_index() -> None:
    op = _sum_op(lateness=5)
    op.process_element("a", 1, 1)
    op.process_element("a", 2, 9)
    assert _results(op.advance_watermark(9)) == [WindowResult("a", 0, 10, 3, 0)]
    late1 = op.process_element("a", 4, 4)
    assert _results(late1) == [WindowResult("a", 0, 10, 7, 1)]
    assert _fired(late1)[0].cause == "element"
    op.advance_watermark(13)
    assert _results(op.process_element("a", 8, 0)) == [WindowResult("a", 0, 10, 15, 2)]
    assert op.late_count == 0


def test_a_fired_window_is_not_fired_again_by_its_cleanup() -> None:
    op = _sum_op(lateness=5)
    op.process_element("a", 1, 1)
    assert len(_fired(op.advance_watermark(9))) == 1
    assert _fired(op.advance_watermark(100)) == []


def test_state_is_removed_once_the_watermark_passes_max_timestamp_plus_lateness() -> None:
    op = _sum_op(lateness=5)
    op.process_element("a", 1, 1)
    op.process_element("b", 1, 2)
    assert op.open_windows() == 2
    op.advance_watermark(9)
    assert op.open_windows() == 2  # fired but kept for late data
    op.advance_watermark(13)
    assert op.open_windows() == 2
    op.advance_watermark(14)
    assert op.open_windows() == 0
    assert op.state_size() == 0


def test_without_lateness_state_is_removed_when_the_window_fires() -> None:
    op = _sum_op()
    op.process_element("a", 1, 1)
    op.advance_watermark(9)
    assert op.open_windows() == 0
    assert op.state_size() == 0


def test_after_cleanup_an_element_for_the_window_is_late_not_a_new_window() -> None:
    op = _sum_op(lateness=5)
    op.process_element("a", 1, 1)
    op.advance_watermark(14)
    events = op.process_element("a", 100, 3)
    assert events == [LateElement("a", 100, 3, 14, (TimeWindow(0, 10),))]
    assert op.open_windows() == 0


def test_a_sliding_element_late_for_some_windows_only_goes_to_the_others() -> None:
    op = WindowOperator(
        SlidingEventTimeWindows(10, 5), AggregatingContents(builtin_aggregate("sum"))
    )
    op.advance_watermark(12)
    assert op.process_element("a", 7, 8) == []  # [0,10) is late, [5,15) is not
    assert op.late_count == 0
    assert _results(op.advance_watermark(14)) == [WindowResult("a", 5, 15, 7, 0)]


def test_a_sliding_element_late_for_all_its_windows_is_late() -> None:
    op = WindowOperator(
        SlidingEventTimeWindows(10, 5), AggregatingContents(builtin_aggregate("sum"))
    )
    op.advance_watermark(14)
    assert op.process_element("a", 7, 8) == [LateElement("a", 7, 8, 14, (TimeWindow(5, 15), TimeWindow(0, 10)))]


def test_purging_trigger_with_lateness_refires_with_only_the_new_contents() -> None:
    op = _sum_op(lateness=100, trigger=PurgingTrigger.of(EventTimeTrigger()))
    op.process_element("a", 1, 1)
    op.process_element("a", 2, 2)
    assert _results(op.advance_watermark(9)) == [WindowResult("a", 0, 10, 3, 0)]
    assert _results(op.process_element("a", 10, 3)) == [WindowResult("a", 0, 10, 10, 1)]


# -- functions ---------------------------------------------------------------------------------
class Describe(ProcessWindowFunction[Any, Any]):
    def __init__(self) -> None:
        self.cleared: list[Any] = []

    def process(self, key: Any, context: WindowContext, elements: Iterable[Any]) -> Iterable[Any]:
        items = list(elements)
        context.output("seen", len(items))
        yield (key, context.window, context.current_watermark(), items)

    def clear(self, context: WindowContext) -> None:
        self.cleared.append(context.window)


def test_a_process_window_function_sees_every_element_and_the_context() -> None:
    fn = Describe()
    op = WindowOperator(
        TumblingEventTimeWindows(10), ListContents(), window_function=fn, allowed_lateness_ms=3
    )
    for ts, v in ((3, "x"), (1, "y"), (8, "z")):
        op.process_element("k", v, ts)
    events = op.advance_watermark(11)
    [fired] = _fired(events)
    assert fired.outputs == (("k", TimeWindow(0, 10), 11, ["x", "y", "z"]),)
    assert fired.element_count == 3
    assert SideOutput("seen", 3) in events
    assert fn.cleared == []
    op.advance_watermark(12)
    assert fn.cleared == [TimeWindow(0, 10)]


def test_a_plain_function_after_an_aggregate_receives_the_aggregate() -> None:
    def fn(key: Any, ctx: Any, inputs: Iterable[Any]) -> list[Any]:
        return [(key, ctx.window.start, list(inputs))]

    op = WindowOperator(
        TumblingEventTimeWindows(10),
        AggregatingContents(builtin_aggregate("max")),
        window_function=fn,
    )
    op.process_element("k", 4, 1)
    op.process_element("k", 9, 2)
    op.process_element("k", 2, 3)
    [fired] = _fired(op.advance_watermark(9))
    assert fired.outputs == (("k", 0, [9]),)


class Concat(AggregateFunction[str, list[str], str]):
    def create_accumulator(self) -> list[str]:
        return []

    def add(self, value: str, accumulator: list[str]) -> list[str]:
        return [*accumulator, value]

    def get_result(self, accumulator: list[str]) -> str:
        return "".join(accumulator)

    def merge(self, a: list[str], b: list[str]) -> list[str]:
        return a + b


def test_a_user_defined_aggregate_function_accumulates_in_arrival_order() -> None:
    op = WindowOperator(TumblingEventTimeWindows(10), AggregatingContents(Concat()))
    for i, ch in enumerate("flink"):
        op.process_element("k", ch, 9 - i)
    assert _results(op.advance_watermark(9)) == [WindowResult("k", 0, 10, "flink", 0)]


def test_reduce_combines_elements_pairwise() -> None:
    op = WindowOperator(TumblingEventTimeWindows(10), ReducingContents(lambda a, b: a * b))
    for ts, v in ((1, 2), (2, 3), (3, 7)):
        op.process_element("k", v, ts)
    assert _results(op.advance_watermark(9)) == [WindowResult("k", 0, 10, 42, 0)]


@pytest.mark.parametrize(
    ("name", "values", "expected"),
    [
        ("sum", [3, 4, 5], 12),
        ("count", [3, 4, 5], 3),
        ("min", [3, 1, 5], 1),
        ("max", [3, 9, 5], 9),
        ("avg", [1, 2, 6], 3.0),
    ],
)
def test_builtin_aggregates(name: str, values: list[int], expected: Any) -> None:
    op = WindowOperator(
        TumblingEventTimeWindows(10), AggregatingContents(builtin_aggregate(name, "v"))
    )
    for i, v in enumerate(values):
        op.process_element("k", {"v": v}, i)
    [r] = _results(op.advance_watermark(9))
    assert r.value == expected
    assert type(r.value) is type(expected)


def test_avg_of_values_with_a_remainder_is_a_float() -> None:
    op = WindowOperator(TumblingEventTimeWindows(10), AggregatingContents(builtin_aggregate("avg")))
    op.process_element("k", 1, 1)
    op.process_element("k", 2, 2)
    assert _results(op.advance_watermark(9))[0].value == 1.5


def test_avg_of_decimals_is_the_float_of_their_exact_sum_divided() -> None:
    """The native path's avg of a DECIMAL column is CAST(exact sum AS DOUBLE) / n: every runtime gives
    that float (ten 0.1 summed as floats are 0.9999999999999999; as Decimals, 1.0)."""
    from decimal import Decimal

    op = WindowOperator(TumblingEventTimeWindows(10), AggregatingContents(builtin_aggregate("avg")))
    for i in range(10):
        op.process_element("k", Decimal("0.1"), i % 10)
    [r] = _results(op.advance_watermark(9))
    assert type(r.value) is float and r.value == 0.1 and sum([0.1] * 10) / 10 != 0.1


def test_avg_of_integers_is_the_float_of_their_exact_sum_divided() -> None:
    """As the native path's CAST(exact sum AS DOUBLE) / n (session 65; it summed DOUBLEs, and lost
    the last bits past 2**53). 2**54 + 3 divided by 3 exactly is ...662.33 (what ``int / int``
    gave); the float of the sum, 2**54 + 4, divided by 3 is ...663.33."""
    op = WindowOperator(TumblingEventTimeWindows(10), AggregatingContents(builtin_aggregate("avg")))
    for i, v in enumerate([2**54, 2, 1]):
        op.process_element("k", v, i)
    [r] = _results(op.advance_watermark(9))
    assert r.value == float(2**54 + 3) / 3 == 6004799503160663.0 != (2**54 + 3) / 3


@pytest.mark.parametrize("name", ["sum", "avg"])
def test_decimal_sums_are_exact_past_28_digits_in_a_window_and_across_merged_sessions(name: str) -> None:
    """A DECIMAL(38,18) sum is exact, as Flink's BigDecimal and the native path's DECIMAL sum are:
    Python's default context keeps 28 digits, and the reference runtime, the keyed and the general
    paths gave 12345678902.12345678901234568 here (a user probe, session 65). Two sessions that a
    third element merges add their accumulators (``merge``) exactly too."""
    from decimal import Decimal

    from lowwater.core.windows import EventTimeSessionWindows

    a, b = Decimal("12345678901.123456789012345678"), Decimal("1.000000000000000001")
    exact = Decimal("12345678902.123456789012345679")
    want = exact if name == "sum" else float(exact) / 2
    op = WindowOperator(TumblingEventTimeWindows(10), AggregatingContents(builtin_aggregate(name)))
    op.process_element("k", a, 1)
    op.process_element("k", b, 2)
    assert [r.value for r in _results(op.advance_watermark(9))] == [want]
    sessions = WindowOperator(EventTimeSessionWindows(10), AggregatingContents(builtin_aggregate(name)))
    sessions.process_element("k", a, 0)
    sessions.process_element("k", Decimal(0), 20)
    sessions.process_element("k", b, 10)  # bridges the two: their accumulators merge
    assert [r.value for r in _results(sessions.advance_watermark(100))] == [
        exact if name == "sum" else float(exact) / 3]


# -- configuration -----------------------------------------------------------------------------
def test_negative_allowed_lateness_is_rejected() -> None:
    with pytest.raises(ConfigurationError) as e:
        _sum_op(lateness=-1)
    assert e.value.parameter == "allowed_lateness"


def test_an_unknown_aggregate_name_is_rejected() -> None:
    with pytest.raises(ConfigurationError) as e:
        builtin_aggregate("median")
    assert e.value.parameter == "aggregate"
    assert "sum" in str(e.value)


def test_a_trigger_that_cannot_merge_is_rejected_for_sessions() -> None:
    from lowwater.core.windows import EventTimeSessionWindows, Trigger, TriggerResult

    class NoMerge(Trigger[Any]):
        def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
            return TriggerResult.CONTINUE

        def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
            return TriggerResult.CONTINUE

        def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
            return TriggerResult.CONTINUE

        def clear(self, window: Any, ctx: Any) -> None:
            pass

    with pytest.raises(ConfigurationError) as e:
        WindowOperator(EventTimeSessionWindows(10), ListContents(), trigger=NoMerge())
    assert e.value.parameter == "trigger"


def test_the_operator_uses_the_injected_clock() -> None:
    clock = ManualClock(1234)
    op = _sum_op(clock=clock)
    assert op.current_processing_time() == 1234
