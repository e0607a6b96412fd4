"""Idleness exactly as Flink's ``WatermarksWithIdleness`` and ``IdlenessTimer`` (DESIGN §1).

At each periodic emit exactly one of these happens: activity since the last check resets
the timer; else a stopped timer starts at ``now``; else the partition is idle once
``now - start > T`` (strictly). An idle partition sends ``mark_idle`` once and its
generator is not asked to emit; it is active again at the first periodic emit after data.
"""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.core.clock import ManualClock
from lowwater.core.errors import ConfigurationError
from lowwater.core.watermarks import (
    BoundedOutOfOrdernessWatermarks,
    IdlenessTimer,
    RecordingOutput,
    Watermark,
    WatermarkEvent,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarksWithIdleness,
)

IDLE = WatermarkEvent.idle()
watermark = WatermarkEvent.watermark


class SpyGenerator(WatermarkGenerator[Any]):
    """Emits its call number at each periodic emit, so every call is visible."""

    def __init__(self) -> None:
        self.periodic_calls = 0
        self.events = 0

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        self.events += 1

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        self.periodic_calls += 1
        output.emit_watermark(Watermark(self.periodic_calls))


def test_idleness_timer_activity_resets_then_first_quiet_check_starts_the_timer() -> None:
    clock = ManualClock(0)
    timer = IdlenessTimer(clock, 3_000)
    timer.activity()
    clock.set(1_000)
    assert timer.check_if_idle() is False  # activity: reset
    clock.set(2_000)
    assert timer.check_if_idle() is False  # first quiet check: timer starts at 2000
    clock.set(5_000)
    assert timer.check_if_idle() is False  # 5000 - 2000 = 3000, not > 3000
    clock.set(5_001)
    assert timer.check_if_idle() is True  # 3001 > 3000


def test_idleness_timer_does_not_count_time_before_the_first_quiet_check() -> None:
    clock = ManualClock(0)
    timer = IdlenessTimer(clock, 1_000)
    clock.set(100_000)
    assert timer.check_if_idle() is False  # starts the timer now, however long the silence was
    clock.set(101_000)
    assert timer.check_if_idle() is False
    clock.set(101_001)
    assert timer.check_if_idle() is True


def test_idleness_timer_activity_while_idle_resets_the_timer() -> None:
    clock = ManualClock(0)
    timer = IdlenessTimer(clock, 10)
    timer.check_if_idle()
    clock.set(11)
    assert timer.check_if_idle() is True
    timer.activity()
    assert timer.check_if_idle() is False
    clock.set(12)
    assert timer.check_if_idle() is False  # restarted at 12
    clock.set(22)
    assert timer.check_if_idle() is False
    clock.set(23)
    assert timer.check_if_idle() is True


def test_a_partition_goes_idle_only_after_strictly_more_than_the_timeout() -> None:
    clock = ManualClock(0)
    out = RecordingOutput()
    gen = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), 3_000, clock)
    gen.on_event("x", 100, out)
    for now in (1_000, 2_000, 5_000):
        clock.set(now)
        gen.on_periodic_emit(out)
    assert IDLE not in out.events
    assert out.watermarks == [99, 99, 99]
    clock.set(5_001)
    gen.on_periodic_emit(out)
    assert out.events[-1] == IDLE


def test_an_idle_partition_marks_idle_once_and_its_generator_is_not_asked_to_emit() -> None:
    clock = ManualClock(0)
    out = RecordingOutput()
    spy = SpyGenerator()
    gen = WatermarksWithIdleness(spy, 1_000, clock)
    gen.on_periodic_emit(out)  # t=0: timer starts
    assert spy.periodic_calls == 1
    clock.set(1_001)
    gen.on_periodic_emit(out)
    clock.set(2_000)
    gen.on_periodic_emit(out)
    clock.set(9_000)
    gen.on_periodic_emit(out)
    assert spy.periodic_calls == 1
    assert out.events == [watermark(1), IDLE]


def test_an_idle_partition_reactivates_at_the_next_periodic_emit_after_data() -> None:
    clock = ManualClock(0)
    out = RecordingOutput()
    gen = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), 1_000, clock)
    gen.on_event("x", 500, out)
    gen.on_periodic_emit(out)  # activity
    clock.set(1_000)
    gen.on_periodic_emit(out)  # timer starts
    clock.set(2_001)
    gen.on_periodic_emit(out)  # idle
    assert out.events == [watermark(499), watermark(499), IDLE]
    gen.on_event("x", 3_000, out)
    assert out.events[-1] == IDLE  # nothing happens until the periodic emit
    clock.set(2_002)
    gen.on_periodic_emit(out)
    assert out.events[-1] == watermark(2_999)
    assert out.idle is False


def test_idleness_with_steady_data_never_marks_idle() -> None:
    clock = ManualClock(0)
    out = RecordingOutput()
    gen = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), 10, clock)
    for i in range(1, 50):
        gen.on_event("x", i, out)
        clock.advance(1_000)
        gen.on_periodic_emit(out)
    assert IDLE not in out.events


def test_idleness_passes_events_through_to_the_wrapped_generator() -> None:
    spy = SpyGenerator()
    gen = WatermarksWithIdleness(spy, 10, ManualClock(0))
    gen.on_event("x", 1, RecordingOutput())
    assert spy.events == 1


@pytest.mark.parametrize("bad", [0, -1])
def test_a_non_positive_idle_timeout_is_rejected(bad: int) -> None:
    with pytest.raises(ConfigurationError) as e:
        WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), bad, ManualClock(0))
    assert e.value.parameter == "idleness"
