"""A job for the Kafka kill test: a real topic -> windows -> Delta table and PostgreSQL table.

    python kafka_crash_job.py BOOTSTRAP TOPIC CHECKPOINT DELTA_PATH JDBC_URL TABLE USER [--end]

Window results go to a DeltaSink (first) and a PostgresSink; late records to a DirectorySink
beside the checkpoint. Spark reads at most 30 offsets per micro-batch, so a topic of 120
records is 4 batches. ``LOWWATER_FAULT=<batch>:<point>`` kills the driver there
(lowwater.spark.faults). ``--end``: end of input after the last batch.
"""

from __future__ import annotations

import argparse

from lowwater.api import OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.kafka import KafkaSource
from lowwater.spark.session import get_or_create_session, postgres_jdbc_jar
from lowwater.spark.sinks import DirectorySink, PostgresSink
from lowwater.spark.sinks.delta import DeltaSink

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "topic", "checkpoint", "delta", "jdbc_url", "table", "user"):
        ap.add_argument(name)
    ap.add_argument("--end", action="store_true")
    a = ap.parse_args()
    jar = postgres_jdbc_jar()
    if jar is None:
        raise SystemExit("the PostgreSQL JDBC driver jar is missing: run bash scripts/ensure_postgres.sh")
    spark = get_or_create_session(app_name="lowwater kafka crash job", jars=[jar])
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    result = (
        env.from_source(KafkaSource(a.bootstrap, [a.topic], FIELDS, options={"maxOffsetsPerTrigger": "30"}),
                        WatermarkStrategy.for_bounded_out_of_orderness(1000).with_timestamp_assigner("ts"))
        .key_by("key").window(TumblingEventTimeWindows.of(2000)).side_output_late_data(late).sum("value")
    )
    result.add_sink(DeltaSink(a.delta))
    result.add_sink(PostgresSink(a.jdbc_url, a.table, user=a.user))
    result.get_side_output(late).add_sink(DirectorySink(f"{a.checkpoint}-late", "jsonl"))
    SparkRuntime(a.checkpoint, spark=spark, clock=lambda b: 1_000 * b, end_of_input=a.end).execute(env, "kafka crash")


if __name__ == "__main__":
    main()
