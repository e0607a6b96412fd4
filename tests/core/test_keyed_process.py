"""The keyed process operator: Flink 2.3's timer rules, keyed state, outputs."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lowwater.core.clock import ManualClock
from lowwater.core.process import (
    Emitted,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeyedProcessOperator,
    ListStateDescriptor,
    MapStateDescriptor,
    SideEmitted,
    TimeDomain,
    ValueStateDescriptor,
)
from lowwater.core.time import timer_time


class TimerAt(KeyedProcessFunction):
    """Registers an event-time timer at the element's value; reports firings."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(value)
        return None

    def on_timer(self, timestamp: int, ctx: Any, *out: Any) -> Any:
        yield (timestamp, ctx.get_current_key(), ctx.timer_service().current_watermark(), ctx.time_domain())


def _fired(events: list[Any]) -> list[Any]:
    return [e.value for e in events if isinstance(e, Emitted)]


def _op(fn: Any, inputs: int = 1) -> KeyedProcessOperator:
    return KeyedProcessOperator(fn, ManualClock(0), inputs=inputs)


def test_a_timer_at_t_fires_when_the_watermark_reaches_t_not_before() -> None:
    op = _op(TimerAt())
    op.process_element("a", 1000, 0)
    assert _fired(op.advance_watermark(999)) == []
    assert _fired(op.advance_watermark(1000)) == [(1000, "a", 1000, TimeDomain.EVENT_TIME)]


def test_the_same_key_and_time_register_one_timer() -> None:
    op = _op(TimerAt())
    op.process_element("a", 1000, 0)
    op.process_element("a", 1000, 0)
    op.process_element("b", 1000, 0)
    assert sorted(_fired(op.advance_watermark(5000))) == [
        (1000, "a", 5000, TimeDomain.EVENT_TIME), (1000, "b", 5000, TimeDomain.EVENT_TIME)]


def test_a_timer_registered_at_or_behind_the_watermark_fires_at_the_next_advance() -> None:
    op = _op(TimerAt())
    op.advance_watermark(5000)
    op.process_element("a", 4000, 0)
    op.process_element("b", 5000, 0)
    assert op.pending_timers() == 2
    assert _fired(op.advance_watermark(5001)) == [
        (4000, "a", 5001, TimeDomain.EVENT_TIME), (5000, "b", 5001, TimeDomain.EVENT_TIME)]


def test_timers_fire_in_timestamp_order_with_the_watermark_that_fired_them() -> None:
    op = _op(TimerAt())
    for key, t in [("a", 3000), ("b", 1000), ("c", 2000)]:
        op.process_element(key, t, 0)
    assert [f[:3] for f in _fired(op.advance_watermark(9000))] == [
        (1000, "b", 9000), (2000, "c", 9000), (3000, "a", 9000)]


