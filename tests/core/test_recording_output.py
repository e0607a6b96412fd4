"""WatermarkEvent and RecordingOutput: what every path records a generator's output as."""

from __future__ import annotations

import json

import pytest

from lowwater.core.watermarks import RecordingOutput, Watermark, WatermarkEvent, WatermarkOutputMultiplexer


def test_a_recording_replays_the_same_calls_in_the_same_order() -> None:
    rec = RecordingOutput()
    rec.emit_watermark(Watermark(5))
    rec.mark_idle()
    rec.mark_active()
    rec.emit_watermark(Watermark(9))
    again = RecordingOutput()
    rec.replay(again)
    assert again.events == rec.events == [WatermarkEvent.watermark(5), WatermarkEvent.idle(),
                                          WatermarkEvent.active(), WatermarkEvent.watermark(9)]
    assert again.watermarks == [5, 9]
    assert again.idle is False


def test_the_wire_form_is_kind_and_timestamp_pairs_as_the_control_rows_always_were() -> None:
    rec = RecordingOutput([WatermarkEvent.watermark(7), WatermarkEvent.idle()])
    assert rec.to_rows() == [("watermark", 7), ("idle", 0)]
    assert json.dumps(rec.to_rows()) == '[["watermark", 7], ["idle", 0]]'
    back = RecordingOutput.from_rows(json.loads(json.dumps(rec.to_rows())))
    assert back.events == rec.events
    assert back.idle is True


def test_an_unknown_kind_on_the_wire_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown watermark event kind 'wm'"):
        WatermarkEvent.from_row(["wm", 1])


def test_replaying_into_a_deferred_output_combines_as_the_live_calls_would() -> None:
    live, replayed = RecordingOutput(), RecordingOutput()
    for under, replay in ((live, False), (replayed, True)):
        mux = WatermarkOutputMultiplexer(under)
        mux.register_new_output(0)
        mux.register_new_output(1)
        rec = RecordingOutput()
        target = rec if replay else mux.get_deferred_output(0)
        target.emit_watermark(Watermark(10))
        target.mark_idle()
        if replay:
            rec.replay(mux.get_deferred_output(0))
        mux.get_deferred_output(1).emit_watermark(Watermark(4))
        mux.on_periodic_emit()
    assert replayed.events == live.events
