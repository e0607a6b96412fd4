"""A user's trigger written to PyFlink's ``Trigger`` API: its context's ``get_current_watermark``
and ``get_current_processing_time``, and value and list state through ``get_partitioned_state``.
Until session 58 the context had lowwater's names only, and took every descriptor as a reducing
one, so such a trigger failed with an ``AttributeError`` naming lowwater's internals (a user probe)."""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.api import (
    CollectionSource,
    ListStateDescriptor,
    MapStateDescriptor,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
)
from lowwater.core.errors import UserFunctionError
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.core.windows.trigger import Trigger, TriggerResult

ELEMENTS = [{"k": "a", "ts": 1000 + i * 100, "v": i} for i in range(5)]


class _AtEnd(Trigger[Any]):
    """Fires at the window's end; subclasses add an early firing."""

    def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window: Any, ctx: Any) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())


class EveryTwo(_AtEnd):
    """PyFlink style: a count in a ValueState, a firing every two elements and at the end."""

    count = ValueStateDescriptor("count", None)

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        ctx.register_event_time_timer(window.max_timestamp())
        state = ctx.get_partitioned_state(self.count)
        n = (state.value() or 0) + 1
        if n == 2:
            state.clear()
            return TriggerResult.FIRE
        state.update(n)
        return TriggerResult.CONTINUE

    def clear(self, window: Any, ctx: Any) -> None:
        super().clear(window, ctx)
        ctx.get_partitioned_state(self.count).clear()


class OnAThreeAfterAnOne(_AtEnd):
    """Keeps the values seen in a ListState; fires when a 3 comes after a 1."""

    seen = ListStateDescriptor("seen", None)

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        ctx.register_event_time_timer(window.max_timestamp())
        state = ctx.get_partitioned_state(self.seen)
        state.add(element["v"])
        return TriggerResult.FIRE if element["v"] == 3 and 1 in state.get() else TriggerResult.CONTINUE


class LateFires(_AtEnd):
    """Compares with ``ctx.get_current_watermark()``, PyFlink's name."""

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        assert ctx.get_current_processing_time() == ctx.current_processing_time()
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE


class WithAMap(_AtEnd):
    def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
        ctx.get_partitioned_state(MapStateDescriptor("m", None, None))
        return TriggerResult.CONTINUE


def _sums(trigger: Trigger[Any], batches: list[list[dict[str, Any]]] | None = None) -> list[tuple[int, int]]:
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")
    sink = (env.from_source(CollectionSource(batches or [ELEMENTS]), strategy).key_by("k")
            .window(TumblingEventTimeWindows.of(10_000)).allowed_lateness(60_000).trigger(trigger).sum("v")
            .collect())
    env.execute()
    return [(r.value, r.fire_index) for r in sink.results]


def test_a_pyflink_trigger_counts_in_a_value_state() -> None:
    assert _sums(EveryTwo()) == [(1, 0), (6, 1), (10, 2)]  # after 0+1, after +2+3, and at the end


def test_a_pyflink_trigger_keeps_a_list_state() -> None:
    assert _sums(OnAThreeAfterAnOne()) == [(6, 0), (10, 1)]


def test_a_pyflink_trigger_reads_the_watermark_by_pyflinks_name() -> None:
    assert _sums(LateFires()) == [(10, 0)]
    # the watermark passes the window at 19999; the late element fires it again, on the element
    later = [ELEMENTS, [{"k": "a", "ts": 20_000, "v": 100}], [{"k": "a", "ts": 2000, "v": 7}]]
    assert _sums(LateFires(), later) == [(10, 0), (17, 1), (100, 0)]


def test_a_trigger_state_of_another_kind_is_refused_naming_the_kinds_it_may_be() -> None:
    says = ("get_partitioned_state takes a ReducingStateDescriptor, a ValueStateDescriptor or a "
            "ListStateDescriptor, got MapStateDescriptor")
    with pytest.raises(UserFunctionError, match=says):
        _sums(WithAMap())
