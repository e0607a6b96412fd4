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
