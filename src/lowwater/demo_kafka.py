"""``lowwater demo --kafka``: the lagging-partition demo through a real Kafka broker.

The same synthetic clicks as ``lowwater demo`` (:mod:`lowwater.demo`: 4 partitions,
partition 1 lagging 90 s, partition 3 idle after a minute, 0.5% really late) are produced
to a 4-partition topic on a broker started for the demo (``--bootstrap-servers`` to use
another), batch by batch. After each batch both jobs run over it as one micro-batch with
Spark's own Kafka source: Spark's ``withWatermark`` + ``groupBy(window).count()``, and
lowwater with idleness (:class:`~lowwater.spark.kafka.KafkaSource`). The broker is stopped
at the end.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from lowwater.api import CollectSink, OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.demo import BATCHES, BOUND_MS, FIELDS, PARTITIONS, ROWS_PER_BATCH, WINDOW_MS, _stream
from lowwater.io import PartitionedLogWriter

__all__ = ["run_kafka_demo"]


def run_kafka_demo(out: str | Path = "out/demo-kafka", bootstrap_servers: str | None = None) -> int:
    if bootstrap_servers is None:
        from lowwater.spark.kafka import local_broker

        print("starting a local Kafka broker (KRaft) from jars/kafka ...")
        with local_broker() as broker:
            print(f"broker up on {broker.bootstrap_servers}")
            return _run(Path(out), broker.bootstrap_servers)
    return _run(Path(out), bootstrap_servers)


def _batches(log: Path) -> list[list[dict[str, Any]]]:
    """The log's records, batch ``i`` = segment ``i`` of every partition."""
    by_batch: dict[int, list[dict[str, Any]]] = {}
    for f in log.glob("partition=*/segment-*.jsonl"):
        i = int(f.stem.split("-")[1])
        by_batch.setdefault(i, []).extend(json.loads(line) for line in f.read_text().splitlines())
    return [by_batch[i] for i in sorted(by_batch)]


def _run(out: Path, bootstrap: str) -> int:
    from confluent_kafka import Producer
    from pyspark.sql import functions as F

    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.kafka import KafkaSource, create_topic
    from lowwater.spark.session import get_or_create_session

    started = time.monotonic()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    log = out / "log"
    total = _stream().write_to(PartitionedLogWriter(log, "jsonl"), BATCHES, ROWS_PER_BATCH)
    batches = _batches(log)
    topic = f"lowwater-demo-{int(time.time())}"
    create_topic(bootstrap, topic, PARTITIONS)
    print(f"topic {topic}: {total} events in {len(batches)} batches; partition 1 lags 90 s, "
          "partition 3 goes idle after 60 s, 0.5% are 2 minutes late")

    spark = get_or_create_session(app_name="lowwater-demo-kafka")
    spark.sparkContext.setLogLevel("ERROR")  # each batch restarts Spark's query, which WARNs about its state
    kafka = KafkaSource(bootstrap, [topic], FIELDS)

    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    result = (
        env.from_source(kafka, WatermarkStrategy.for_bounded_out_of_orderness(BOUND_MS)
                        .with_timestamp_assigner("ts").with_idleness("20 s"))
        .key_by("key").window(TumblingEventTimeWindows.of(WINDOW_MS)).side_output_late_data(late).count()
    )
    results, lates = CollectSink(), CollectSink()
    result.add_sink(results)
    result.get_side_output(late).add_sink(lates)
    runtime = SparkRuntime(str(out / "checkpoints" / "lowwater"), spark=spark,
                           clock=lambda b: 1_700_000_000_000 + 5_000 * b, end_of_input=False)

    native = (
        kafka.spark_stream(spark).withColumn("event_time", F.timestamp_millis("ts"))
        .withWatermark("event_time", f"{BOUND_MS // 1000} seconds")
        .groupBy(F.window("event_time", f"{WINDOW_MS // 1000} seconds"), "key").agg(F.count("*").alias("value"))
    )
    spark_windows: dict[tuple[str, int], int] = {}

    def collect_native(df: Any, _batch_id: int) -> None:  # append mode: each window once, when closed
        for r in df.select("key", F.unix_millis("window.start").alias("ws"), "value").collect():
            spark_windows[(r["key"], int(r["ws"]))] = int(r["value"])

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    job = None
    for i, batch in enumerate(batches):
        for r in batch:
            producer.produce(topic, json.dumps(r["value"]).encode(), partition=int(r["partition"]))
        if producer.flush(60) != 0:
            raise RuntimeError(f"batch {i}: the broker did not acknowledge every record")
        q = (native.writeStream.outputMode("append").foreachBatch(collect_native)
             .option("checkpointLocation", str(out / "checkpoints" / "spark-native")).trigger(availableNow=True)
             .start())
        q.awaitTermination()
        job = runtime.execute(env, "lowwater demo (kafka)")
        print(f"batch {i}: {len(batch)} events produced and read by both jobs")
    assert job is not None

    lw_windows = {(r.key, r.window_start): int(r.value) for r in results.results}
    both = set(spark_windows) & set(lw_windows)
    spark_lost = sum(lw_windows[k] - spark_windows[k] for k in both)
    per_partition = job.batches()[-1]["metrics"]["rows_late_by_partition"]
    print()
    print(f"{'':34}{'Spark withWatermark':>21}{'lowwater':>10}")
    print(f"{'events in':34}{total!s:>21}{total!s:>10}")
    print(f"{'events lost (closed windows)':34}{spark_lost!s:>21}{0!s:>10}")
    print(f"{'events sent to the late output':34}{'-':>21}{len(lates.results)!s:>10}")
    print(f"{'windows emitted':34}{len(spark_windows)!s:>21}{len(lw_windows)!s:>10}")
    print()
    print(f"Through Kafka too, Spark's one watermark lost {spark_lost} on-time events of lagging partition 1; "
          f"lowwater's late output holds only the really late ones, by partition: {per_partition}.")
    summary = {"topic": topic, "events": total, "spark_events_lost": spark_lost, "lowwater_late": len(lates.results),
               "spark_windows": len(spark_windows), "lowwater_windows": len(lw_windows),
               "lowwater_late_by_partition": per_partition, "checkpoint": str(out / "checkpoints" / "lowwater")}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"done in {time.monotonic() - started:.0f} s")
    return 0
