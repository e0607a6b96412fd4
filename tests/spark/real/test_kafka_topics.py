"""More of a real Kafka topic under lowwater: bad records, two topics in one source, a partition
added while the job runs, and Kafka as a sink (at-least-once, deduplicated by the consumer)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import CollectSink, OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.kafka import KafkaSource, create_topic
from tests.kafka_server import KafkaBroker, new_topic, produce

pytestmark = pytest.mark.spark

FIELDS = [("user", "STRING"), ("amount", "BIGINT")]


def _sum_job(source: KafkaSource, dead: CollectSink | None = None) -> tuple[Any, Any, Any]:
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    result = (env.from_source(source, WatermarkStrategy.for_bounded_out_of_orderness(0))  # Kafka timestamps
              .key_by("user").window(TumblingEventTimeWindows.of(10_000)).side_output_late_data(late).sum("amount"))
    return env, result.collect(), result.get_side_output(late).collect()


def test_bad_records_on_a_real_topic_are_dead_lettered_and_counted(spark: Any, kafka: KafkaBroker,
                                                                   tmp_path: Path) -> None:
    topic = new_topic(kafka, "bad", 1)
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    p.produce(topic, json.dumps({"user": "ann", "amount": 1}).encode(), b"ann", partition=0, timestamp=1_000)
    p.produce(topic, b"{not json", b"ann", partition=0, timestamp=2_000)  # a value that does not parse
    p.produce(topic, None, None, partition=0, timestamp=3_000)  # a null value, no key
    p.produce(topic, None, b"ann", partition=0, timestamp=4_000)  # a tombstone: a key, a null value
    p.produce(topic, json.dumps({"user": "ann", "amount": 2}).encode(), b"ann", partition=0, timestamp=5_000)
    assert p.flush(30) == 0

    env, results, _lates = _sum_job(KafkaSource(kafka.bootstrap_servers, [topic], FIELDS))
    dead = CollectSink()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, dead_letter_sink=dead, end_of_input=True).execute(env)
    acc = job.accounting()
    assert (acc.rows_in, acc.rows_windowed, acc.rows_late, acc.rows_dead_lettered) == (5, 2, 0, 3)
    assert [(r.key, r.value) for r in results.results] == [("ann", 3)]
    assert sorted(d["offset"] for d in dead.results) == [1, 2, 3]
    assert all(d["reason"] and d["partition"] == 0 for d in dead.results)


def _from_field_or_seconds(element: dict[str, Any], previous: int) -> Any:
    """A Python assigner: the record's ``sec`` field in seconds when it has one, else ``None`` (a dead
    letter); nested functions would do, this one is named for the failure message."""
    return None if element["sec"] is None else element["sec"] * 1000


@pytest.mark.parametrize(("path", "assigner"), [("keyed", "python"), ("keyed", "field"), ("general", "python"),
                                               ("general", "field")])
def test_a_kafka_source_runs_where_its_elements_are_python_objects(spark: Any, kafka: KafkaBroker, tmp_path: Path,
                                                                   path: str, assigner: str) -> None:
    """Sessions per key over a real topic, on the paths that ship the source to the executors (the
    keyed path's stages, stage A in Python for a Python assigner) or keep it in their state (the
    general path). Both failed the first batch with ``CONTEXT_ONLY_VALID_ON_DRIVER``: ``KafkaSource`` was
    pickled with the DataFrame of its subscription (a user probe, session 64)."""
    from lowwater.core.windows import EventTimeSessionWindows

    topic = new_topic(kafka, f"sessions-{path}-{assigner}", 2)
    records = [(0, {"user": "ann", "sec": 1}, 1_000), (1, {"user": "bob", "sec": 2}, 2_000),
               (0, {"user": "ann", "sec": 3}, 3_000), (1, {"user": "bob", "sec": None}, 4_000),
               (0, {"user": "ann", "sec": 30}, 30_000), (1, {"user": "bob", "sec": 31}, 31_000)]
    produce(kafka, topic, records)
    source = KafkaSource(kafka.bootstrap_servers, [topic], [("user", "STRING"), ("sec", "BIGINT")])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0)  # field: the Kafka record timestamps
    if assigner == "python":
        strategy = strategy.with_timestamp_assigner(_from_field_or_seconds)
    env = StreamExecutionEnvironment()
    results = (env.from_source(source, strategy).key_by("user").window(EventTimeSessionWindows.with_gap(5_000))
               .count().collect())
    dead = CollectSink()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path,  # type: ignore[arg-type]
                       dead_letter_sink=dead, end_of_input=True).execute(env)
    assert job.path == path, job.reason
    got = sorted((r.key, r.window_start, r.window_end, r.value) for r in results.results)
    if assigner == "python":  # bob's record without seconds is a dead letter
        assert got == [("ann", 1_000, 8_000, 2), ("ann", 30_000, 35_000, 1),
                       ("bob", 2_000, 7_000, 1), ("bob", 31_000, 36_000, 1)]
        assert [(d["partition"], d["offset"]) for d in dead.results] == [(1, 1)]
        assert "_from_field_or_seconds" in dead.results[0]["reason"]
    else:
        assert got == [("ann", 1_000, 8_000, 2), ("ann", 30_000, 35_000, 1),
                       ("bob", 2_000, 9_000, 2), ("bob", 31_000, 36_000, 1)]
        assert dead.results == []
    assert job.accounting().rows_in == 6


def test_a_topic_the_broker_does_not_hold_is_named_before_spark_reads(spark: Any, kafka: KafkaBroker,
                                                                     tmp_path: Path) -> None:
    """Spark's reader failed after half a minute with ``UnknownTopicOrPartitionException: This server
    does not host this topic-partition``, naming neither the topic nor the broker."""
    from lowwater.core.errors import ConfigurationError

    topic = new_topic(kafka, "there", 1)
    env, _, _ = _sum_job(KafkaSource(kafka.bootstrap_servers, [topic, "no-such-topic"], FIELDS))
    with pytest.raises(ConfigurationError, match=f"topic 'no-such-topic' not found on {kafka.bootstrap_servers}"):
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    assert not (tmp_path / "ck" / "offsets").exists()  # refused before the query started


def test_two_topics_in_one_source_and_a_partition_added_while_running(spark: Any, kafka: KafkaBroker,
                                                                      tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    clicks, views = new_topic(kafka, "clicks", 1), new_topic(kafka, "views", 1)
    source = KafkaSource(kafka.bootstrap_servers, [clicks, views], FIELDS)
    assert source.partitions() == [0, 1000]
    env, results, lates = _sum_job(source)
    runtime = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=False)

    produce(kafka, clicks, [(0, {"user": "ann", "amount": 1}, 21_000)])
    produce(kafka, views, [(0, {"user": "ann", "amount": 2}, 5_000)])  # views lags: it holds the watermark
    job = runtime.execute(env)
    assert job.batches()[-1]["metrics"]["combined_watermark"] == 4_999

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})  # kept: its futures need it alive
    admin.create_partitions([NewPartitions(clicks, 2)])[clicks].result(timeout=30)
    # the new partition 1 of clicks: its first record (8 s) is older than the watermark (4999)?
    # no: it is on time; and from now on partition 1 has its own watermark in the minimum
    produce(kafka, clicks, [(1, {"user": "bob", "amount": 4}, 8_000)])
    produce(kafka, views, [(0, {"user": "ann", "amount": 8}, 30_000)])
    job = runtime.execute(env)
    marks = job.batches()[-1]["metrics"]
    assert marks["combined_watermark"] == 7_999  # min(clicks/0 20999, clicks/1 7999, views/0 29999)
    # numbered 0, 1 and 1000 inside, named by topic in the metrics (and lowwater status)
    assert set(marks["partition_watermarks"]) == {f"{clicks}-0", f"{clicks}-1", f"{views}-0"}

    runtime.end_of_input = True
    runtime.execute(env)
    got = sorted((r.key, r.window_start, r.value) for r in results.results)
    assert got == [("ann", 0, 2), ("ann", 20_000, 1), ("ann", 30_000, 8), ("bob", 0, 4)]
    assert lates.results == []


def test_a_partition_added_while_the_job_is_stopped_holds_the_watermark_from_the_restart_on(
        spark: Any, kafka: KafkaBroker, tmp_path: Path) -> None:
    """A restarted job registers the partitions the topic gained while it was stopped, as a new job
    registers every partition (and a Flink source restored from a checkpoint discovers its splits):
    an empty one holds the combined watermark until it has data or is idle. It was registered at its
    first record, as one added while the job runs, so the restart fired what a fresh start would
    not (a user probe, session 59)."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic = new_topic(kafka, "grown", 1)
    env, results, _ = _sum_job(KafkaSource(kafka.bootstrap_servers, [topic], FIELDS))
    produce(kafka, topic, [(0, {"user": "ann", "amount": 1}, 5_000)])
    SparkRuntime(str(tmp_path / "ck"), spark=spark).execute(env)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})  # kept: its futures need it alive
    admin.create_partitions([NewPartitions(topic, 2)])[topic].result(timeout=30)
    produce(kafka, topic, [(0, {"user": "ann", "amount": 2}, 30_000)])
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark).execute(env)
    marks = job.batches()[-1]["metrics"]
    assert set(marks["partition_watermarks"]) == {"0", "1"}, marks
    assert marks["combined_watermark"] == 4_999, "the empty partition 1 holds it, as on a fresh start"
    assert results.results == []


