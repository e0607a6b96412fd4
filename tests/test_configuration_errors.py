"""Configuration errors: each names its parameter and says what is accepted, before any data is read.

(A checkpoint of another pipeline is refused before any data is read too:
``tests/spark/test_engine.py::test_a_checkpoint_of_another_pipeline_is_refused_before_any_data_is_read``.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from lowwater.api import CollectionSource, StreamExecutionEnvironment
from lowwater.core.errors import ConfigurationError
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from lowwater.runtime.reference import ReferenceRuntime


def _keyed() -> Any:
    return StreamExecutionEnvironment().from_source(CollectionSource([[{"k": 1}]])).key_by("k")


CASES: list[tuple[str, Callable[[], Any], str, str]] = [
    ("negative bound", lambda: WatermarkStrategy.for_bounded_out_of_orderness(-1), "max_out_of_orderness", ">= 0"),
    ("zero idleness", lambda: WatermarkStrategy.for_monotonous_timestamps().with_idleness(0), "idleness", "> 0"),
    ("assigner not a function", lambda: WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(42),
     "timestamp_assigner", "function"),
    ("negative time lag", lambda: WatermarkStrategy.for_time_lag(-1), "lag", ">= 0"),
    ("zero window", lambda: TumblingEventTimeWindows.of(0), "size", "> 0"),
    ("offset beyond the size", lambda: TumblingEventTimeWindows.of(10, 20), "offset", "abs(offset) < size"),
    ("zero slide", lambda: SlidingEventTimeWindows.of(10, 0), "slide", "> 0"),
    ("zero session gap", lambda: EventTimeSessionWindows.with_gap(0), "gap", "> 0"),
    ("unreadable duration", lambda: TumblingEventTimeWindows.of("ten seconds"), "size", "'10 seconds'"),
    ("negative lateness", lambda: _keyed().window(TumblingEventTimeWindows.of(5)).allowed_lateness("-1 s"),
     "allowed_lateness", "negative"),
    ("a sink that is not one", lambda: _keyed().window(TumblingEventTimeWindows.of(5)).sum("v").add_sink(42),
     "sink", "Sink"),
    ("a dead-letter sink that is not one", lambda: ReferenceRuntime(dead_letter_sink=print),  # type: ignore[arg-type]
     "dead_letter_sink", "Sink"),
]


@pytest.mark.parametrize(("case", "call", "parameter", "says"), CASES, ids=[c[0] for c in CASES])
def test_invalid_configuration_names_the_parameter(case: str, call: Callable[[], Any], parameter: str,
                                                   says: str) -> None:
    with pytest.raises(ConfigurationError) as e:
        call()
    assert e.value.parameter == parameter
    assert says in str(e.value)


SPARK_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown path", {"path": "fast"}, "path"),
    ("unreadable trigger", {"trigger": "soon"}, "trigger"),
    ("zero trigger", {"trigger": "0 ms"}, "trigger"),
    ("zero snapshot interval", {"snapshot_every": 0}, "snapshot_every"),
    ("a dead-letter sink that is not one", {"dead_letter_sink": print}, "dead_letter_sink"),
    ("a clock that is not one", {"clock": 5}, "clock"),
    # an interval's query runs until stopped: end_of_input was ignored, its last windows never fired
    ("end of input with an interval trigger", {"trigger": "1 second", "end_of_input": True}, "end_of_input"),
    ("end of input that is not a bool", {"end_of_input": "yes"}, "end_of_input"),
]


@pytest.mark.parametrize(("case", "options", "parameter"), SPARK_CASES, ids=[c[0] for c in SPARK_CASES])
def test_invalid_spark_runtime_options_fail_before_spark_starts(case: str, options: dict[str, Any],
                                                                parameter: str, tmp_path: Any) -> None:
    from lowwater.spark.engine import SparkRuntime

    with pytest.raises(ConfigurationError) as e:
        SparkRuntime(str(tmp_path / "ck"), **options)
    assert e.value.parameter == parameter
    assert not (tmp_path / "ck").exists(), "nothing written"


def test_invalid_sinks_name_the_parameter() -> None:
    from lowwater.spark.sinks import DirectorySink, ForeachDataFrameSink, PostgresSink
    from lowwater.spark.sinks.delta import DeltaSink

    for call, parameter in [(lambda: DirectorySink("/tmp/x", "csv"), "fmt"),  # type: ignore[arg-type]
                            (lambda: ForeachDataFrameSink(print, empty_batches="no"),  # type: ignore[arg-type]
                             "empty_batches"),
                            (lambda: DirectorySink("out", empty_batches=1),  # type: ignore[arg-type]
                             "empty_batches"),
                            (lambda: PostgresSink("postgres://h/db", "t"), "jdbc_url"),
                            (lambda: PostgresSink("jdbc:postgresql://h/db", "1bad"), "table"),
                            (lambda: DirectorySink(5), "path"),  # type: ignore[arg-type]
                            (lambda: DirectorySink(""), "path"),
                            (lambda: DeltaSink(5), "path"),  # type: ignore[arg-type]
                            (lambda: DeltaSink(""), "path"),
                            (lambda: DeltaSink("t", name=None), "name"),  # type: ignore[arg-type]
                            (lambda: DeltaSink("t", app_id=7), "app_id"),  # type: ignore[arg-type]
                            (lambda: DeltaSink("t", with_batch_id="yes"), "with_batch_id")]:  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError) as e:
            call()
        assert e.value.parameter == parameter


def _windowed_with_late(tmp: Any) -> tuple[StreamExecutionEnvironment, Any, Any]:
    from lowwater.api import OutputTag

    late = OutputTag("late")
    recs = [{"key": "a", "ts": 100, "value": 1, "p": 0}, {"key": "a", "ts": 5000, "value": 2, "p": 0},
            {"key": "a", "ts": 10, "value": 3, "p": 0}]
    env = StreamExecutionEnvironment()
    w = (env.from_source(CollectionSource([recs[:2], recs[2:]], partitions=1, partition_of="p"),
                         WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
         .key_by("key").window(TumblingEventTimeWindows.of(1000)).side_output_late_data(late).sum("value"))
    return env, w, w.get_side_output(late)


def test_two_outputs_written_where_each_batch_replaces_the_last_are_refused(tmp_path: Any) -> None:
    """A sink that keeps one write per batch id (a directory, a Delta app id, a PostgreSQL table, a
    CollectSink) on two outputs lost one: batch 1 has both a fired window and a late row, and the
    late row's write replaced the window's. Refused before anything runs, naming both outputs."""
    from lowwater.api import CollectSink
    from lowwater.core.clock import ManualClock
    from lowwater.spark.sinks import DirectorySink, PostgresSink
    from lowwater.spark.sinks.delta import DeltaSink

    pairs = [
        (DirectorySink(tmp_path / "all", "jsonl"), None),
        (DirectorySink(tmp_path / "same"), DirectorySink(str(tmp_path / "same") + "/", "jsonl")),
        (DeltaSink(str(tmp_path / "t")), DeltaSink(str(tmp_path / "t"))),
        # one table spelled two ways: the app ids are the job's and the name's after bind_job, so
        # Delta skipped every batch of the late output (session 53's probe: counted, written nowhere)
        (DeltaSink(str(tmp_path / "t")), DeltaSink(str(tmp_path / "t") + "/")),
        (DeltaSink(str(tmp_path / "t")), DeltaSink((tmp_path / "t").as_uri())),
        (DeltaSink(str(tmp_path / "t"), app_id="a"), DeltaSink(f"file:{tmp_path}/./t", app_id="a")),
        (DirectorySink(tmp_path / "same"), DirectorySink((tmp_path / "same").as_uri(), "jsonl")),
        (PostgresSink("jdbc:postgresql://h/db", "totals"), PostgresSink("jdbc:postgresql://h/db", "totals")),
        (CollectSink(), None),
    ]
    for first, second in pairs:
        env, results, lates = _windowed_with_late(tmp_path)
        results.add_sink(first)
        lates.add_sink(second or first)
        with pytest.raises(ConfigurationError) as e:
            env.execute(clock=ManualClock(0))
        assert e.value.parameter == "sinks"
        assert "the output of" in str(e.value) and "the side output 'late'" in str(e.value), str(e.value)
    # the dead letters too, on either runtime
    env, results, lates = _windowed_with_late(tmp_path)
    results.add_sink(DirectorySink(tmp_path / "r"))
    with pytest.raises(ConfigurationError, match="the dead letters"):
        ReferenceRuntime(dead_letter_sink=DirectorySink(tmp_path / "r")).execute(env)
    # what may be shared still is: two directories, a function sink on both outputs
    from lowwater.api.sinks import FunctionSink
    from lowwater.spark.sinks import read_directory

    seen: list[Any] = []
    env, results, lates = _windowed_with_late(tmp_path)
    results.add_sink(DirectorySink(tmp_path / "results", "jsonl"))
    lates.add_sink(DirectorySink(tmp_path / "late", "jsonl"))
    results.add_sink(FunctionSink(seen.append))
    lates.add_sink(FunctionSink(seen.append))
    env.execute(clock=ManualClock(0))
    assert [(r["window_start"], r["value"]) for r in read_directory(tmp_path / "results")] == [(0, 1), (5000, 2)]
    assert [r["ts"] for r in read_directory(tmp_path / "late")] == [10]
    assert len(seen) == 3
    # one Delta table with two names or two app ids, two tables, are two targets
    from lowwater.graph.sinks import check_distinct_targets

    for first, second in [(DeltaSink(str(tmp_path / "t")), DeltaSink(str(tmp_path / "t") + "/", name="late")),
                          (DeltaSink(str(tmp_path / "t"), app_id="a"), DeltaSink(str(tmp_path / "t"), app_id="b")),
                          (DeltaSink(str(tmp_path / "t")), DeltaSink(str(tmp_path / "u")))]:
        check_distinct_targets([("results", first), ("late", second)])


def test_a_new_job_refuses_a_delta_table_another_job_appended_to_and_not_its_own_first_attempt() -> None:
    """:func:`~lowwater.spark.sinks.delta.refuse_on_new_job` on a table's transactions (app id: last
    batch id); tests/spark/real/test_delta_sink.py runs it on Delta's."""
    from lowwater.spark.sinks.delta import DeltaSink, refuse_on_new_job

    results, late = DeltaSink("/t"), DeltaSink("/t", name="late")
    for sink in (results, late):
        sink.bind_job("job-2")
    other = DeltaSink("/t")
    other.bind_job("job-1")
    ours = {results.app_id: 0, late.app_id: 0}  # this job's first attempt, cut before its first commit
    assert refuse_on_new_job([results, late], {}) is None
    assert refuse_on_new_job([results, late], ours) is None
    assert refuse_on_new_job([results, late], ours, files=3) is None
    # another writer: a Spark query's transactions, or files and no transaction of this job's
    refused = refuse_on_new_job([results, late], {"spark-query-7": 12})
    assert refused is not None and "another job (app id spark-query-7)" in str(refused)
    refused = refuse_on_new_job([results, late], {}, files=3)
    assert refused is not None and "holds rows another writer appended (3 data files" in str(refused)
    assert refuse_on_new_job([DeltaSink("/t", shared=True)], {}, files=3) is None
    refused = refuse_on_new_job([results, late], {**ours, other.app_id: 9})
    assert refused is not None and refused.parameter == "path" and other.app_id in str(refused)
    assert refuse_on_new_job([DeltaSink("/t", shared=True), DeltaSink("/t", name="late", shared=True)],
                             {other.app_id: 9}) is None
    assert refuse_on_new_job([DeltaSink("/t", shared=True), late], {other.app_id: 9}) is not None
    given = DeltaSink("/t", app_id="nightly", shared=True)
    assert refuse_on_new_job([given], {"nightly": 0}) is None  # possibly this job's own batch 0
    refused = refuse_on_new_job([given], {"nightly": 4})
    assert refused is not None and refused.parameter == "app_id" and "skip batches 0 to 4" in str(refused)
    with pytest.raises(ConfigurationError, match="shared"):
        DeltaSink("/t", shared="yes")  # type: ignore[arg-type]


