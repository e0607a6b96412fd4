"""Triggers (count, purging, continuous event time, processing time) and session merging.

Fire times follow Flink's trigger sources: ``CountTrigger`` fires when the count reaches
``max_count`` and starts counting afresh; ``ContinuousEventTimeTrigger`` first fires at
``ts - (ts % interval) + interval`` (Java remainder) and then every ``interval``, capped at
``max_timestamp``; ``ProcessingTimeTrigger`` fires when the clock passes ``max_timestamp``.
Sessions merge when they overlap or touch (``MergingWindowSet``, ``TimeWindow.intersects``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from lowwater.core.clock import ManualClock
from lowwater.core.errors import ConfigurationError
from lowwater.core.time import MAX_TIMESTAMP
from lowwater.core.windows import (
    AggregatingContents,
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    EventTimeSessionWindows,
    GlobalWindow,
    GlobalWindows,
    LateElement,
    ListContents,
    ProcessingTimeSessionWindows,
    PurgingTrigger,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowFired,
    WindowOperator,
    WindowResult,
    builtin_aggregate,
)


def _fired(events: Iterable[Any]) -> list[WindowFired]:
    return [e for e in events if isinstance(e, WindowFired)]


def _results(events: Iterable[Any]) -> list[WindowResult]:
    return [o for e in _fired(events) for o in e.outputs]


def _list_of(fired: WindowFired) -> list[Any]:
    value = fired.outputs[0].value
    return value if isinstance(value, list) else [value]


def _sum() -> AggregatingContents:
    return AggregatingContents(builtin_aggregate("sum"))


# -- global windows ----------------------------------------------------------------------------
def test_global_windows_with_the_default_trigger_never_fire() -> None:
    op = WindowOperator(GlobalWindows.create(), _sum())
    for i in range(10):
        assert op.process_element("k", i, i) == []
    assert op.advance_watermark(MAX_TIMESTAMP) == []


def test_count_trigger_fires_every_n_elements_with_everything_so_far() -> None:
    op = WindowOperator(GlobalWindows.create(), ListContents(), trigger=CountTrigger.of(3))
    fires = []
    for i in range(1, 8):
        fires += _fired(op.process_element("k", i, i))
    assert [_list_of(f) for f in fires] == [[1, 2, 3], [1, 2, 3, 4, 5, 6]]
    assert [f.fire_index for f in fires] == [0, 1]
    assert all(f.window == GlobalWindow() for f in fires)


def test_count_trigger_counts_per_key() -> None:
    op = WindowOperator(GlobalWindows.create(), _sum(), trigger=CountTrigger.of(2))
    assert op.process_element("a", 1, 0) == []
    assert op.process_element("b", 10, 0) == []
    assert _results(op.process_element("a", 2, 0)) == [
        WindowResult("a", -(2**63), MAX_TIMESTAMP, 3, 0)
    ]
    assert _results(op.process_element("b", 20, 0))[0].value == 30


def test_purging_count_trigger_fires_each_group_of_n_once() -> None:
    op = WindowOperator(
        GlobalWindows.create(), ListContents(), trigger=PurgingTrigger.of(CountTrigger.of(3))
    )
    fires = []
    for i in range(1, 10):
        fires += _fired(op.process_element("k", i, i))
    assert [_list_of(f) for f in fires] == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]


def test_a_count_trigger_replaces_the_event_time_trigger_so_the_watermark_alone_never_fires() -> (
    None
):
    # CountTrigger replaces the event-time trigger: the watermark alone does not fire.
    op = WindowOperator(TumblingEventTimeWindows(10), _sum(), trigger=CountTrigger.of(2))
    op.process_element("k", 1, 1)
    assert op.advance_watermark(9) == []


@pytest.mark.parametrize("bad", [0, -1])
def test_count_trigger_needs_a_positive_count(bad: int) -> None:
    with pytest.raises(ConfigurationError) as e:
        CountTrigger.of(bad)
    assert e.value.parameter == "max_count"


# -- continuous event time ---------------------------------------------------------------------
def _fire_watermarks(op: WindowOperator, watermarks: Iterable[int]) -> list[tuple[int, Any]]:
    out = []
    for wm in watermarks:
        for f in _fired(op.advance_watermark(wm)):
            out.append((wm, f.outputs[0].value))
    return out


def test_continuous_event_time_trigger_fires_every_interval_and_at_the_window_end() -> None:
    op = WindowOperator(
        TumblingEventTimeWindows(10_000), _sum(), trigger=ContinuousEventTimeTrigger.of(3_000)
    )
    op.process_element("k", 1, 1_000)  # first fire time: 1000 - 1000 % 3000 + 3000 = 3000
    fires = _fire_watermarks(op, [2_999, 3_000])
    op.process_element("k", 2, 4_000)
    fires += _fire_watermarks(op, [5_999, 6_000, 8_999, 9_000, 9_998, 9_999])
    assert fires == [(3_000, 1), (6_000, 3), (9_000, 3), (9_999, 3)]


def test_continuous_event_time_trigger_catches_up_within_one_watermark() -> None:
    op = WindowOperator(
        TumblingEventTimeWindows(10_000), _sum(), trigger=ContinuousEventTimeTrigger.of(3_000)
    )
    op.process_element("k", 5, 1_000)
    fired = _fired(op.advance_watermark(9_999))
    assert len(fired) == 4  # 3000, 6000, 9000 and the end at 9999


def test_continuous_event_time_trigger_uses_the_java_remainder_for_negative_timestamps() -> None:
    # Java: -7000 % 3000 == -1000, so the first fire time is -7000 + 1000 + 3000 = -3000.
    op = WindowOperator(
        TumblingEventTimeWindows(10_000), _sum(), trigger=ContinuousEventTimeTrigger.of(3_000)
    )
    op.process_element("k", 1, -7_000)
    assert _fire_watermarks(op, [-6_000, -3_001]) == []
    assert _fire_watermarks(op, [-3_000]) == [(-3_000, 1)]
    assert _fire_watermarks(op, [-2]) == []
    assert _fire_watermarks(op, [-1]) == [(-1, 1)]


def test_continuous_event_time_trigger_on_a_passed_window_fires_at_once() -> None:
    op = WindowOperator(
        TumblingEventTimeWindows(10),
        _sum(),
        trigger=ContinuousEventTimeTrigger.of(3),
        allowed_lateness_ms=100,
    )
    op.advance_watermark(50)
    assert _results(op.process_element("k", 4, 2)) == [WindowResult("k", 0, 10, 4, 0)]


@pytest.mark.parametrize("bad", [0, -3])
def test_continuous_trigger_interval_must_be_positive(bad: int) -> None:
    with pytest.raises(ConfigurationError) as e:
        ContinuousEventTimeTrigger.of(bad)
    assert e.value.parameter == "interval"


# -- processing time ---------------------------------------------------------------------------
def test_processing_time_window_fires_when_the_clock_passes_its_end() -> None:
    clock = ManualClock(1_500)
    op = WindowOperator(TumblingProcessingTimeWindows(1_000), _sum(), clock=clock)
    op.process_element("k", 2, 999_999)  # the timestamp does not matter
    clock.set(1_700)
    op.process_element("k", 3, 0)
    assert op.advance_watermark(MAX_TIMESTAMP) == []  # event time does not fire it
    assert op.advance_processing_time(1_998) == []
    clock.set(1_999)
    events = op.advance_processing_time()
    assert _results(events) == [WindowResult("k", 1_000, 2_000, 5, 0)]
    assert _fired(events)[0].cause == "processing_time"
    assert op.open_windows() == 0
    assert op.state_size() == 0


def test_processing_time_elements_are_never_late() -> None:
    clock = ManualClock(0)
    op = WindowOperator(
        TumblingProcessingTimeWindows(1_000), _sum(), clock=clock, allowed_lateness_ms=5
    )
    op.advance_watermark(10**9)
    assert op.process_element("k", 1, 0) == []
    assert op.late_count == 0


def test_continuous_processing_time_trigger_fires_every_interval_of_the_clock() -> None:
    # Flink: the first fire time is now - now % interval + interval, then every interval.
    clock = ManualClock(500)
    op = WindowOperator(
        TumblingEventTimeWindows(10_000),
        _sum(),
        trigger=ContinuousProcessingTimeTrigger.of(1_000),
        clock=clock,
    )
    op.process_element("k", 1, 100)
    assert op.advance_processing_time(999) == []
    assert _results(op.advance_processing_time(1_000)) == [WindowResult("k", 0, 10_000, 1, 0)]
    op.process_element("k", 2, 200)
    assert _results(op.advance_processing_time(1_999)) == []
    fired = _results(op.advance_processing_time(3_000))
    assert [(r.value, r.fire_index) for r in fired] == [(3, 1), (3, 2)]  # at 2000 and 3000


def test_continuous_processing_time_trigger_ignores_the_watermark() -> None:
    op = WindowOperator(
        TumblingEventTimeWindows(10_000),
        _sum(),
        trigger=ContinuousProcessingTimeTrigger.of(1_000),
        clock=ManualClock(0),
    )
    op.process_element("k", 1, 100)
    assert op.advance_watermark(9_999) == []  # cleanup only: no event-time fire


# -- sessions ----------------------------------------------------------------------------------
def _session_op(gap: int = 1_000, lateness: int = 0) -> WindowOperator:
    return WindowOperator(
        EventTimeSessionWindows.with_gap(gap), _sum(), allowed_lateness_ms=lateness
    )


def test_overlapping_sessions_merge_with_merged_bounds() -> None:
    op = _session_op()
    op.process_element("k", 1, 0)
    op.process_element("k", 2, 500)
    assert op.advance_watermark(1_498) == []
    assert _results(op.advance_watermark(1_499)) == [WindowResult("k", 0, 1_500, 3, 0)]


def test_touching_sessions_merge() -> None:
    op = _session_op()
    op.process_element("k", 1, 0)  # [0, 1000)
    op.process_element("k", 2, 1_000)  # [1000, 2000) touches
    assert _results(op.advance_watermark(MAX_TIMESTAMP)) == [WindowResult("k", 0, 2_000, 3, 0)]


def test_sessions_separated_by_more_than_the_gap_stay_apart() -> None:
    op = _session_op()
    op.process_element("k", 1, 0)
    op.process_element("k", 2, 1_001)
    results = _results(op.advance_watermark(MAX_TIMESTAMP))
    assert sorted(results, key=lambda r: r.window_start) == [
        WindowResult("k", 0, 1_000, 1, 0),
        WindowResult("k", 1_001, 2_001, 2, 0),
    ]


def test_an_element_between_two_sessions_bridges_them() -> None:
    op = _session_op()
    op.process_element("k", 1, 0)  # [0, 1000)
    op.process_element("k", 2, 2_000)  # [2000, 3000)
    assert op.open_windows() == 2
    op.process_element("k", 4, 1_000)  # [1000, 2000) touches both
    assert op.open_windows() == 1
    assert _results(op.advance_watermark(MAX_TIMESTAMP)) == [WindowResult("k", 0, 3_000, 7, 0)]


def test_an_element_inside_a_session_does_not_change_its_bounds() -> None:
    op = _session_op()
    op.process_element("k", 1, 0)
    op.process_element("k", 2, 800)  # [0, 1800)
    op.process_element("k", 4, 200)  # [200, 1200) lies inside
    assert op.advance_watermark(1_798) == []
    assert _results(op.advance_watermark(1_799)) == [WindowResult("k", 0, 1_800, 7, 0)]


def test_sessions_of_different_keys_do_not_merge() -> None:
    op = _session_op()
    op.process_element("a", 1, 0)
    op.process_element("b", 2, 500)
    results = _results(op.advance_watermark(MAX_TIMESTAMP))
    assert sorted(results, key=lambda r: r.key) == [
        WindowResult("a", 0, 1_000, 1, 0),
        WindowResult("b", 500, 1_500, 2, 0),
    ]


def test_a_late_but_allowed_element_merging_into_a_fired_session_fires_the_merged_session() -> None:
    op = _session_op(gap=1_000, lateness=5_000)
    op.process_element("k", 1, 0)  # [0, 1000)
    assert _results(op.advance_watermark(1_500)) == [WindowResult("k", 0, 1_000, 1, 0)]
    # [100, 1100) merges into [0, 1100); its max timestamp 1099 <= 1500, so the
    # EventTimeTrigger fires at once with the full merged contents.
    events = op.process_element("k", 2, 100)
    assert _results(events) == [WindowResult("k", 0, 1_100, 3, 0)]
    assert _fired(events)[0].cause == "element"
    # An element inside the merged session re-fires it (no new merge).
    assert _results(op.process_element("k", 4, 50)) == [WindowResult("k", 0, 1_100, 7, 1)]
    assert op.open_windows() == 1
    op.advance_watermark(1_099 + 5_000)
    assert op.open_windows() == 0
    assert op.state_size() == 0


def test_a_late_but_allowed_element_extending_a_fired_session_past_the_watermark_waits() -> None:
    op = _session_op(gap=1_000, lateness=5_000)
    op.process_element("k", 1, 0)
    op.advance_watermark(1_200)  # [0, 1000) fired
    # [800, 1800) merges into [0, 1800): its end is past the watermark, so it waits for it.
    assert op.process_element("k", 2, 800) == []
    assert _results(op.advance_watermark(1_799)) == [WindowResult("k", 0, 1_800, 3, 0)]


def test_a_session_late_for_its_lateness_is_a_late_element() -> None:
    op = _session_op(gap=1_000, lateness=0)
    op.advance_watermark(5_000)
    events = op.process_element("k", 1, 100)
    assert events == [LateElement("k", 1, 100, 5_000, (TimeWindow(100, 1_100),))]  # its own session
    assert op.state_size() == 0


def test_merged_sessions_leave_no_state_behind_after_cleanup() -> None:
    op = _session_op(gap=100, lateness=50)
    for ts in (0, 50, 120, 400, 460, 1_000):
        op.process_element("k", 1, ts)
    results = _results(op.advance_watermark(MAX_TIMESTAMP))
    assert sorted((r.window_start, r.window_end, r.value) for r in results) == [
        (0, 220, 3),
        (400, 560, 2),
        (1_000, 1_100, 1),
    ]
    assert op.open_windows() == 0
    assert op.state_size() == 0


def test_processing_time_sessions_merge_by_the_clock() -> None:
    clock = ManualClock(0)
    op = WindowOperator(ProcessingTimeSessionWindows.with_gap(100), _sum(), clock=clock)
    op.process_element("k", 1, 0)
    clock.set(80)
    op.process_element("k", 2, 0)  # [80, 180) merges with [0, 100)
    assert op.advance_processing_time(178) == []
    assert _results(op.advance_processing_time(179)) == [WindowResult("k", 0, 180, 3, 0)]
    assert op.state_size() == 0


def test_merging_window_set_windows_are_time_windows() -> None:
    op = _session_op()
    op.process_element("k", 1, 10)
    [fired] = _fired(op.advance_watermark(MAX_TIMESTAMP))
    assert fired.window == TimeWindow(10, 1_010)


def test_the_default_triggers_have_pyflinks_create_factory() -> None:
    """A ported PyFlink job writes ``.trigger(ProcessingTimeTrigger.create())``: it raised
    AttributeError (a user probe, session 65). Each fires as the trigger it makes."""
    from lowwater.core.windows import EventTimeTrigger, ProcessingTimeTrigger

    assert isinstance(EventTimeTrigger.create(), EventTimeTrigger)
    op = WindowOperator(TumblingEventTimeWindows(10), _sum(), trigger=EventTimeTrigger.create())
    op.process_element("k", 3, 1)
    assert _results(op.advance_watermark(8)) == [] and [r.value for r in _results(op.advance_watermark(9))] == [3]
    clock = ManualClock(0)
    op = WindowOperator(TumblingProcessingTimeWindows(10), _sum(), trigger=ProcessingTimeTrigger.create(), clock=clock)
    op.process_element("k", 4, 0)
    clock.set(10)
    assert [r.value for r in _results(op.advance_processing_time())] == [4]
