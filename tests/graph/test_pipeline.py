"""The pipeline value a runtime receives: walked once, its sources in lane order."""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.api import CollectionSource, StreamExecutionEnvironment
from lowwater.core.errors import ConfigurationError
from lowwater.core.time_characteristic import TimeCharacteristic
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import (
    EventTimeTrigger,
    ProcessingTimeSessionWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    WindowAssigner,
)
from lowwater.graph import Pipeline, as_pipeline
from lowwater.graph.transformations import SourceTransformation
from lowwater.runtime.job import CompiledJob
from lowwater.runtime.reference import ReferenceRuntime

WM = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")


def _source(name: str) -> CollectionSource:
    return CollectionSource([[{"key": name, "ts": 1000, "value": 1}]])


def three_sources() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment()
    a = env.from_source(_source("a"), WM, name="a")
    b = env.from_source(_source("b"), WM, name="b")
    c = env.from_source(_source("c"), WM, name="c")
    c.union(a).key_by("key").window(TumblingEventTimeWindows.of(1000)).sum("value").collect()
    b.union(a).collect()
    return env


def test_a_pipeline_lists_its_sources_in_the_order_a_compiled_job_numbers_its_lanes() -> None:
    pipeline = three_sources().pipeline()
    compiled = CompiledJob(pipeline)
    assert [t.source for t in pipeline.sources] == [n.source for n in compiled.sources]
    assert [t.name for t in pipeline.sources] == ["c", "a", "b"]


def test_a_pipeline_walks_every_transformation_that_reaches_a_sink_once() -> None:
    pipeline = three_sources().pipeline()
    ids = [t.id for t in pipeline.walk()]
    assert len(ids) == len(set(ids))
    assert sum(isinstance(t, SourceTransformation) for t in pipeline.walk()) == 3
    assert pipeline.walk() is pipeline.walk()  # the walk made with the value, not a new one


def test_a_pipeline_keeps_the_environment_settings_it_was_made_with() -> None:
    env = three_sources()
    env.set_stream_time_characteristic(TimeCharacteristic.INGESTION_TIME)
    env.set_auto_watermark_interval(50)
    pipeline = env.pipeline()
    assert pipeline.time_characteristic is TimeCharacteristic.INGESTION_TIME
    assert pipeline.auto_watermark_interval_ms == 50
    assert pipeline.sinks == tuple(env.sinks)
    with pytest.raises(AttributeError):
        pipeline.sinks = ()  # type: ignore[misc]


def test_the_fingerprint_is_the_same_for_the_same_pipeline_built_twice() -> None:
    assert three_sources().pipeline().fingerprint() == three_sources().pipeline().fingerprint()


class _EveryElementItsOwnSecond(WindowAssigner[TimeWindow]):
    """A user's assigner, without a ``__repr__`` of its own."""

    def assign_windows(self, element: Any, timestamp: int, ctx: Any) -> list[TimeWindow]:
        return [TimeWindow(timestamp - timestamp % 1000, timestamp - timestamp % 1000 + 1000)]

    def default_trigger(self) -> Any:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


@pytest.mark.parametrize("assigner", [
    lambda: ProcessingTimeSessionWindows.with_gap(800), lambda: SlidingProcessingTimeWindows.of(2000, 1000),
    _EveryElementItsOwnSecond])
def test_the_fingerprint_holds_no_memory_address_of_a_window_assigner(assigner: Any) -> None:
    """The fingerprint took the assigner's ``repr``, and these assigners had none of their own, so it
    held the object's address: every run of the same job refused its own checkpoint as another
    pipeline's (a user probe, session 58)."""
    def fingerprint() -> dict[str, Any]:
        env = StreamExecutionEnvironment()
        env.from_source(_source("a"), WM).key_by("key").window(assigner()).sum("value").collect()
        return env.pipeline().fingerprint()

    first = fingerprint()
    assert first == fingerprint()
    assert " at 0x" not in str(first)


