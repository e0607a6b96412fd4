"""Field names and field types are checked before Spark starts, and a failed run binds no checkpoint."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import CollectSink, StreamExecutionEnvironment
from lowwater.core.errors import ConfigurationError, PipelineError
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.io import PartitionedLogWriter
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sources import PartitionedLogSource

pytestmark = pytest.mark.spark

FIELDS = [("user", "STRING"), ("ts", "BIGINT"), ("amount", "BIGINT")]


def _log(root: Path) -> Path:
    PartitionedLogWriter(root).append(0, [{"user": "ann", "ts": 1_000, "amount": 2},
                                          {"user": "bob", "ts": 2_000, "amount": 3}])
    return root


def _env(log: Path, key: str = "user", ts: Any = "ts", agg: str = "amount",
         fields: list[tuple[str, str]] = FIELDS) -> tuple[StreamExecutionEnvironment, CollectSink]:
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(ts)
    out = (env.from_source(PartitionedLogSource(log, fields), strategy).key_by(key)
           .window(TumblingEventTimeWindows.of(10_000)).sum(agg)).collect()
    return env, out


@pytest.mark.parametrize(("what", "kwargs"), [
    ('key_by("shop")', {"key": "shop"}),
    ('with_timestamp_assigner("time")', {"ts": "time"}),
    ('sum("amout")', {"agg": "amout"}),
])
def test_a_field_name_the_source_does_not_declare_is_an_error_before_spark_starts(
        spark: Any, tmp_path: Path, what: str, kwargs: dict[str, str]) -> None:
    log = _log(tmp_path / "log")
    env, _ = _env(log, **kwargs)
    started = time.monotonic()
    with pytest.raises(ConfigurationError) as info:
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    assert time.monotonic() - started < 5
    assert what in str(info.value) and "user, ts, amount" in str(info.value)
    assert not (tmp_path / "ck" / "lowwater" / "pipeline.json").exists()
    env, out = _env(log)  # the fixed pipeline on the same checkpoint
    SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    assert sorted((r.key, r.value) for r in out.results) == [("ann", 2), ("bob", 3)]


def test_a_declared_type_the_data_cannot_be_read_as_is_an_error_before_the_run(spark: Any, tmp_path: Path) -> None:
    log = _log(tmp_path / "log")
    env, _ = _env(log, fields=[("user", "STRING"), ("ts", "TIMESTAMP"), ("amount", "BIGINT")])
    with pytest.raises(ConfigurationError, match=r"'ts' is declared TIMESTAMP.*1000 is not a TIMESTAMP"):
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)


def test_a_run_that_committed_no_batch_does_not_bind_the_checkpoint(spark: Any, tmp_path: Path) -> None:
    log = _log(tmp_path / "log")

    def broken(e: dict[str, Any], prev: int) -> int:
        raise ValueError("broken assigner")

    env, _ = _env(log, ts=broken)
    with pytest.raises(PipelineError, match="broken assigner"):
        SparkRuntime(str(tmp_path / "ck"), spark=spark, path="general", end_of_input=True).execute(env)
    assert (tmp_path / "ck" / "lowwater" / "pipeline.json").exists()  # claimed, but nothing committed
    env, out = _env(log)
    SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)  # another pipeline, accepted
    assert sorted((r.key, r.value) for r in out.results) == [("ann", 2), ("bob", 3)]

    env, _ = _env(log, agg="ts")  # now the checkpoint holds state: a change is refused, in words
    with pytest.raises(ConfigurationError) as info:
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    message = str(info.value)
    assert "belongs to a different pipeline" in message and "Sum" in message and "--checkpoint" in message
