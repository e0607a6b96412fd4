"""``WatermarkOutputMultiplexer`` and ``CombinedWatermarkStatus`` (Flink's classes, DESIGN §1).

The combined watermark is the minimum over non-idle outputs and only advances; setting
an output's watermark clears its idleness and never lowers it; all idle means the
maximum over all outputs is emitted if it advances, then the underlying output is marked
idle (Flink 2.3); no outputs, nothing emitted.
"""

from __future__ import annotations

import pytest

from lowwater.core.clock import ManualClock
from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks import (
    BoundedOutOfOrdernessWatermarks,
    CombinedWatermarkStatus,
    PartialWatermark,
    RecordingOutput,
    Watermark,
    WatermarkEvent,
    WatermarkOutputMultiplexer,
    WatermarksWithIdleness,
)

IDLE = WatermarkEvent.idle()
watermark = WatermarkEvent.watermark


def _mux(*ids: int) -> tuple[WatermarkOutputMultiplexer, RecordingOutput]:
    under = RecordingOutput()
    mux = WatermarkOutputMultiplexer(under)
    for i in ids:
        mux.register_new_output(i)
    return mux, under


# -- no outputs / deferred ---------------------------------------------------------------------
def test_with_no_outputs_nothing_is_emitted() -> None:
    mux, under = _mux()
    mux.on_periodic_emit()
    mux.on_periodic_emit()
    assert under.events == []


def test_deferred_updates_are_combined_only_at_periodic_emit() -> None:
    mux, under = _mux(0, 1)
    mux.get_deferred_output(0).emit_watermark(Watermark(10))
    mux.get_deferred_output(1).emit_watermark(Watermark(4))
    assert under.events == []
    mux.on_periodic_emit()
    assert under.watermarks == [4]


def test_deferred_combine_sees_only_the_final_state_of_each_output() -> None:
    mux, under = _mux(0, 1)
    mux.get_deferred_output(0).emit_watermark(Watermark(20))
    mux.get_deferred_output(1).emit_watermark(Watermark(15))
    mux.get_deferred_output(1).emit_watermark(Watermark(30))
    mux.on_periodic_emit()
    assert under.watermarks == [20]


def test_an_output_that_never_emitted_holds_the_combined_watermark_at_min() -> None:
    mux, under = _mux(0, 1)
    mux.get_deferred_output(0).emit_watermark(Watermark(100))
    mux.on_periodic_emit()
    assert under.events == []
    assert mux.combined_watermark == MIN_TIMESTAMP


def test_periodic_emit_without_change_emits_nothing_new() -> None:
    mux, under = _mux(0)
    mux.get_deferred_output(0).emit_watermark(Watermark(7))
    mux.on_periodic_emit()
    mux.on_periodic_emit()
    mux.get_deferred_output(0).emit_watermark(Watermark(7))
    mux.on_periodic_emit()
    assert under.watermarks == [7]


# -- immediate ---------------------------------------------------------------------------------
def test_immediate_output_forwards_an_advance_of_the_minimum_at_once() -> None:
    mux, under = _mux(0, 1)
    mux.get_immediate_output(0).emit_watermark(Watermark(10))
    assert under.events == []  # output 1 still at MIN
    mux.get_immediate_output(1).emit_watermark(Watermark(5))
    assert under.watermarks == [5]
    mux.get_immediate_output(1).emit_watermark(Watermark(12))
    assert under.watermarks == [5, 10]


def test_immediate_mark_idle_can_release_the_combined_watermark() -> None:
    mux, under = _mux(0, 1)
    mux.get_immediate_output(0).emit_watermark(Watermark(10))
    mux.get_immediate_output(1).emit_watermark(Watermark(3))
    mux.get_immediate_output(1).mark_idle()
    assert under.watermarks == [3, 10]


# -- regressions and idleness ------------------------------------------------------------------
def test_a_partitions_own_watermark_never_regresses() -> None:
    mux, _ = _mux(0)
    out = mux.get_deferred_output(0)
    out.emit_watermark(Watermark(10))
    out.emit_watermark(Watermark(3))
    assert mux.partial(0).watermark == 10


