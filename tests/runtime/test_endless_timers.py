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
from lowwater.runtime import ReferenceRuntime
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


class ProcessingHeartbeat(KeyedProcessFunction):  # type: ignore[misc]
    """A one-second processing-time heartbeat, counting its beats, as a Flink job keeps one."""

    def process_element(self, value: Any, ctx: Any) -> None:
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 1000)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        ctx.timer_service().register_processing_time_timer(timestamp + 1000)
        if timestamp % 3_600_000 == 0:
            yield ctx.get_current_key(), timestamp


@pytest.mark.parametrize("time", ["processing", "event"])
def test_a_heartbeat_fires_every_beat_a_36_hour_gap_owes_and_goes_on(tmp_path: Path, time: str) -> None:
    """A processing-time outage of 36 hours (a job down over a night and a day), or an event-time gap of
    36 hours in the data, owes a one-second heartbeat 129,600 firings, which end at the time advanced to:
    Flink's loop fires them all. It failed as "would fire for ever" past 100,000, and since a replay runs its
    batch with the clock it first had, a job could not resume (a user probe, session 64)."""
    gap = 36 * 3_600_000
    if time == "processing":
        batches, function = [[{"key": "a", "ts": 0}], [], [{"key": "b", "ts": 1}]], ProcessingHeartbeat()
        clock = [0, 1000, 1000 + gap]
    else:
        batches, function = [[{"key": "a", "ts": 0}], [{"key": "b", "ts": gap + 1}]], Heartbeat()
        clock = None
    BatchFilesSource.write(tmp_path / "in", batches)
    source = BatchFilesSource(tmp_path / "in", BatchFilesSource.infer_fields(batches), [0], clock)
    env, sink = StreamExecutionEnvironment(), CollectSink()
    (env.from_source(source, WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts"))
     .key_by("key").process(function).add_sink(sink))
    ReferenceRuntime(max_batches=len(batches)).execute(env)  # input that goes on: no final MAX watermark
    hours = [ts for key, ts in sink.results if key == "a" and ts % 3_600_000 == 0]
    if time == "processing":  # every hour's beat up to the clock of the last batch, 36 of them
        assert hours == [h * 3_600_000 for h in range(1, 37)]
    else:  # every beat up to the watermark 36 hours on (gap), each once, in order
        beats = [ts for key, ts in sink.results if key == "a"]
        assert beats == list(range(1000, gap + 1, 1000)) and len(beats) == 129_600
