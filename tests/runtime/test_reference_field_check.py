"""The reference runtime checks a pipeline's field names against its sources before it runs, as Spark does."""

from __future__ import annotations

from pathlib import Path

import pytest

from lowwater.api import StreamExecutionEnvironment
from lowwater.core.errors import ConfigurationError
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.io import PartitionedLogWriter
from lowwater.runtime.reference import ReferenceRuntime
from lowwater.spark.sources import PartitionedLogSource

FIELDS = [("user", "STRING"), ("ts", "BIGINT"), ("amount", "BIGINT")]


@pytest.mark.parametrize(("key", "ts", "field", "what", "hint"), [
    ("usr", "ts", "amount", 'key_by("usr")', '"user"'),
    ("user", "time", "amount", 'with_timestamp_assigner("time")', None),
    ("user", "ts", "amt", 'sum("amt")', '"amount"'),
])
def test_a_field_the_source_does_not_declare_is_refused_before_the_run(
        tmp_path: Path, key: str, ts: str, field: str, what: str, hint: str | None) -> None:
    """It made every record a dead letter, and the run succeeded (exit code 0 in the CLI), where
    Spark refused the same pipeline before it started."""
    PartitionedLogWriter(tmp_path / "log").append(0, [{"user": "ann", "ts": 1, "amount": 5}])
    env = StreamExecutionEnvironment()
    (env.from_source(PartitionedLogSource(tmp_path / "log", FIELDS),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(ts))
     .key_by(key).window(TumblingEventTimeWindows.of(1000)).sum(field).collect())
    with pytest.raises(ConfigurationError, match="names a field that PartitionedLogSource does not declare") as e:
        ReferenceRuntime().execute(env)
    assert what in str(e.value)
    assert str(e.value).endswith("or declare the field in the source's value_fields")
    assert (f"did you mean {hint}? Fix the name" in str(e.value)) if hint else \
        "did you mean" not in str(e.value) and "amount. Fix the name" in str(e.value)  # the list ends


def _union_key(env: StreamExecutionEnvironment, a: object, b: object) -> None:
    env.from_source(a).union(env.from_source(b)).key_by("usr").window(TumblingEventTimeWindows.of(1000)) \
        .sum("amount").collect()


def _union_sum(env: StreamExecutionEnvironment, a: object, b: object) -> None:
    env.from_source(a).union(env.from_source(b)).key_by("user").window(TumblingEventTimeWindows.of(1000)) \
        .sum("amout").collect()


def _process_key(env: StreamExecutionEnvironment, a: object, b: object) -> None:
    from lowwater.core.process import KeyedProcessFunction

    class Echo(KeyedProcessFunction):
        def process_element(self, value: object, ctx: object) -> object:
            yield value

    env.from_source(a).key_by("usr").process(Echo()).collect()


def _connect_key(env: StreamExecutionEnvironment, a: object, b: object) -> None:
    from lowwater.core.process import KeyedCoProcessFunction

    class Both(KeyedCoProcessFunction):
        def process_element1(self, value: object, ctx: object) -> object:
            yield value

        def process_element2(self, value: object, ctx: object) -> object:
            yield value

    env.from_source(a).connect(env.from_source(b)).key_by("user", "usr").process(Both()).collect()


@pytest.mark.parametrize(("build", "what"), [(_union_key, 'key_by("usr")'), (_union_sum, 'sum("amout")'),
                                             (_process_key, 'key_by("usr")'), (_connect_key, 'key_by("usr")')])
def test_a_field_misspelt_after_a_union_or_for_a_process_function_is_refused_before_the_run(
        tmp_path: Path, build: object, what: str) -> None:
    """Only a window fed straight from one source was checked: after a ``union``, or as the key of
    a process function or of a ``connect``, every record was a dead letter ("missing key (usr)"),
    the CLI exited 0, and the checkpoint was bound to the broken pipeline (a user probe, session 53)."""
    PartitionedLogWriter(tmp_path / "log").append(0, [{"user": "ann", "ts": 1, "amount": 5}])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    env = StreamExecutionEnvironment()
    sources = [PartitionedLogSource(tmp_path / "log", FIELDS) for _ in range(2)]
    env_from_source = env.from_source  # each source with the strategy, as the builders' one-argument calls
    env.from_source = lambda source: env_from_source(source, strategy)  # type: ignore[method-assign]
    build(env, *sources)  # type: ignore[operator]
    with pytest.raises(ConfigurationError, match="names a field that PartitionedLogSource does not declare") as e:
        ReferenceRuntime().execute(env)
    assert what in str(e.value) and "did you mean" in str(e.value), str(e.value)


