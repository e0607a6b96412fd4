"""A keyed operator's state taken out per key and put back into a fresh operator (the Spark
keyed path runs each bucket of keys this way) continues exactly as the operator it came from."""

from __future__ import annotations

import random
from typing import Any

from lowwater.core.clock import ManualClock
from lowwater.core.process import KeyedProcessFunction, KeyedProcessOperator, ValueStateDescriptor
from lowwater.core.time import MAX_TIMESTAMP
from lowwater.core.windows import (
    CountTrigger,
    EventTimeSessionWindows,
    ListContents,
    SlidingEventTimeWindows,
    WindowOperator,
)

_RNG = random.Random(7)
ELEMENTS = [(_RNG.choice("abcd"), max(0, t + _RNG.randint(-2_500, 500))) for t in range(0, 60_000, 900)]
"""Four keys, out of order by up to 2.5 s (some late for the watermarks below)."""


def _session() -> WindowOperator:
    return WindowOperator(EventTimeSessionWindows(2_000), ListContents(), allowed_lateness_ms=1_000)


def _sliding_count() -> WindowOperator:
    return WindowOperator(SlidingEventTimeWindows(6_000, 2_000), ListContents(), trigger=CountTrigger(2))


class _Timers(KeyedProcessFunction):  # type: ignore[type-arg]
    def open(self, ctx: Any) -> None:
        self.count = ctx.get_state(ValueStateDescriptor("count"))

    def process_element(self, value: Any, ctx: Any, out: Any) -> None:
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 3_000)

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        out.collect((ctx.get_current_key(), timestamp, self.count.value()))


def _process() -> KeyedProcessOperator:
    return KeyedProcessOperator(_Timers(), ManualClock(0))


def _run(make: Any, sliced: bool) -> list[Any]:
    op, out = make(), []
    for i, (key, ts) in enumerate(ELEMENTS):
        out.extend(op.process_element(key, (key, ts), ts))
        if i % 5 == 4:
            out.extend(op.advance_watermark(ts - 1_500))
            if sliced:
                slices = op.take_key_slices()
                assert op.take_key_slices() == {}  # the operator was left without keyed state
                watermark, op = op.current_watermark, make()
                op.current_watermark = watermark
                for data, _, _ in slices.values():
                    op.put_key_slice(data["key"], data)
    out.extend(op.advance_watermark(MAX_TIMESTAMP))
    return [repr(e) for e in out]


def test_a_session_operator_put_back_together_from_key_slices_fires_the_same_windows() -> None:
    assert _run(_session, sliced=True) == _run(_session, sliced=False)


def test_a_count_trigger_keeps_its_counts_across_key_slices() -> None:
    assert _run(_sliding_count, sliced=True) == _run(_sliding_count, sliced=False)


def test_a_keyed_process_function_keeps_its_state_and_timers_across_key_slices() -> None:
    assert _run(_process, sliced=True) == _run(_process, sliced=False)


def test_a_key_slice_names_the_next_timers_of_its_key() -> None:
    op = _session()
    op.process_element("a", 1, 1_000)
    (data, next_event, next_processing), = op.take_key_slices().values()
    assert data["key"] == "a" and next_event == min(ts for ts, _ in data["event_timers"])
    assert next_processing == MAX_TIMESTAMP
    assert list(data) == ["key", "windows", "triggers", "fires", "merging", "event_timers",
                          "processing_timers", "state"]


def test_an_operator_restored_from_a_snapshot_continues_as_the_original() -> None:
    for make in (_session, _sliding_count, _process):
        a, b = make(), make()
        for key, ts in ELEMENTS[:12]:
            a.process_element(key, (key, ts), ts)
            b.process_element(key, (key, ts), ts)
        fresh = make()
        fresh.restore(b.snapshot())
        assert repr(fresh.advance_watermark(MAX_TIMESTAMP)) == repr(a.advance_watermark(MAX_TIMESTAMP))
