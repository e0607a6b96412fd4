"""Spark's Kafka source schema, mapped onto lowwater's partitions and source timestamps.

The Kafka connector cannot be fetched here, so the stream is a file source whose rows
have exactly the Kafka source's columns and types.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sources import KafkaShapedSource

pytestmark = pytest.mark.spark

KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                "timestamp TIMESTAMP, timestampType INT")


def _record(topic: str, partition: int, offset: int, ts_ms: int, user: str, amount: int) -> dict[str, Any]:
    return {"key": user.encode(), "value": json.dumps({"user": user, "amount": amount}).encode(), "topic": topic,
            "partition": partition, "offset": offset, "timestampType": 0,
            "timestamp": dt.datetime.fromtimestamp(ts_ms / 1000, tz=dt.timezone.utc)}


def test_kafka_partitions_and_record_timestamps_drive_the_watermarks(spark: Any, tmp_path: Path) -> None:
    batches = [
        [_record("clicks", 0, 0, 1_000, "ann", 1), _record("clicks", 1, 0, 2_000, "bob", 2)],
        [_record("clicks", 0, 1, 15_000, "ann", 4)],  # partition 1 silent: [0, 10 s) stays open
        # partition 1 holds the watermark at 1999: ann's 3 s event is on time (a global
        # max-based watermark, 15 s here, would have dropped it)
        [_record("clicks", 1, 1, 12_000, "bob", 8), _record("clicks", 0, 2, 3_000, "ann", 16)],
        [_record("clicks", 0, 3, 4_000, "ann", 32)],  # [0, 10 s) closed at 11999: really late
    ]
    data = tmp_path / "kafka"
    for i, rows in enumerate(batches):
        spark.createDataFrame(rows, KAFKA_SCHEMA).coalesce(1).write.parquet(str(data / f"b{i}"))
    stream = (spark.readStream.schema(KAFKA_SCHEMA).option("maxFilesPerTrigger", 1)
              .option("recursiveFileLookup", "true").option("pathGlobFilter", "*.parquet").parquet(str(data)))
    _stamp(data)

    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    result = (
        env.from_source(KafkaShapedSource(stream, [("user", "STRING"), ("amount", "BIGINT")], topics=["clicks"]),
                        WatermarkStrategy.for_bounded_out_of_orderness(0))  # event time = Kafka timestamp
        .key_by("user").window(TumblingEventTimeWindows.of(10_000)).side_output_late_data(late).sum("amount")
    )
    results, lates = result.collect(), result.get_side_output(late).collect()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)

    marks = [b["combined_watermark"] for b in job.watermarks()]
    # batch 0: p0 999, p1 1999 -> 999; batch 1: p1 still 1999 -> 1999; batch 2: min(14999, 11999)
    assert marks[:4] == [999, 1999, 11999, 11999]
    got = sorted((r.key, r.window_start, r.value) for r in results.results)
    assert got == [("ann", 0, 17), ("ann", 10_000, 4), ("bob", 0, 2), ("bob", 10_000, 8)]
    assert [(e["user"], e["amount"]) for e in lates.results] == [("ann", 32)]
    assert job.batches()[3]["metrics"]["rows_late_by_partition"] == {"0": 1}


def _stamp(root: Path) -> None:
    import os

    for i, f in enumerate(sorted(root.glob("b*/*.parquet"))):
        os.utime(f, (1_000_000 + i, 1_000_000 + i))


def _kafka_stream(spark: Any, root: Path, rows: list[dict[str, Any]]) -> Any:
    spark.createDataFrame(rows, KAFKA_SCHEMA).coalesce(1).write.parquet(str(root / "b0"))
    return (spark.readStream.schema(KAFKA_SCHEMA).option("recursiveFileLookup", "true")
            .option("pathGlobFilter", "*.parquet").parquet(str(root)))


@pytest.mark.parametrize(("topics", "per_topic", "record", "message"), [
    # topic "views" used to be numbered as topics[0]: its partition 0 was clicks' partition 0
    (["clicks"], 1 << 20, ("views", 0, 5),
     r"a record of topic views, partition 0, offset 5, and that topic is not in topics \['clicks'\]"),
    # partition 2 of "clicks" used to be numbered 0 * 2 + 2: "views"' partition 0
    (["clicks", "views"], 2, ("clicks", 2, 5),
     r"a record of topic clicks, partition 2, offset 5, and partitions are numbered 2 to a topic"),
])
def test_a_record_the_topic_numbering_cannot_place_fails_the_query_naming_it(
        spark: Any, tmp_path: Path, topics: list[str], per_topic: int, record: tuple[str, int, int],
        message: str) -> None:
    """Numbered anyway, such a record would be counted under another topic's partition, its
    watermark and its late counts mixed with that partition's, and nothing would say so."""
    from lowwater.core.errors import PipelineError

    topic, partition, offset = record
    stream = _kafka_stream(spark, tmp_path / "kafka", [_record("clicks", 0, 0, 1_000, "ann", 1),
                                                       _record(topic, partition, offset, 2_000, "bob", 2)])
    env = StreamExecutionEnvironment()
    (env.from_source(KafkaShapedSource(stream, [("user", "STRING"), ("amount", "BIGINT")], topics=topics,
                                       partitions_per_topic=per_topic),
                     WatermarkStrategy.for_bounded_out_of_orderness(0))
     .key_by("user").window(TumblingEventTimeWindows.of(10_000)).sum("amount").collect())
    with pytest.raises(PipelineError, match=message):
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)