def test_a_topic_deleted_and_made_again_under_its_name_is_refused_on_resume(spark: Any, kafka: KafkaBroker,
                                                                             tmp_path: Path) -> None:
    """Spark's checkpoint holds offsets only: in a topic made again with at least as many records, it
    resumed at the old offsets and skipped the new topic's first records, none of them counted
    (failOnDataLoss stops it only when the new topic holds fewer). The checkpoint keeps the topic's id."""
    from confluent_kafka.admin import AdminClient

    from lowwater.core.errors import ConfigurationError

    topic = new_topic(kafka, "remade", 1)
    produce(kafka, topic, [(0, {"user": "ann", "amount": 1}, 1_000), (0, {"user": "ann", "amount": 2}, 2_000)])
    env, results, _ = _sum_job(KafkaSource(kafka.bootstrap_servers, [topic], FIELDS))
    runtime = SparkRuntime(str(tmp_path / "ck"), spark=spark)
    runtime.execute(env)
    produce(kafka, topic, [(0, {"user": "ann", "amount": 4}, 3_000)])
    runtime.execute(env)  # the same topic: resumed
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    admin.delete_topics([topic])[topic].result(timeout=30)
    deadline = time.monotonic() + 60
    while True:  # the broker deletes asynchronously: made again once the name is free
        try:
            create_topic(kafka.bootstrap_servers, topic, 1)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    produce(kafka, topic, [(0, {"user": "bob", "amount": 10 ** k}, 4_000 + k) for k in range(5)])
    with pytest.raises(ConfigurationError, match=rf"topic '{topic}' .* is not the topic this checkpoint read: it "
                                                 r"was deleted and made again .* Hint: run the pipeline on a new "
                                                 r"checkpoint"):
        runtime.execute(env)
    assert sorted((r.key, r.value) for r in results.results) == []  # no window closed, nothing read from it
    env, results, _ = _sum_job(KafkaSource(kafka.bootstrap_servers, [topic], FIELDS))
    SparkRuntime(str(tmp_path / "ck2"), spark=spark, end_of_input=True).execute(env)
    assert sorted((r.key, r.value) for r in results.results) == [("bob", 11111)]  # every record of the new topic


