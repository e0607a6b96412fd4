"""The keyed path's control state survives its JSON round trip: a restored input behaves as the
one that kept running (no Spark needed)."""

from __future__ import annotations

import copy

from lowwater.core.watermarks import WatermarkEvent
from lowwater.runtime.records import LaneEvent
from lowwater.runtime.union_input import UnionInput
from lowwater.spark.keyed import _union, _union_data


def _input_idle_after_two_batches() -> UnionInput:
    ui = UnionInput(keep_history=False)
    for source in (0, 1):
        ui.on_lane_event((source, 0), LaneEvent("register"))
        ui.on_lane_event((source, 0), LaneEvent.of(WatermarkEvent.watermark(1_000)))
    ui.combine()
    for source in (0, 1):
        ui.on_lane_event((source, 0), LaneEvent.of(WatermarkEvent.idle()))
    assert ui.combine().idle
    return ui


def test_an_idle_input_restored_from_json_reports_becoming_active_as_the_running_one_does() -> None:
    running = _input_idle_after_two_batches()
    restored = _union(_union_data(copy.deepcopy(running)))
    results = []
    for ui in (running, restored):
        ui.on_lane_event((0, 0), LaneEvent.of(WatermarkEvent.active()))  # active again, no new watermark
        results.append(ui.combine())
    assert results[0].became_active  # what the operator's partial watermark is told
    assert results[1] == results[0]


def test_the_round_trip_keeps_every_field() -> None:
    ui = _input_idle_after_two_batches()
    assert _union_data(_union(_union_data(ui))) == _union_data(ui)