def test_a_field_declared_as_a_type_none_of_its_values_read_as_is_refused_before_the_run(tmp_path: Path) -> None:
    PartitionedLogWriter(tmp_path / "log").append(0, [{"user": "ann", "ts": 1000, "amount": 5}])
    env = StreamExecutionEnvironment()
    (env.from_source(PartitionedLogSource(tmp_path / "log", [("user", "STRING"), ("ts", "TIMESTAMP"),
                                                              ("amount", "BIGINT")]),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("user").window(TumblingEventTimeWindows.of(1000)).sum("amount").collect())
    with pytest.raises(ConfigurationError, match="field 'ts' is declared TIMESTAMP, but none of the 1 values"):
        ReferenceRuntime().execute(env)


def test_a_line_that_does_not_parse_has_sparks_reason_on_the_reference_runtime(tmp_path: Path) -> None:
    """The reference runtime gave the reader's reason bare (``invalid JSON (...): 'not json'``), where
    every Spark path and docs/reliability.md say ``record does not parse: '<the reader's reason>'``."""
    from lowwater.api import CollectSink

    PartitionedLogWriter(tmp_path / "log").append(0, [{"user": "ann", "ts": 1, "amount": 5}])
    segment = next((tmp_path / "log" / "partition=0").glob("segment-*.jsonl"))
    with open(segment, "a") as f:
        f.write("not json\n")
    env = StreamExecutionEnvironment()
    (env.from_source(PartitionedLogSource(tmp_path / "log", FIELDS),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("user").window(TumblingEventTimeWindows.of(1000)).sum("amount").collect())
    dead = CollectSink()
    ReferenceRuntime(dead_letter_sink=dead).execute(env)
    assert [(d["offset"], d["reason"], d["record"]) for d in dead.results] == [
        (1, "record does not parse: \"invalid JSON (Expecting value: line 1 column 1 (char 0)): 'not json'\"", None)]


def test_a_batch_files_element_is_its_declared_fields_as_spark_reads_it(tmp_path: Path) -> None:
    """A record missing a field had it absent on the reference runtime and None on Spark (whose
    schema reads the declared fields), so their dead letters differed; an undeclared field was
    part of the element here only."""
    from lowwater.api import CollectSink
    from lowwater.spark.sources import BatchFilesSource

    BatchFilesSource.write(tmp_path / "in", [[{"key": "a", "ts": 100, "v": 1, "extra": 7}, {"key": "a", "ts": 300}]])
    env = StreamExecutionEnvironment()
    (env.from_source(BatchFilesSource(tmp_path / "in", [("key", "STRING"), ("ts", "BIGINT"), ("v", "BIGINT")], [0]),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(TumblingEventTimeWindows.of(1000)).sum("v").collect())
    dead = CollectSink()
    ReferenceRuntime(dead_letter_sink=dead).execute(env)
    assert [(d["offset"], d["reason"], d["record"]) for d in dead.results] == [
        (1, "missing value (v)", {"key": "a", "ts": 300, "v": None})]


@pytest.mark.parametrize(("ts", "field", "what"), [
    ("code", "amount", 'with_timestamp_assigner("code") reads \'code\', which PartitionedLogSource declares as STRING'),
    ("ts", "code", 'sum("code") reads \'code\', which PartitionedLogSource declares as STRING'),
    ("ts", "flag", 'sum("flag") reads \'flag\', which PartitionedLogSource declares as BOOLEAN'),
    ("price", "amount", 'with_timestamp_assigner("price") reads \'price\', which PartitionedLogSource declares as '
                        'DECIMAL(15,0)'),
])
def test_a_timestamp_or_sum_of_a_field_declared_as_text_is_refused_before_the_run(
        tmp_path: Path, ts: str, field: str, what: str) -> None:
    """Every record became a dead letter (``missing or non-numeric timestamp``, ``non-numeric value``)
    and the run succeeded with no result."""
    fields = [*FIELDS, ("code", "STRING"), ("flag", "BOOLEAN"), ("price", "DECIMAL(15,0)")]
    PartitionedLogWriter(tmp_path / "log").append(0, [{"user": "ann", "ts": 1, "amount": 5, "code": "7",
                                                       "flag": True, "price": 1000}])
    env = StreamExecutionEnvironment()
    (env.from_source(PartitionedLogSource(tmp_path / "log", fields),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(ts))
     .key_by("user").window(TumblingEventTimeWindows.of(1000)).sum(field).collect())
    with pytest.raises(ConfigurationError, match="every record would be a dead letter") as e:
        ReferenceRuntime().execute(env)
    assert what in str(e.value)


def test_a_min_of_a_field_declared_as_text_is_taken(tmp_path: Path) -> None:
    PartitionedLogWriter(tmp_path / "log").append(0, [{"user": "ann", "ts": 1, "code": "b"},
                                                      {"user": "ann", "ts": 2, "code": "a"}])
    env = StreamExecutionEnvironment()
    results = (env.from_source(PartitionedLogSource(tmp_path / "log", [("user", "STRING"), ("ts", "BIGINT"),
                                                                         ("code", "STRING")]),
                               WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
               .key_by("user").window(TumblingEventTimeWindows.of(1000)).min("code").collect())
    env.execute()
    assert [r.value for r in results.results] == ["a"]