def test_the_fingerprint_tells_processing_time_assigners_settings_apart() -> None:
    def fingerprint(assigner: Any) -> dict[str, Any]:
        env = StreamExecutionEnvironment()
        env.from_source(_source("a"), WM).key_by("key").window(assigner).sum("value").collect()
        return env.pipeline().fingerprint()

    sessions = ProcessingTimeSessionWindows
    assert fingerprint(sessions.with_gap(800)) != fingerprint(sessions.with_gap(900))
    assert fingerprint(SlidingProcessingTimeWindows.of(2000, 1000)) != \
        fingerprint(SlidingProcessingTimeWindows.of(2000, 500))


def _read_by(source: Any) -> dict[str, Any]:
    env = StreamExecutionEnvironment()
    env.from_source(source, WM).key_by("key").window(TumblingEventTimeWindows.of(1000)).sum("value").collect()
    return env.pipeline().fingerprint()


def _resumed_then_refused(tmp_path: Any, now: dict[str, Any], unrecorded: str, other: dict[str, Any]) -> str:
    """A checkpoint recorded without the fingerprint's entry ``unrecorded`` (by older code) resumes
    under ``now``, and is bound to it from then on: ``other`` is refused, with this message."""
    from lowwater.spark.state import StateStore

    store = StateStore(tmp_path / "ck")
    store.claim({k: v for k, v in now.items() if k != unrecorded})
    store.commit_json(0, {})
    store.claim(now)  # resumed, and now bound to the entry
    with pytest.raises(ConfigurationError, match="belongs to a different pipeline") as refused:
        store.claim(other)
    return str(refused.value)


def test_a_checkpoint_is_bound_to_its_kafka_topics_in_order_and_its_logs_directory(tmp_path: Any) -> None:
    """The topics number a Kafka source's partitions, each with its watermark, and a log's offsets are
    its own: a checkpoint resumed with ``[B, A]`` fed B's records to A's watermarks, and one resumed on
    another log started at the first log's offsets, skipping the records before them, both without a
    word. A checkpoint recorded before the sources' identities were (no ``sources``) still resumes,
    and is bound to them from then on."""
    from lowwater.spark.kafka import KafkaSource
    from lowwater.spark.sources import PartitionedLogSource

    fields = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]
    ab, ba = (_read_by(KafkaSource("broker:9092", topics, fields)) for topics in (["a", "b"], ["b", "a"]))
    assert ab["sources"] != ba["sources"] and {k: v for k, v in ab.items() if k != "sources"} == \
        {k: v for k, v in ba.items() if k != "sources"}
    x, y = (_read_by(PartitionedLogSource(tmp_path / name, fields)) for name in ("x", "y"))
    assert x["sources"] == {"000": f"log {tmp_path / 'x'}"} != y["sources"]
    assert "sources" not in _read_by(_source("a"))  # an in-memory source: nothing to bind

    refused = _resumed_then_refused(tmp_path, ab, "sources", ba)  # a checkpoint of session 35's code
    assert 'topics ["a", "b"]' in refused and 'topics ["b", "a"]' in refused


def test_a_checkpoint_is_bound_to_its_sources_field_types(tmp_path: Any) -> None:
    """A field's declared type changed between restarts (``DECIMAL(10,2)`` to ``DOUBLE``) was taken:
    the fingerprint had the names alone, and the next batch failed in the window store's Parquet
    (``PARQUET_COLUMN_DATA_TYPE_MISMATCH``, naming a file under the checkpoint; a user probe, session
    53). A checkpoint recorded before the types were resumes, and is bound to them from then on."""
    from lowwater.spark.sources import PartitionedLogSource

    def by(amount: str, spelt: str = "BIGINT") -> dict[str, Any]:
        return _read_by(PartitionedLogSource(tmp_path / "log", [("key", "STRING"), ("ts", spelt), ("value", amount)]))

    decimal, double = by("DECIMAL(10,2)"), by("DOUBLE")
    assert decimal["field_types"] == {"000": {"key": "STRING", "ts": "BIGINT", "value": "DECIMAL(10,2)"}}
    assert by("decimal(10, 2)") == decimal and by("DECIMAL(10,2)", " bigint ") == decimal  # one type, spelt two ways
    refused = _resumed_then_refused(tmp_path, decimal, "field_types", double)  # a checkpoint of session 52's code
    assert "field 'value' was DECIMAL(10,2), now DOUBLE" in refused, refused