def _remake(kafka: KafkaBroker, topic: str, partitions: int) -> None:
    """Delete ``topic`` and make it again under its name (the broker deletes asynchronously)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})  # kept: its futures need it alive
    admin.delete_topics([topic])[topic].result(timeout=30)
    deadline = time.monotonic() + 60
    while True:
        try:
            create_topic(kafka.bootstrap_servers, topic, partitions)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_topic_deleted_and_made_again_while_the_job_runs_stops_it_at_its_next_batch(
        spark: Any, kafka: KafkaBroker, tmp_path: Path) -> None:
    """The topic's id was checked when a run started only: a running job read the new topic from the
    old offsets on, its first records skipped without a word, and only the next start refused the
    checkpoint (a user probe, session 59). Now each batch checks it before anything is written."""
    from lowwater.core.errors import QueryFailedError

    topic = new_topic(kafka, "remade-running", 1)
    produce(kafka, topic, [(0, {"user": "ann", "amount": 1}, 1_000), (0, {"user": "ann", "amount": 2}, 2_000)])
    env, results, _ = _sum_job(KafkaSource(kafka.bootstrap_servers, [topic], FIELDS))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, trigger="12 seconds").execute(env)
    try:
        deadline = time.monotonic() + 120
        while not any(int(m.get("rows_in") or 0) for m in job.metrics()):  # the first batch read them
            assert time.monotonic() < deadline, "the first batch should have read the topic"
            time.sleep(0.2)
        _remake(kafka, topic, 1)  # between two batches: the next comes 12 s after the first
        produce(kafka, topic, [(0, {"user": "bob", "amount": 10 ** k}, 30_000 + k) for k in range(5)])
        with pytest.raises(QueryFailedError, match=rf"while this run read it: topic '{topic}' .* is not the topic "
                                                   r"this checkpoint read: it was deleted and made again"):
            job.await_termination(120)
    finally:
        job.stop()
    assert sum(int(m.get("rows_in") or 0) for m in job.metrics()) == 2, "nothing of the new topic was read"
    assert not [r for r in results.results if r.key == "bob"]


def test_a_kafka_dataframe_changed_to_another_topic_is_refused_on_resume(spark: Any, kafka: KafkaBroker,
                                                                         tmp_path: Path) -> None:
    """A KafkaShapedSource over the user's reader has no topics of its own in the fingerprint: a
    reader changed to another topic resumed at the old topic's offsets, and with
    failOnDataLoss=false fed its records into the old topic's watermarks and open windows."""
    from lowwater.core.errors import ConfigurationError
    from lowwater.spark.sources import KafkaShapedSource

    orders, refunds = new_topic(kafka, "orders", 1), new_topic(kafka, "refunds", 1)
    produce(kafka, orders, [(0, {"user": "ann", "amount": 5}, 1_000)])
    produce(kafka, refunds, [(0, {"user": "ann", "amount": -500}, 2_000)])

    def job(topic: str) -> Any:
        df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("subscribe", topic).option("startingOffsets", "earliest").option("failOnDataLoss", "false")
              .load())
        with pytest.warns(RuntimeWarning):  # failOnDataLoss=false: the warning that skipped records go uncounted
            source = KafkaShapedSource(df, FIELDS)
        assert source.read_identity() == {"kafka reader": f"subscribe={topic}"}
        return _sum_job(source)

    env, _, _ = job(orders)
    runtime = SparkRuntime(str(tmp_path / "ck"), spark=spark)
    runtime.execute(env)
    runtime.execute(job(orders)[0])  # the same reader: resumed
    with pytest.raises(ConfigurationError, match=rf"reads subscribe={refunds}, where this checkpoint's read "
                                                 rf"subscribe={orders}.*Hint: run the new reader on a new checkpoint"):
        runtime.execute(job(refunds)[0])