def test_a_deleted_timer_does_not_fire() -> None:
    class Delete(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_event_time_timer(1000)
            if value == "cancel":
                ctx.timer_service().delete_event_time_timer(1000)

        def on_timer(self, timestamp: int, ctx: Any, *out: Any) -> Any:
            yield ctx.get_current_key()

    op = _op(Delete())
    op.process_element("a", "keep", 0)
    op.process_element("b", "cancel", 0)
    assert _fired(op.advance_watermark(2000)) == ["a"]


def test_processing_time_timers_fire_when_the_clock_reaches_them() -> None:
    class Later(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 100)

        def on_timer(self, timestamp: int, ctx: Any, *out: Any) -> Any:
            yield (timestamp, ctx.time_domain())

    clock = ManualClock(1000)
    op = KeyedProcessOperator(Later(), clock)
    op.process_element("a", 1, None)
    assert _fired(op.advance_processing_time(1099)) == []
    assert _fired(op.advance_processing_time(1100)) == [(1100, TimeDomain.PROCESSING_TIME)]


def test_value_list_and_map_state_are_kept_per_key() -> None:
    class Stateful(KeyedProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.count = runtime_context.get_state(ValueStateDescriptor("count"))
            self.seen = runtime_context.get_list_state(ListStateDescriptor("seen"))
            self.by = self.get_runtime_context().get_map_state(MapStateDescriptor("by", None, None))

        def process_element(self, value: Any, ctx: Any, out: Any) -> None:
            self.count.update((self.count.value() or 0) + 1)
            self.seen.add(value)
            self.by.put(value, self.by.get(value) or 0)
            self.by.put(value, self.by.get(value) + 1)
            out.collect((ctx.get_current_key(), self.count.value(), self.seen.get(), sorted(self.by.items())))

    op = _op(Stateful())
    op.process_element("a", "x", 0)
    op.process_element("b", "y", 0)
    assert _fired(op.process_element("a", "x", 0)) == [("a", 2, ["x", "x"], [("x", 2)])]
    assert _fired(op.process_element("b", "z", 0)) == [("b", 2, ["y", "z"], [("y", 1), ("z", 1)])]


def test_cleared_state_reads_as_empty() -> None:
    class Clear(KeyedProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.v = runtime_context.get_state(ValueStateDescriptor("v"))

        def process_element(self, value: Any, ctx: Any) -> Any:
            if value == "clear":
                self.v.clear()
            else:
                self.v.update(value)
            yield self.v.value()

    op = _op(Clear())
    assert _fired(op.process_element("a", 5, 0)) == [5]
    assert _fired(op.process_element("a", "clear", 0)) == [None]
    assert len(op.state) == 0  # type: ignore[arg-type]


def test_outputs_carry_the_element_or_timer_timestamp_and_side_outputs_their_tag() -> None:
    class Sides(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            ctx.output("side", value * 10)
            ctx.timer_service().register_event_time_timer(50)
            yield value

        def on_timer(self, timestamp: int, ctx: Any, *out: Any) -> Any:
            yield "timer"

    op = _op(Sides())
    assert op.process_element("a", 1, 7) == [SideEmitted("side", 10, 7), Emitted(1, 7)]
    assert op.advance_watermark(60) == [Emitted("timer", 50)]


def test_a_co_process_function_gets_each_input_in_its_own_method_with_shared_state() -> None:
    class Join(KeyedCoProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.left = runtime_context.get_state(ValueStateDescriptor("left"))

        def process_element1(self, value: Any, ctx: Any) -> Any:
            self.left.update(value)
            return []

        def process_element2(self, value: Any, ctx: Any) -> Any:
            yield (ctx.get_current_key(), self.left.value(), value)

    op = _op(Join(), inputs=2)
    op.process_element("k", "L", 0, input_index=0)
    assert _fired(op.process_element("k", "R", 0, input_index=1)) == [("k", "L", "R")]
    assert _fired(op.process_element("other", "R", 0, input_index=1)) == [("other", None, "R")]


@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 100)), max_size=30),
       st.lists(st.integers(0, 120), max_size=10))
def test_every_registered_timer_fires_exactly_once_after_the_watermark_passes_it(
    timers: list[tuple[str, int]], watermarks: list[int]
) -> None:
    op = _op(TimerAt())
    fired: list[Any] = []
    for key, t in timers:
        op.process_element(key, t, 0)
    for w in [*watermarks, 200]:
        before = op.current_watermark
        batch = _fired(op.advance_watermark(w))
        assert all(f[0] <= op.current_watermark for f in batch)
        assert [f[0] for f in batch] == sorted(f[0] for f in batch)
        assert all(f[0] > before for f in batch) or before < 0
        fired += batch
    assert sorted((f[1], f[0]) for f in fired) == sorted(set(timers))


def test_yielding_a_tag_and_a_value_goes_to_the_side_output_when_the_runtime_knows_its_tags() -> None:
    class Tagged(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield "late", value
            yield ("not", "a tag")

    op = KeyedProcessOperator(Tagged(), ManualClock(0), is_tag=lambda x: x == "late")
    assert op.process_element("k", 1, 5) == [SideEmitted("late", 1, 5), Emitted(("not", "a tag"), 5)]


@pytest.mark.parametrize(("time", "error"), [
    (1500.7, "a timer's time must be an integer of epoch milliseconds, got 1500.7 (float)"),
    ("1500", "a timer's time must be an integer of epoch milliseconds, got '1500' (str)"),
    (True, "a timer's time must be an integer of epoch milliseconds, got True (bool)"),
    (2**63 + 5, "a timer's time must be within the 64-bit range of epoch milliseconds [-2**63, 2**63 - 1], "
                "got 9223372036854775813"),
    (-(2**63) - 10, "a timer's time must be within the 64-bit range"),
])
def test_a_timer_time_that_is_no_64_bit_integer_is_refused(time: Any, error: str) -> None:
    """A float was truncated, a string or a bool taken as a number, a time past Long.MAX_VALUE kept
    as a timer that never fired (not even at the end of input), and one below Long.MIN_VALUE fired
    with a timestamp no record has. (The node names the function: UserFunctionError.)"""
    op = _op(TimerAt())
    with pytest.raises((TypeError, ValueError), match=re.escape(error)):
        op.process_element("a", time, 1000, 0)
    assert op.pending_timers() == 0


def test_a_numpy_integer_is_a_timer_time() -> None:
    import numpy as np

    assert timer_time(np.int64(1_500)) == 1_500 and type(timer_time(np.int64(1_500))) is int
