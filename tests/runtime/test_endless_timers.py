"""Timers that register each other for ever fail the job, saying so, where it hung without a word."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lowwater.api import CollectSink, StreamExecutionEnvironment
from lowwater.core.errors import PipelineError
from lowwater.core.process import KeyedProcessFunction
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import ContinuousProcessingTimeTrigger, TumblingEventTimeWindows
from lowwater.spark.sources import BatchFilesSource


class Heartbeat(KeyedProcessFunction):  # type: ignore[misc]
    """Flink's heartbeat: every timer registers the next, a second on."""

    def process_element(self, value: Any, ctx: Any) -> None:
        ctx.timer_service().register_event_time_timer(value["ts"] + 1000)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(timestamp + 1000)
        yield ctx.get_current_key(), timestamp


def _source(tmp_path: Path, batches: list[list[dict[str, Any]]]) -> BatchFilesSource:
    BatchFilesSource.write(tmp_path / "in", batches)
    return BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), [0],
                            [1000 * (i + 1) for i in range(len(batches))])


def test_a_heartbeat_timer_fires_while_time_advances_and_fails_at_the_end_of_inputs_max_watermark(
        tmp_path: Path) -> None:
    """The final watermark (MAX) fires every timer up to it: a heartbeat would fire about 9.2e15 times."""
    env, sink = StreamExecutionEnvironment(), CollectSink()
    (env.from_source(_source(tmp_path, [[{"key": "a", "ts": 0}], [{"key": "a", "ts": 5000}]]),
                     WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts"))
     .key_by("key").process(Heartbeat()).add_sink(sink))
    with pytest.raises(PipelineError, match=r"timers of key 'a' fired 100,001 times as time advanced to the end "
                                            r"of input's final watermark \(MAX\).*Hint: register no further timer"):
        env.execute()
    assert sink.results == [("a", 1000), ("a", 2000), ("a", 3000), ("a", 4000)]  # the batches before it


def test_a_continuous_processing_time_trigger_on_an_event_time_window_past_its_end_fails(tmp_path: Path) -> None:
    """Once processing time is past the window's last timestamp, the trigger registers its next
    firing at that timestamp again: the same timer fired for ever within one batch."""
    env, sink = StreamExecutionEnvironment(), CollectSink()
    (env.from_source(_source(tmp_path, [[{"key": "a", "ts": 100, "v": 1}], [{"key": "a", "ts": 900, "v": 2}]]),
                     WatermarkStrategy.for_bounded_out_of_orderness(300).with_timestamp_assigner("ts"))
     .key_by("key").window(TumblingEventTimeWindows.of(1000))  # its last timestamp 999 < the clock's 1000
     .trigger(ContinuousProcessingTimeTrigger.of(500)).sum("v").add_sink(sink))
    with pytest.raises(PipelineError, match=r"timers of key 'a' and window .* fired 10,001 times as time "
                                            r"advanced to 1000, the last at 999.*ContinuousProcessingTimeTrigger"):
        env.execute()