def test_two_topics_number_their_partitions_apart(spark: Any, tmp_path: Path) -> None:
    stream = _kafka_stream(spark, tmp_path / "kafka", [_record("clicks", 1, 0, 1_000, "ann", 1),
                                                       _record("views", 1, 0, 2_000, "bob", 2)])
    env = StreamExecutionEnvironment()
    results = (env.from_source(KafkaShapedSource(stream, [("user", "STRING"), ("amount", "BIGINT")],
                                                 topics=["clicks", "views"], partitions_per_topic=1000),
                               WatermarkStrategy.for_bounded_out_of_orderness(0))
               .key_by("user").window(TumblingEventTimeWindows.of(10_000)).sum("amount").collect())
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    assert sorted(job.watermarks()[0]["partition_watermarks"]) == ["1", "1001"]
    assert sorted((r.key, r.value) for r in results.results) == [("ann", 1), ("bob", 2)]


def test_topic_numberings_that_cannot_be_partition_numbers_are_refused(spark: Any) -> None:
    from lowwater.core.errors import ConfigurationError
    from lowwater.spark.dataframe_source import check_topic_numbering, topic_partition_number

    df = spark.createDataFrame([], KAFKA_SCHEMA)
    with pytest.raises(ConfigurationError, match=r"2049 topics of 1048576 partitions each .* at most 2048 topics"):
        KafkaShapedSource(df, [("user", "STRING")], topics=[f"t{i}" for i in range(2049)])
    KafkaShapedSource(df, [("user", "STRING")], topics=[f"t{i}" for i in range(2048)])  # 2048 * 2**20 - 1 fits
    with pytest.raises(ConfigurationError, match=r"names a topic twice"):
        KafkaShapedSource(df, [("user", "STRING")], topics=["a", "b", "a"])
    with pytest.raises(ConfigurationError, match=r"partitions_per_topic.*at least 1"):
        check_topic_numbering(["a"], 0)
    # KafkaSource.partitions(): what the broker says a topic has, numbered as the rows are
    assert topic_partition_number(2, "c", 7, 1000) == 2007
    with pytest.raises(ConfigurationError, match=r"topic 'c' has partition 1000, and partitions are numbered 1000"):
        topic_partition_number(2, "c", 1000, 1000)
