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


def test_a_count_window_is_refused_by_the_keyed_path_as_a_global_window(tmp_path: Path) -> None:
    """It said "processing-time windows": a count window has no time at all."""
    env = StreamExecutionEnvironment()
    source = BatchFilesSource(tmp_path / "in", [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")], [0])
    (env.from_source(source, WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").count_window(2).sum("value").collect())
    assert keyed_plan(env) == (None, "global windows (count_window)")  # type: ignore[arg-type]
