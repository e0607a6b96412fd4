"""The Spark runtime plans from the Pipeline's one walk: choosing a path walks no graph again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import lowwater.graph.pipeline as pipeline_module
from lowwater.api import StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import EventTimeSessionWindows, TumblingEventTimeWindows
from lowwater.graph.field_check import check_field_names
from lowwater.spark.general import find_sources
from lowwater.spark.keyed import keyed_plan
from lowwater.spark.plan import native_plan
from lowwater.spark.sources import BatchFilesSource


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    count: list[int] = []
    real = pipeline_module._walk

    def counting(sinks: Any) -> Any:
        count.append(1)
        return real(sinks)

    monkeypatch.setattr(pipeline_module, "_walk", counting)
    return count


@pytest.mark.parametrize("assigner", [TumblingEventTimeWindows.of(1000), EventTimeSessionWindows.with_gap(1000)],
                         ids=["native", "not native"])
def test_planning_a_spark_job_walks_the_graph_once(tmp_path: Path, walks: list[int], assigner: Any) -> None:
    BatchFilesSource.write(tmp_path, [[{"key": "a", "ts": 1, "value": 1}]])
    source = BatchFilesSource(tmp_path, [("key", "string"), ("ts", "long"), ("value", "long")], [0])
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    env.from_source(source, strategy).key_by("key").window(assigner).sum("value").collect()

    p = env.pipeline()
    find_sources(p)
    check_field_names(p)
    native_plan(p)
    keyed_plan(p)  # type: ignore[arg-type]  # keyed.py still annotates the environment (see engine.py)
    p.fingerprint()
    assert len(walks) == 1


def test_a_pipeline_the_operators_cannot_run_is_refused_before_spark_starts(tmp_path: Path) -> None:
    # find_sources no longer compiles the pipeline; the general path's processor does, when made
    from lowwater.core.errors import PipelineError
    from lowwater.graph import Pipeline
    from lowwater.graph.sinks import CollectSink
    from lowwater.graph.transformations import OutputTag, SideOutputTransformation, SinkTransformation
    from lowwater.spark.general import GeneralProcessor

    BatchFilesSource.write(tmp_path, [[{"key": "a", "ts": 1, "value": 1}]])
    env = StreamExecutionEnvironment()
    mapped = env.from_source(BatchFilesSource(tmp_path, [("key", "string")], [0])).map(lambda e: e)
    side = SideOutputTransformation("side", mapped.transformation, OutputTag("x"))
    p = Pipeline.of([SinkTransformation("sink", side, CollectSink())])
    with pytest.raises(PipelineError, match="get_side_output is only available"):
        GeneralProcessor(p, find_sources(p))


def test_count_and_processing_time_windows_take_the_keyed_path(tmp_path: Path) -> None:
    """They stepped on the driver (the general path) until session 53; their state is per key, as
    an event-time window's is, and so is an ingestion-time pipeline's. A processing-time characteristic
    (no watermarks) still takes the general path."""
    from lowwater.core.time_characteristic import TimeCharacteristic
    from lowwater.core.windows import SlidingProcessingTimeWindows

    def keyed(build: Any, characteristic: TimeCharacteristic | None = None) -> tuple[bool, str]:
        env = StreamExecutionEnvironment()
        if characteristic is not None:
            env.set_stream_time_characteristic(characteristic)
        source = BatchFilesSource(tmp_path / "in", [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")], [0])
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
        build(env.from_source(source, strategy).key_by("key")).sum("value").collect()
        plan, why = keyed_plan(env)  # type: ignore[arg-type]
        return plan is not None, why

    assert keyed(lambda k: k.count_window(2)) == (True, "keyed")
    assert keyed(lambda k: k.window(SlidingProcessingTimeWindows.of(2000, 1000))) == (True, "keyed")
    assert keyed(lambda k: k.time_window(1000), TimeCharacteristic.INGESTION_TIME) == (True, "keyed")
    assert keyed(lambda k: k.time_window(1000), TimeCharacteristic.PROCESSING_TIME) == (
        False, "the processing-time characteristic")