def test_a_postgres_upsert_on_an_output_without_window_results_is_refused_before_anything_runs(tmp_path: Any) -> None:
    """A PostgresSink upserts on the window's key and bounds. On the late output it failed inside
    batch 0, after that batch's state and results were committed, or on the keyed path at the first
    late row, hours in; and the checkpoint was then bound to it, so the fixed pipeline needed a new
    one (a user probe, session 53)."""
    from lowwater.core.clock import ManualClock
    from lowwater.spark.sinks import DirectorySink, PostgresSink

    env, results, lates = _windowed_with_late(tmp_path)
    results.add_sink(DirectorySink(tmp_path / "results"))
    lates.add_sink(PostgresSink("jdbc:postgresql://h/db", "late"))
    with pytest.raises(ConfigurationError) as e:
        env.execute(clock=ManualClock(0))
    assert e.value.parameter == "sinks" and "there are none in the side output 'late' of 'window aggregate'" \
        in str(e.value), str(e.value)
    env, results, lates = _windowed_with_late(tmp_path)
    results.add_sink(PostgresSink("jdbc:postgresql://h/db", "totals"))  # the results: fine
    with pytest.raises(ConfigurationError, match="there are none in the dead letters"):
        ReferenceRuntime(dead_letter_sink=PostgresSink("jdbc:postgresql://h/db", "dead")).execute(env)


