"""A job for the standalone-cluster test, run with ``spark-submit``.

    spark-submit [--master spark://127.0.0.1:PORT] cluster_job.py LOG CHECKPOINT OUT [native,sessions]

``native``: reads a partitioned log, sums per key in tumbling 2 s windows with 1 s allowed
lateness, and writes results and late records to ``OUT/results`` and ``OUT/late`` (Parquet, by
the executors). ``sessions``: session windows (1 s gap, 1 s lateness) on a Python key selector,
run per key on the executors (the keyed path), the same outputs. ``kafka``: the native pipeline
over the log's records in Spark's Kafka source schema (``LOG-kafka``, :func:`write_kafka_frames`),
read by ``KafkaShapedSource``, whose reader (``jars/spark/lowwater-jvm.jar``) runs on the
executors when the jar was given to ``spark-submit``. Several kinds, comma-separated,
run one after the other in one application (one driver start), each under ``CHECKPOINT/<kind>``
and ``OUT/<kind>``.
The master comes from ``spark-submit``; the session is Spark's own, not lowwater's local one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from lowwater.api import OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import EventTimeSessionWindows, TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.kafka_value import jvm_reader
from lowwater.spark.sinks import DirectorySink
from lowwater.spark.sources import KafkaShapedSource, PartitionedLogSource

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]
KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, "
                "timestampType INT")
BAD_EVERY = 97
"""Every 97th record of :func:`write_kafka_frames` has a value the source dead-letters."""


def write_kafka_frames(log: str, folder: str) -> int:
    """The partitioned log at ``log`` as Kafka-shaped Parquet files in ``folder``, one per segment
    in the order segment 0 of each partition, then segment 1, ... (modification times one second
    apart: Spark's file source takes files by modification time). Every :data:`BAD_EVERY`-th record's
    value is a tombstone or a ``ts`` that is text. Returns the number of bad records."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    segments = {int(d.name.split("=")[1]): sorted(d.glob("segment-*.jsonl")) for d in Path(log).glob("partition=*")}
    Path(folder).mkdir(parents=True, exist_ok=True)
    n = bad = 0
    for i in range(max(len(v) for v in segments.values())):
        for p in sorted(segments):
            if i >= len(segments[p]):
                continue
            rows = [json.loads(line) for line in segments[p][i].read_text().splitlines()]
            values: list[bytes | None] = []
            for r in rows:
                if r["offset"] % BAD_EVERY == BAD_EVERY - 1:
                    bad += 1
                    values.append(None if bad % 2 else json.dumps({**r["value"], "ts": "soon"}).encode())
                else:
                    values.append(json.dumps(r["value"]).encode())
            table = pa.table({
                "key": pa.array([None] * len(rows), pa.binary()), "value": pa.array(values, pa.binary()),
                "topic": ["clicks"] * len(rows), "partition": pa.array([p] * len(rows), pa.int32()),
                "offset": pa.array([r["offset"] for r in rows], pa.int64()),
                "timestamp": pa.array([dt.datetime.fromtimestamp(r["timestamp"] / 1000, dt.timezone.utc)
                                       for r in rows], pa.timestamp("ms", "UTC")),
                "timestampType": pa.array([0] * len(rows), pa.int32())})
            target = Path(folder) / f"part-{n:05d}.parquet"
            pq.write_table(table, target)
            os.utime(target, (1_700_000_000 + n, 1_700_000_000 + n))
            n += 1
    return bad


def _upper(record: dict[str, object]) -> str:
    return str(record["key"]).upper()


def run(spark: SparkSession, log: str, checkpoint: str, out: str, kind: str) -> tuple[str, str]:
    """Runs one kind; returns the path the job took and its accounting line."""
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    if kind == "kafka":
        print("kafka READER", "on" if jvm_reader(spark, FIELDS) is not None else "off")
        frames = spark.readStream.schema(KAFKA_SCHEMA).option("maxFilesPerTrigger", 2).parquet(f"{log}-kafka")
        source = KafkaShapedSource(frames, FIELDS)
    else:
        source = PartitionedLogSource(log, FIELDS, max_files_per_trigger=2)
    native = kind in ("native", "kafka")
    result = (
        env.from_source(source, WatermarkStrategy.for_bounded_out_of_orderness(500).with_timestamp_assigner("ts"))
        .key_by("key" if native else _upper)
        .window(TumblingEventTimeWindows.of(2000) if native else EventTimeSessionWindows.with_gap(1000))
        .allowed_lateness(1000).side_output_late_data(late).sum("value")
    )
    result.add_sink(DirectorySink(f"{out}/results", "parquet"))
    result.get_side_output(late).add_sink(DirectorySink(f"{out}/late", "parquet"))
    job = SparkRuntime(checkpoint, spark=spark, path="native" if native else "keyed",
                       clock=lambda b: 1_000 * b, end_of_input=True).execute(env, f"cluster {kind}")
    return job.path, str(job.accounting())


def main(log: str, checkpoint: str, out: str, kinds: str = "native") -> None:
    spark = SparkSession.builder.appName("lowwater cluster test").config("spark.sql.shuffle.partitions", "4") \
        .config("spark.sql.session.timeZone", "UTC").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    print("MASTER", spark.sparkContext.master)
    for kind in kinds.split(","):
        path, accounting = run(spark, log, f"{checkpoint}/{kind}", f"{out}/{kind}", kind)
        print(kind, "PATH", path)
        print(kind, "ACCOUNTING", accounting)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