def test_results_to_a_kafka_topic_and_a_consumer_that_deduplicates(spark: Any, kafka: KafkaBroker,
                                                                  tmp_path: Path) -> None:
    from confluent_kafka import Consumer

    from lowwater.api.sinks import Sink

    src, out = new_topic(kafka, "in", 1), new_topic(kafka, "totals", 1)

    class KafkaTopicSink(Sink):
        """Window results through Spark's Kafka sink, keyed by (key, window start, fire index).
        Spark's Kafka sink is at-least-once: a replayed batch writes its records again."""

        def __init__(self) -> None:
            self.written: dict[int, list[Any]] = {}

        def write_batch(self, batch_id: int, rows: Any) -> None:
            self.written[batch_id] = list(rows)
            data = [(json.dumps([r.key, r.window_start, r.fire_index]),
                     json.dumps({"key": r.key, "window_start": r.window_start, "value": r.value,
                                 "fire_index": r.fire_index})) for r in rows]
            if data:
                (spark.createDataFrame(data, "key STRING, value STRING").write.format("kafka")
                 .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", out).save())

    env = StreamExecutionEnvironment()
    result = (env.from_source(KafkaSource(kafka.bootstrap_servers, [src], FIELDS),
                              WatermarkStrategy.for_bounded_out_of_orderness(0))
              .key_by("user").window(TumblingEventTimeWindows.of(10_000)).sum("amount"))
    sink = KafkaTopicSink()
    result.add_sink(sink)
    produce(kafka, src, [(0, {"user": "ann", "amount": 1}, 1_000), (0, {"user": "bob", "amount": 2}, 2_000),
                         (0, {"user": "ann", "amount": 4}, 12_000)])
    SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    # what a replay does (a crash after the write, before the batch was recorded): write it again
    batch, rows = max((b, r) for b, r in sink.written.items() if r)
    sink.write_batch(batch, rows)

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"dedup-{out}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([out])
    records: list[tuple[str, dict[str, Any]]] = []
    want = sum(len(r) for r in sink.written.values()) + len(rows)
    for _ in range(120):
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            records.append((m.key().decode(), json.loads(m.value())))
        if len(records) >= want:
            break
    consumer.close()
    assert len(records) == want > len({k for k, _ in records})  # duplicates on the topic
    latest = dict(records)  # the consumer deduplicates: one record per (key, window start, fire index)
    assert sorted((v["key"], v["window_start"], v["value"]) for v in latest.values()) == [
        ("ann", 0, 1), ("ann", 10_000, 4), ("bob", 0, 2)]


def test_a_kafka_dataframe_of_several_topics_is_refused_without_topics(spark: Any) -> None:
    """Without ``topics``, KafkaShapedSource numbers partitions by the Kafka partition alone: the
    partition 0s of two topics would have shared one watermark without a word. What the plan's
    Kafka sources subscribe to is known before the query starts (no broker is asked here)."""
    from lowwater.core.errors import ConfigurationError
    from lowwater.spark.sources import KafkaShapedSource

    def kafka(**options: str) -> Any:
        reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
        for name, value in options.items():
            reader = reader.option(name, value)
        return reader.load()

    several = [(kafka(subscribe="a,b"), "2 topics (subscribe=a,b)"),
               (kafka(subscribePattern="clicks-.*"), "the topics matching subscribePattern=clicks-.*"),
               (kafka(assign='{"a": [0], "b": [1]}'), "2 topics (assign="),
               (kafka(subscribe="a").unionByName(kafka(subscribe="b")), "2 topics (subscribe=a, subscribe=b)")]
    for df, said in several:
        with pytest.raises(ConfigurationError) as e:
            KafkaShapedSource(df, FIELDS)
        assert e.value.parameter == "topics" and said in str(e.value), str(e.value)
        assert "Pass topics=[...]" in str(e.value)
    assert KafkaShapedSource(kafka(subscribe="a"), FIELDS).topics is None  # one topic: by partition
    assert KafkaShapedSource(kafka(subscribe="a,b"), FIELDS, topics=["a", "b"]).topics == ["a", "b"]


def test_a_dataframe_source_over_several_kafka_topics_is_refused_their_bare_partition_column(spark: Any) -> None:
    """A Spark job ported with its own ``from_json`` into a DataFrameSource took the Kafka reader's
    ``partition`` column as it is: with two topics, partition 0 of each shared one watermark, which
    followed the leading topic, and 180 of 400 records of the lagging one were late (a user probe,
    session 58), where KafkaShapedSource refused the same DataFrame. No broker is asked."""
    from pyspark.sql import functions as F

    from lowwater.core.errors import ConfigurationError
    from lowwater.spark.sources import DataFrameSource

    def kafka(**options: str) -> Any:
        reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
        for name, value in options.items():
            reader = reader.option(name, value)
        value = F.from_json(F.col("value").cast("string"), "user STRING, ts TIMESTAMP").alias("j")
        parsed = reader.load().select("topic", "partition", "offset", "timestamp", value)
        return parsed.select("topic", "partition", "offset", "j.*")

    two = kafka(subscribe="eu,us")
    for partition in ("partition", F.col("partition")):
        with pytest.raises(ConfigurationError) as e:
            DataFrameSource(two, partition=partition, offset="offset", timestamp="ts")
        assert e.value.parameter == "partition" and "reads 2 topics (subscribe=eu,us)" in str(e.value), str(e.value)
        assert "partition 0 of every topic would share one watermark" in str(e.value)
    numbered = F.col("partition") + F.when(F.col("topic") == "us", 1000).otherwise(0)
    assert DataFrameSource(two, partition=numbered, offset="offset", timestamp="ts").partition is numbered
    DataFrameSource(kafka(subscribe="eu"), partition="partition", offset="offset", timestamp="ts")  # one topic


def test_a_kafka_dataframe_told_to_skip_deleted_records_warns_that_they_go_uncounted(spark: Any) -> None:
    """A KafkaShapedSource over the user's own Kafka reader took its ``failOnDataLoss=false`` as
    given: Spark then skips records Kafka deleted before they were read, with a line in its log,
    and lowwater's totals never show them. The reader's options are read from its plan, in any
    case (Spark's options are case-insensitive); no broker is asked."""
    import warnings

    from lowwater.spark.dataframe_source import SHAPED_DATA_LOSS_WARNING
    from lowwater.spark.sources import KafkaShapedSource

    def kafka(**options: str) -> Any:
        reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
        for name, value in options.items():
            reader = reader.option(name, value)
        return reader.load()

    for skipping in (kafka(subscribe="a", failOnDataLoss="false"), kafka(subscribe="a", FAILONDATALOSS="False"),
                     kafka(subscribe="a").unionByName(kafka(subscribe="b", failondataloss="false"))):
        with pytest.warns(RuntimeWarning) as said:
            KafkaShapedSource(skipping, FIELDS, topics=["a", "b"])
        assert [str(w.message) for w in said] == [SHAPED_DATA_LOSS_WARNING], [str(w.message) for w in said]
    assert "failOnDataLoss=false" in SHAPED_DATA_LOSS_WARNING and "cannot count" in SHAPED_DATA_LOSS_WARNING
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none for Spark's default, an explicit true, or another option
        for fine in (kafka(subscribe="a"), kafka(subscribe="a", failOnDataLoss="true"),
                     kafka(subscribe="a", maxOffsetsPerTrigger="10")):
            KafkaShapedSource(fine, FIELDS)
    from lowwater.spark.kafka import KafkaSource

    with pytest.warns(RuntimeWarning):  # KafkaSource warns of its own options when it is made ...
        source = KafkaSource("127.0.0.1:9", ["a"], FIELDS, options={"failOnDataLoss": "false"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ... and not again over the reader it makes at the start
        source.spark_stream(spark)


def test_a_kafka_dataframe_given_an_option_sparks_kafka_source_does_not_have_warns(spark: Any) -> None:
    """Spark ignores a Kafka reader's option it does not know, without a word: a misspelt
    ``maxOffsetPerTrigger`` on the user's own reader gave batches of every record available, and
    the batches decide what is late. KafkaSource refused its own (session 53); over the user's
    reader, whose options Spark took, KafkaShapedSource warns, with a did-you-mean. No broker is asked."""
    import warnings

    from lowwater.spark.sources import KafkaShapedSource

    def kafka(**options: str) -> Any:  # a reader of its own each (a reader's option() changes it)
        return spark.readStream.format("kafka").options(**{"kafka.bootstrap.servers": "127.0.0.1:9", **options}).load()

    with pytest.warns(RuntimeWarning) as said:
        KafkaShapedSource(kafka(subscribe="a", maxOffsetPerTrigger="100", **{"kafka.group.id": "g"}), FIELDS)
    assert len(said) == 1, [str(w.message) for w in said]
    assert ("KafkaShapedSource: its DataFrame's Kafka reader was given 'maxoffsetpertrigger', which is not an option "
            "of Spark's Kafka source; did you mean 'maxOffsetsPerTrigger'?") in str(said[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Spark's own options, the consumer's and the subscription's: no word
        KafkaShapedSource(kafka(subscribe="a", startingOffsets="earliest", maxOffsetsPerTrigger="5",
                                **{"kafka.security.protocol": "PLAINTEXT"}), FIELDS)
