"""A real Kafka topic read by Spark's own Kafka source: one watermark per (topic, partition).

Each micro-batch is produced first, then the job runs ``available_now`` over it (one Spark
micro-batch per run, on the same checkpoint), so batch boundaries are exact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lowwater.api import OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.kafka import KafkaSource
from tests.kafka_server import KafkaBroker, new_topic, produce

pytestmark = pytest.mark.spark

FIELDS = [("user", "STRING"), ("amount", "BIGINT")]


def _pipeline(source: KafkaSource, idleness_ms: int | None) -> tuple[StreamExecutionEnvironment, Any, Any]:
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0)  # event time = the Kafka record timestamp
    if idleness_ms is not None:
        strategy = strategy.with_idleness(idleness_ms)
    result = (env.from_source(source, strategy).key_by("user").window(TumblingEventTimeWindows.of(10_000))
              .side_output_late_data(late).sum("amount"))
    return env, result.collect(), result.get_side_output(late).collect()


def test_a_lagging_partition_loses_nothing_and_an_idle_one_is_released(spark: Any, kafka: KafkaBroker,
                                                                        tmp_path: Path) -> None:
    topic = new_topic(kafka, "clicks", 3)
    source = KafkaSource(kafka.bootstrap_servers, [topic], FIELDS)
    env, results, lates = _pipeline(source, idleness_ms=1_500)
    # (partition, value, Kafka timestamp), one list per micro-batch; the clock is 1 s per batch
    batches = [
        [(0, {"user": "ann", "amount": 1}, 1_000), (1, {"user": "bob", "amount": 2}, 2_000),
         (2, {"user": "cat", "amount": 64}, 500)],
        # partition 1 lags 12 s behind partition 0; partition 2 falls silent from here on
        [(0, {"user": "ann", "amount": 4}, 15_000), (1, {"user": "bob", "amount": 8}, 3_000)],
        [(0, {"user": "ann", "amount": 16}, 25_000), (1, {"user": "bob", "amount": 32}, 12_000)],
        # bob's 4 s event is on time (partition 2 still holds the watermark at 499); a global
        # max-based watermark (Spark's withWatermark) would be at 25 s and drop it
        [(1, {"user": "bob", "amount": 128}, 4_000), (0, {"user": "ann", "amount": 256}, 26_000)],
        # partition 2 went idle at the end of batch 3 (3000 - 1000 > 1500): [0, 10 s) closed
        [(0, {"user": "ann", "amount": 512}, 30_000), (1, {"user": "bob", "amount": 1024}, 5_000)],
    ]
    runtime = SparkRuntime(str(tmp_path / "ck"), spark=spark, clock=lambda b: 1_000 * b, end_of_input=False)
    for i, batch in enumerate(batches):
        produce(kafka, topic, batch)
        if i == len(batches) - 1:
            runtime.end_of_input = True
        job = runtime.execute(env)

    marks = [b["metrics"]["combined_watermark"] for b in job.batches() if not b.get("end_of_input")]
    assert marks == [499, 499, 499, 11_999, 11_999]
    got = sorted((r.key, r.window_start, r.value) for r in results.results)
    assert got == [("ann", 0, 1), ("ann", 10_000, 4), ("ann", 20_000, 272), ("ann", 30_000, 512),
                   ("bob", 0, 138), ("bob", 10_000, 32), ("cat", 0, 64)]
    assert [(e["user"], e["amount"]) for e in lates.results] == [("bob", 1024)]
    last = [b for b in job.batches() if not b.get("end_of_input")][-1]["metrics"]
    assert last["rows_late_by_partition"] == {"1": 1}