def test_a_sources_field_types_not_recorded_by_older_code_are_bound_from_the_next_run(tmp_path: Any) -> None:
    """A DataFrameSource's column types are in the fingerprint since session 54; a checkpoint of
    session 53's code recorded the other sources' types alone. It resumes, per source, and is bound
    to the new entry from then on."""
    from lowwater.spark.state import StateStore

    log = {"key": "STRING", "ts": "BIGINT", "value": "BIGINT"}
    now = {"000": "SourceTransformation | PartitionedLogSource", "001": "SourceTransformation | DataFrameSource",
           "field_types": {"000": log, "001": {"user": "STRING", "amount": "BIGINT"}}}
    store = StateStore(tmp_path / "ck")
    store.claim({**now, "field_types": {"000": log}})  # session 53's code: the log's types only
    store.commit_json(0, {})
    store.claim(now)  # resumed, and now bound to the DataFrameSource's types
    with pytest.raises(ConfigurationError, match=r"field 'amount' was BIGINT, now DOUBLE"):
        store.claim({**now, "field_types": {"000": log, "001": {"user": "STRING", "amount": "DOUBLE"}}})
    with pytest.raises(ConfigurationError, match="belongs to a different pipeline"):  # an entry recorded goes
        store.claim({**now, "field_types": {"001": {"user": "STRING", "amount": "BIGINT"}}})


def test_a_checkpoint_is_bound_to_the_order_its_sources_are_read_in(tmp_path: Any) -> None:
    """Spark keeps a query's offsets by its sources' places in the plan. ``b.union(a)`` resumed on the
    checkpoint of ``a.union(b)`` had the same fingerprint (the transformations by creation), so each
    source was read from the other's offsets: records lost, others read twice, the accounting
    balanced (a user probe, session 56). A checkpoint recorded before the order was resumes, and is
    bound to it from then on."""

    def united(swapped: bool) -> dict[str, Any]:
        env = StreamExecutionEnvironment()
        a = env.from_source(_source("a"), WM, name="a")
        b = env.from_source(_source("b"), WM, name="b")
        (b.union(a) if swapped else a.union(b)).key_by("key").window(TumblingEventTimeWindows.of(1000)) \
            .sum("value").collect()
        return env.pipeline().fingerprint()

    ab, ba = united(False), united(True)
    assert ab["source_order"] == ["000 a", "001 b"] and ba["source_order"] == ["001 b", "000 a"]
    assert ab["walk_order"] != ba["walk_order"]
    assert {k: v for k, v in ab.items() if k not in ("source_order", "walk_order")} == \
        {k: v for k, v in ba.items() if k not in ("source_order", "walk_order")}
    assert "source_order" not in _read_by(_source("a"))  # one source: one order
    refused = _resumed_then_refused(tmp_path, ab, "source_order", ba)  # a checkpoint of session 55's code
    assert "the sources are read in another order (a union's or a connect's inputs swapped): " \
           "['000 a', '001 b'], now ['001 b', '000 a']" in refused, refused


class _Bounded:
    """A user's generator: a bound it is given, a maximum it keeps, and a time it was made at."""

    def __init__(self, bound_ms: int) -> None:
        import time

        self.bound_ms = bound_ms
        self.max_ts = -(2**63) + bound_ms
        self.made_at = time.time()

    def on_event(self, event: Any, ts: int, output: Any) -> None:
        self.max_ts = max(self.max_ts, ts)

    def on_periodic_emit(self, output: Any) -> None:
        pass