def test_combined_watermark_does_not_regress_when_an_idle_output_comes_back_lower() -> None:
    # Flink: combinedWatermarkDoesNotRegressWhenIdleOutputRegresses
    mux, under = _mux(0, 1)
    o0, o1 = mux.get_immediate_output(0), mux.get_immediate_output(1)
    o0.emit_watermark(Watermark(2))
    o1.emit_watermark(Watermark(5))
    assert under.watermarks == [2]
    o0.mark_idle()
    assert under.watermarks == [2, 5]
    o0.emit_watermark(Watermark(3))  # back to active, lower than the combined 5
    assert under.watermarks == [2, 5]
    assert mux.combined_watermark == 5
    o0.emit_watermark(Watermark(6))
    assert under.watermarks == [2, 5]  # min(6, 5) = 5, no advance
    o1.emit_watermark(Watermark(7))
    assert under.watermarks == [2, 5, 6]


def test_setting_a_watermark_clears_idleness() -> None:
    mux, _ = _mux(0, 1)
    out = mux.get_deferred_output(0)
    out.mark_idle()
    assert mux.partial(0).idle is True
    out.emit_watermark(Watermark(1))
    assert mux.partial(0).idle is False


def test_setting_a_lower_watermark_still_clears_idleness() -> None:
    mux, _ = _mux(0)
    out = mux.get_deferred_output(0)
    out.emit_watermark(Watermark(10))
    out.mark_idle()
    out.emit_watermark(Watermark(1))
    assert mux.partial(0).idle is False
    assert mux.partial(0).watermark == 10


def test_an_idle_output_does_not_hold_back_the_combined_watermark() -> None:
    mux, under = _mux(0, 1, 2)
    mux.get_deferred_output(0).emit_watermark(Watermark(50))
    mux.get_deferred_output(1).emit_watermark(Watermark(1))
    mux.get_deferred_output(1).mark_idle()
    mux.get_deferred_output(2).emit_watermark(Watermark(40))
    mux.on_periodic_emit()
    assert under.watermarks == [40]


def test_when_every_output_is_idle_the_maximum_is_emitted_then_the_underlying_is_marked_idle() -> None:
    mux, under = _mux(0, 1)
    mux.get_deferred_output(0).emit_watermark(Watermark(50))
    mux.get_deferred_output(1).emit_watermark(Watermark(60))
    mux.get_deferred_output(0).mark_idle()
    mux.get_deferred_output(1).mark_idle()
    mux.on_periodic_emit()
    assert under.events == [watermark(60), IDLE]
    assert under.idle is True
    assert mux.idle is True


def test_when_every_output_is_idle_and_the_maximum_does_not_advance_only_idle_is_sent() -> None:
    mux, under = _mux(0, 1)
    mux.get_deferred_output(0).emit_watermark(Watermark(60))
    mux.get_deferred_output(1).emit_watermark(Watermark(60))
    mux.on_periodic_emit()
    mux.get_deferred_output(0).mark_idle()
    mux.get_deferred_output(1).mark_idle()
    mux.on_periodic_emit()
    assert under.events == [watermark(60), IDLE]


def test_the_stream_becomes_active_again_when_an_output_emits_after_all_were_idle() -> None:
    mux, under = _mux(0, 1)
    mux.get_deferred_output(0).emit_watermark(Watermark(5))
    mux.get_deferred_output(1).emit_watermark(Watermark(5))
    mux.on_periodic_emit()
    mux.get_deferred_output(0).mark_idle()
    mux.get_deferred_output(1).mark_idle()
    mux.on_periodic_emit()
    assert under.idle is True
    mux.get_deferred_output(1).emit_watermark(Watermark(9))
    mux.on_periodic_emit()
    assert under.idle is False
    assert under.watermarks == [5, 9]