@pytest.mark.parametrize(("kwargs", "parameter", "said"), [
    ({"starting_offsets": "earlist"}, "starting_offsets", "got 'earlist'"),
    ({"starting_offsets": "{not json"}, "starting_offsets", "expected 'earliest', 'latest' or Spark's JSON"),
    ({"bootstrap_servers": 9092}, "bootstrap_servers", "got 9092"),
])
def test_a_kafka_source_refuses_its_starting_offsets_and_brokers_when_made(
    kwargs: dict[str, Any], parameter: str, said: str,
) -> None:
    """A misspelt ``starting_offsets`` was taken, and Spark refused it when the query started, with
    ``IllegalArgumentException: Expected e.g. {"topicA":...}, got earlist``."""
    from lowwater.spark.kafka import KafkaSource

    args = {"bootstrap_servers": "broker:9092", "topics": ["t"], "value_fields": [("a", "STRING")], **kwargs}
    with pytest.raises(ConfigurationError, match=said) as e:
        KafkaSource(**args)
    assert e.value.parameter == parameter
    for fine in ("earliest", "latest", '{"t": {"0": 23, "1": -2}}'):
        assert KafkaSource("broker:9092", ["t"], [("a", "STRING")], starting_offsets=fine).starting_offsets == fine


@pytest.mark.parametrize("options", [{"failOnDataLoss": "false"}, {"failondataloss": "False"},
                                     {"FAILONDATALOSS": " false "}])