def test_a_checkpoint_is_bound_to_its_timestamp_field_and_its_generators_settings(tmp_path: Any) -> None:
    """A restart carries the old assigner's and generator's data into the objects the current code
    builds: the general path kept timestamping by the old field after ``"ts"`` was edited to
    ``"ts2"``, and every path kept a user generator's old bound, both without a word (a user probe,
    session 56). The edits are refused, as a built-in strategy's bound is; what differs between two
    builds (the time a generator was made) is not a setting."""

    def by(strategy: WatermarkStrategy[Any]) -> dict[str, Any]:
        env = StreamExecutionEnvironment()
        env.from_source(_source("a"), strategy).key_by("key").window(TumblingEventTimeWindows.of(1000)) \
            .sum("value").collect()
        return env.pipeline().fingerprint()

    def made(bound_ms: int) -> WatermarkStrategy[Any]:
        return WatermarkStrategy.for_generator(lambda ctx: _Bounded(bound_ms)).with_timestamp_assigner("ts")

    ts = by(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts"))
    assert ts["strategy_settings"] == {"000": {"assigner.field": "'ts'"}}
    ts2 = by(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts2"))
    refused = _resumed_then_refused(tmp_path / "field", ts, "strategy_settings", ts2)  # of session 55's code
    assert "the watermark strategy's assigner.field was 'ts', now 'ts2'" in refused, refused

    zero = by(made(0))
    assert zero == by(made(0))  # made at another time: the same settings
    assert zero["strategy_settings"]["000"]["generator.bound_ms"] == "0" and "generator.made_at" not in str(zero)
    refused = _resumed_then_refused(tmp_path / "bound", zero, "strategy_settings", by(made(10_000)))
    assert "the watermark strategy's generator.bound_ms was 0, now 10000" in refused, refused


def test_a_checkpoint_is_bound_to_the_order_its_operators_are_walked_in(tmp_path: Any) -> None:
    """The general path compiles its operators in the walk from the sinks, and restores each one's
    state by its place: two ``add_sink`` lines swapped, each sink on its own window, swapped the two
    windows' state, 1 s windows coming out of the 10 s operator (a user probe, session 56)."""
    from lowwater.api.sinks import FunctionSink

    def two_windows(big_first: bool) -> dict[str, Any]:
        env = StreamExecutionEnvironment()
        keyed = env.from_source(_source("a"), WM).key_by("key")
        small = keyed.window(TumblingEventTimeWindows.of(1000)).sum("value")
        big = keyed.window(TumblingEventTimeWindows.of(10_000)).sum("value")
        for out in (big, small) if big_first else (small, big):
            out.add_sink(FunctionSink(print))
        return env.pipeline().fingerprint()

    as_made, swapped = two_windows(False), two_windows(True)
    assert {k: v for k, v in as_made.items() if k != "walk_order"} == \
        {k: v for k, v in swapped.items() if k != "walk_order"}
    refused = _resumed_then_refused(tmp_path, as_made, "walk_order", swapped)  # a checkpoint of session 55's code
    assert "the operators are reached from the sinks in another order (sinks added" in refused, refused


def test_a_checkpoint_is_bound_to_a_classic_extractors_bound_and_its_violation_handler(tmp_path: Any) -> None:
    """``for_legacy`` strategies are described by their extractor's class alone: a bound edited from
    0 to 10 s, or an ``IgnoringHandler`` replaced by a ``FailingHandler``, was overwritten by the
    checkpoint's (a user probe, session 56)."""
    from lowwater.core.watermarks.legacy import (
        AscendingTimestampExtractor,
        BoundedOutOfOrdernessTimestampExtractor,
        FailingHandler,
        IgnoringHandler,
    )

    def by(extractor: Any) -> dict[str, Any]:
        env = StreamExecutionEnvironment()
        env.from_source(_source("a"), WatermarkStrategy.for_legacy(extractor)).key_by("key") \
            .window(TumblingEventTimeWindows.of(1000)).sum("value").collect()
        return env.pipeline().fingerprint()

    def ts(e: Any) -> int:
        return int(e["ts"])

    zero, ten = (by(BoundedOutOfOrdernessTimestampExtractor(bound, ts)) for bound in (0, 10_000))
    refused = _resumed_then_refused(tmp_path / "bound", zero, "strategy_settings", ten)
    assert "the watermark strategy's assigner.max_out_of_orderness_ms was 0, now 10000" in refused, refused
    ignoring = by(AscendingTimestampExtractor(ts, violation_handler=IgnoringHandler()))
    refused = _resumed_then_refused(tmp_path / "handler", ignoring, "strategy_settings",
                                    by(AscendingTimestampExtractor(ts, violation_handler=FailingHandler())))
    assert "assigner.violation_handler was IgnoringHandler, now FailingHandler" in refused, refused


def test_a_checkpoint_refused_for_a_sink_removed_says_that_sink_was_removed(tmp_path: Any) -> None:
    """The refusal compared the transformations by position: a sink removed read as every
    transformation after it changed into the next one (``was 'SinkTransformation |
    ForeachDataFrameSink', now 'SideOutputTransformation'; ...``)."""
    from lowwater.api import OutputTag
    from lowwater.api.sinks import FunctionSink
    from lowwater.spark.state import StateStore

    def build(extra_sink: bool) -> dict[str, Any]:
        env = StreamExecutionEnvironment()
        late = OutputTag("late")
        out = (env.from_source(_source("a"), WM).key_by("key").window(TumblingEventTimeWindows.of(1000))
               .side_output_late_data(late).sum("value"))
        out.collect()
        if extra_sink:
            out.add_sink(FunctionSink(print))
        out.get_side_output(late).collect()
        return env.pipeline().fingerprint()

    store = StateStore(tmp_path / "ck")
    store.claim(build(True))
    store.commit_json(0, {})
    with pytest.raises(ConfigurationError) as refused:
        store.claim(build(False))
    message = str(refused.value)
    assert "('SinkTransformation | FunctionSink' removed; a checkpoint is bound to its pipeline's sources, " \
           "operators and sinks, in order)" in message, message
    assert "SideOutputTransformation" not in message


def test_as_pipeline_takes_a_pipeline_or_an_environment_and_refuses_anything_else() -> None:
    env = three_sources()
    pipeline = env.pipeline()
    assert as_pipeline(pipeline) is pipeline
    assert isinstance(as_pipeline(env), Pipeline)
    with pytest.raises(ConfigurationError, match="expected a Pipeline or a StreamExecutionEnvironment"):
        as_pipeline("env")  # type: ignore[arg-type]


def test_execute_hands_a_pipeline_to_a_runtime_given_as_an_object() -> None:
    received: list[Any] = []

    class Recording:
        def execute(self, pipeline: Any, job_name: str = "job") -> str:
            received.append((pipeline, job_name))
            return "done"

    env = three_sources()
    assert env.execute("j", runtime=Recording()) == "done"
    assert isinstance(received[0][0], Pipeline) and received[0][1] == "j"


def test_a_runtime_object_takes_no_options_through_execute() -> None:
    with pytest.raises(ConfigurationError, match="constructor"):
        three_sources().execute(runtime=ReferenceRuntime(), max_batches=1)


def test_a_runtime_name_not_in_the_registry_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="unknown runtime 'flink'"):
        three_sources().execute(runtime="flink")  # type: ignore[arg-type]


def test_the_reference_runtime_runs_a_pipeline_value_and_an_environment_alike() -> None:
    env = three_sources()
    by_value = ReferenceRuntime().execute(env.pipeline(), "j")
    by_env = ReferenceRuntime().execute(env, "j")
    assert by_value.watermark_history == by_env.watermark_history


@pytest.mark.parametrize("make", [lambda: StreamExecutionEnvironment(auto_watermark_interval=0),
                                  lambda: StreamExecutionEnvironment().set_auto_watermark_interval(0)])
def test_an_auto_watermark_interval_of_zero_is_refused_as_flinks_switch_off_which_lowwater_lacks(make: Any) -> None:
    """The constructor took 0 (the setter refused it): Flink's 0 turns periodic watermarks off,
    which lowwater does not do, so a pipeline that asked for it would silently get them."""
    with pytest.raises(ConfigurationError, match="Flink's 0 turns periodic watermarks off"):
        make()