# -- registration at run time ------------------------------------------------------------------
def test_a_new_output_registered_at_run_time_holds_back_but_does_not_regress() -> None:
    mux, under = _mux(0)
    mux.get_deferred_output(0).emit_watermark(Watermark(100))
    mux.on_periodic_emit()
    mux.register_new_output(1)
    mux.get_deferred_output(0).emit_watermark(Watermark(200))
    mux.on_periodic_emit()
    assert mux.combined_watermark == 100
    assert under.watermarks == [100]
    mux.get_deferred_output(1).emit_watermark(Watermark(150))
    mux.on_periodic_emit()
    assert under.watermarks == [100, 150]


def test_unregistering_a_lagging_output_lets_the_watermark_advance() -> None:
    mux, under = _mux(0, 1)
    mux.get_deferred_output(0).emit_watermark(Watermark(100))
    mux.get_deferred_output(1).emit_watermark(Watermark(10))
    mux.on_periodic_emit()
    assert mux.unregister_output(1) is True
    assert 1 not in mux
    mux.on_periodic_emit()
    assert under.watermarks == [10, 100]
    assert mux.unregister_output(1) is False


def test_registering_the_same_id_twice_is_an_error() -> None:
    mux, _ = _mux(0)
    with pytest.raises(ValueError, match="0"):
        mux.register_new_output(0)


def test_an_unknown_output_id_is_an_error() -> None:
    mux, _ = _mux(0)
    with pytest.raises(ValueError):
        mux.get_deferred_output(7)


# -- with generators ---------------------------------------------------------------------------
def test_an_idle_partition_unblocks_the_combined_watermark_end_to_end() -> None:
    clock = ManualClock(0)
    mux, under = _mux(0, 1)
    gens = [
        WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), 1_000, clock) for _ in range(2)
    ]
    gens[0].on_event("x", 10_000, mux.get_deferred_output(0))
    gens[1].on_event("x", 1_000, mux.get_deferred_output(1))

    def tick(now: int) -> None:
        clock.set(now)
        for i, g in enumerate(gens):
            g.on_periodic_emit(mux.get_deferred_output(i))
        mux.on_periodic_emit()

    tick(0)
    assert under.watermarks == [999]
    gens[0].on_event("x", 20_000, mux.get_deferred_output(0))
    tick(500)  # p1 quiet: its timer starts at 500
    assert under.watermarks == [999]
    gens[0].on_event("x", 21_000, mux.get_deferred_output(0))
    tick(1_500)  # 1500 - 500 = 1000, not > 1000
    assert under.watermarks == [999]
    gens[0].on_event("x", 22_000, mux.get_deferred_output(0))
    tick(1_501)  # p1 idle now
    assert under.watermarks == [999, 21_999]


# -- CombinedWatermarkStatus -------------------------------------------------------------------
def test_combined_status_with_no_partials_never_advances() -> None:
    status = CombinedWatermarkStatus()
    assert status.update_combined_watermark() is False
    assert status.combined_watermark == MIN_TIMESTAMP


def test_partial_watermark_reports_whether_it_advanced() -> None:
    p = PartialWatermark()
    assert p.set_watermark(5) is True
    assert p.set_watermark(5) is False
    assert p.set_watermark(4) is False
    assert p.watermark == 5


def test_a_generator_may_emit_a_watermarks_time_as_an_int_and_anything_else_says_what_is_wanted() -> None:
    """``out.emit_watermark(5)`` failed as ``'int' object has no attribute 'timestamp'``, where a
    source's ``emit_watermark`` takes an int."""
    mux, under = _mux(0, 1)
    mux.get_immediate_output(0).emit_watermark(5)
    mux.get_deferred_output(1).emit_watermark(Watermark(7))
    mux.on_periodic_emit()
    assert under.events == [watermark(5)]  # min(5, 7)
    recording = RecordingOutput()
    recording.emit_watermark(9)
    assert recording.events == [watermark(9)]
    for wrong in (5.0, "5", True, None):
        with pytest.raises(TypeError, match=r"emit_watermark takes a Watermark \(Watermark\(t\)\) or an int"):
            mux.get_immediate_output(0).emit_watermark(wrong)  # type: ignore[arg-type]