def test_a_kafka_source_told_to_skip_deleted_records_warns_that_they_go_uncounted(options: dict[str, str]) -> None:
    """Spark skips the records Kafka deleted before they were read, with a line in its log: lowwater
    never reads them, so its accounting cannot show them, and the user is told so when the source
    is made (Spark reads its options without regard to case)."""
    import warnings

    from lowwater.spark.kafka import DATA_LOSS_WARNING, KafkaSource

    with pytest.warns(RuntimeWarning) as said:
        KafkaSource("broker:9092", ["t"], [("a", "STRING")], options=options)
    assert [str(w.message) for w in said] == [DATA_LOSS_WARNING]
    assert "failOnDataLoss=false" in DATA_LOSS_WARNING and "cannot count" in DATA_LOSS_WARNING
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none for the default, an explicit true or another option
        for fine in ({}, {"failOnDataLoss": "true"}, {"maxOffsetsPerTrigger": "false"}):
            KafkaSource("broker:9092", ["t"], [("a", "STRING")], options=fine)


@pytest.mark.parametrize(("options", "said"), [
    ({"maxOffsetPerTrigger": "10"}, "'maxOffsetPerTrigger' is not an option of Spark's Kafka source; did you mean "
                                    "'maxOffsetsPerTrigger'?"),
    ({"startingOffset": "earliest"}, "'startingOffset' is not an option of Spark's Kafka source"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1"}, "'kafka.bootstrap.servers' is KafkaSource's bootstrap_servers="),
    ({"Subscribe": "other"}, "'Subscribe' is KafkaSource's topics="),
    ({"startingOffsets": "earlist"}, "'startingOffsets' is KafkaSource's starting_offsets="),
])
def test_a_kafka_option_spark_would_ignore_or_that_skips_a_check_is_refused(options: Any, said: str) -> None:
    """A misspelt option was ignored by Spark without a word (the batches, which decide what is
    late, were not what was asked), and one that a parameter sets won over the parameter lowwater
    had checked: a broker address there waited 248 s, then failed without naming it (a user
    probe, session 53)."""
    from lowwater.spark.kafka import KafkaSource

    with pytest.raises(ConfigurationError) as e:
        KafkaSource("broker:9092", ["t"], [("a", "STRING")], options=options)
    assert e.value.parameter == "options" and said in str(e.value), str(e.value)
    KafkaSource("broker:9092", ["t"], [("a", "STRING")],  # Spark's options in any case, and the consumer's
                options={"MAXOFFSETSPERTRIGGER": "5", "minPartitions": "4", "kafka.security.protocol": "SSL"})


def test_a_lowwater_jars_folder_without_sparks_jars_is_an_error(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """It was taken as "no jars", and a Kafka source then failed with Spark's "Failed to find data
    source: kafka", which says nothing of the folder."""
    from lowwater.core.errors import LowwaterError
    from lowwater.spark.jvm import spark_jars

    monkeypatch.setenv("LOWWATER_JARS", str(tmp_path / "nowhere"))
    with pytest.raises(LowwaterError, match=r"LOWWATER_JARS=.*nowhere has no spark/\*\.jar"):
        spark_jars()
    (tmp_path / "jars" / "spark").mkdir(parents=True)
    (tmp_path / "jars" / "spark" / "kafka.jar").write_bytes(b"")
    monkeypatch.setenv("LOWWATER_JARS", str(tmp_path / "jars"))
    assert spark_jars() == [str(tmp_path / "jars" / "spark" / "kafka.jar")]
    monkeypatch.delenv("LOWWATER_JARS")
    spark_jars()  # the repository's jars/, fetched or not: no error


@pytest.mark.parametrize(("broker", "said"), [("127.0.0.1:1", "Connection refused"),
                                              ("no-such-host.invalid:9092", "Failed to resolve")])
def test_a_broker_that_does_not_answer_is_one_line_that_says_why(
        broker: str, said: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """The Kafka client printed a line or more a connection attempt, 270 to 546 over the 30 s wait,
    before the one-line error; and only those lines said "Failed to resolve" (a user probe, session 53)."""
    import lowwater.spark.kafka as kafka

    monkeypatch.setattr(kafka, "METADATA_TIMEOUT_S", 2)
    with pytest.raises(ConfigurationError) as e:
        kafka.KafkaSource(broker, ["t"], [("a", "STRING")]).check_before_run()
    assert f"no Kafka broker at {broker} answered in 2 s" in str(e.value) and said in str(e.value), str(e.value)
    out, err = capfd.readouterr()
    assert "rdkafka" not in out + err, (out + err)[-2000:]


def test_a_postgres_table_another_job_wrote_is_refused_and_the_same_job_or_a_missing_table_is_not() -> None:
    """``refuse_job``, :func:`lowwater.spark.sinks.postgres.check_jobs`'s decision. ``fire_index`` orders one
    job's firings only: a job on a new checkpoint fires from 0 again, and the upsert (``WHERE
    excluded.fire_index >= t.fire_index``) kept the old job's higher firings over the new job's results, one
    table of two jobs' rows (a user probe, session 55); and a resuming job whose table was dropped re-created it
    with its new firings only, the windows it had fired before gone, its accounting balanced."""
    from lowwater.spark.sinks.postgres import JOBS_TABLE, PostgresSink, refuse_job

    def decide(resumes: bool, exists: bool, has_rows: bool, recorded: str | None) -> ConfigurationError | None:
        return refuse_job("totals", "job-2", resumes, exists, has_rows, recorded)

    refused = decide(False, True, True, "job-1")  # a new checkpoint on a table job 1 wrote
    assert refused is not None and refused.parameter == "table"
    assert "totals holds another lowwater job (job job-1)" in str(refused) and "TRUNCATE totals" in str(refused)
    assert decide(True, True, True, "job-1") is not None  # resuming, but another job's rows came in since
    refused = decide(False, True, True, None)  # rows no job recorded: made by hand, or by an older lowwater
    assert refused is not None and "no lowwater job recorded" in str(refused)
    assert decide(True, True, True, None) is None  # resuming on a table an older lowwater wrote: recorded now
    assert decide(False, True, True, "job-2") is None  # this job's batch 0, killed before its first commit
    assert decide(True, True, True, "job-2") is None  # the same job resuming
    assert decide(False, True, False, "job-1") is None  # an empty table: nothing to mix with
    assert decide(False, False, False, "job-1") is None  # dropped by the user for a new start: made again
    assert decide(False, False, False, None) is None
    refused = decide(True, False, False, "job-2")  # this job wrote it, and it is gone
    assert refused is not None and refused.parameter == "table"
    assert "totals is missing" in str(refused) and "restore the table" in str(refused) \
        and "new checkpoint" in str(refused)
    assert decide(True, False, False, None) is None  # no window fired yet: nothing was written
    assert refuse_job("totals", None, False, True, True, "job-1") is None  # a checkpoint without an id
    with pytest.raises(ConfigurationError, match=JOBS_TABLE):
        PostgresSink("jdbc:postgresql://h/db", f"s.{JOBS_TABLE}")


def test_a_window_the_native_path_cannot_take_says_why_in_terms_of_the_pipeline() -> None:
    """A union before the window was "operators between the source and the window" (user probe S,
    session 62): the pipeline has no operator there, and the keyed path runs it."""
    from lowwater.spark.plan import native_plan
    from lowwater.spark.sources import PartitionedLogSource

    def pipeline(union: bool) -> Any:
        env = StreamExecutionEnvironment()
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
        fields = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]
        a = env.from_source(PartitionedLogSource("/nonexistent/a", fields), strategy, name="a")
        b = env.from_source(PartitionedLogSource("/nonexistent/b", fields), strategy, name="b")
        up = a.union(b) if union else a.filter(lambda r: r["value"] > 0, "positive")
        up.key_by("key").window(TumblingEventTimeWindows.of(1000)).sum("value").collect()
        return env

    assert native_plan(pipeline(True)) == (None, "several sources are unioned into the window (the keyed path "
                                                 "runs a union)")
    assert native_plan(pipeline(False)) == (None, "an operator ('positive') between the source and the window")


@pytest.mark.parametrize("batches", [[{"k": "a", "ts": 1}, {"k": "b", "ts": 2}], ["ab"], [[{"k": "a"}], 5]])
def test_a_collection_source_given_elements_where_batches_go_says_so(batches: list[Any]) -> None:
    """A list of elements (PyFlink's ``from_collection`` shape) made each dict a batch of its keys,
    every one dead-lettered as a record without a timestamp (user probe T, session 63)."""
    with pytest.raises(ConfigurationError, match=r"batches: each batch is a sequence of elements, but batch \d is "
                                                 r"an? (dict|str|int) .*CollectionSource\.of\(elements\)"):
        CollectionSource(batches)
    assert CollectionSource.of(batches[:1]).partitions() == [0]
