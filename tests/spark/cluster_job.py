"""A job for the standalone-cluster test, run with ``spark-submit``.

    spark-submit [--master spark://127.0.0.1:PORT] cluster_job.py LOG CHECKPOINT OUT [native,sessions]

``native``: reads a partitioned log, sums per key in tumbling 2 s windows with 1 s allowed
lateness, and writes results and late records to ``OUT/results`` and ``OUT/late`` (Parquet, by
the executors). ``sessions``: session windows (1 s gap, 1 s lateness) on a Python key selector,
run per key on the executors (the keyed path), the same outputs. Several kinds, comma-separated,
run one after the other in one application (one driver start), each under ``CHECKPOINT/<kind>``
and ``OUT/<kind>``.
The master comes from ``spark-submit``; the session is Spark's own, not lowwater's local one.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

from lowwater.api import OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import EventTimeSessionWindows, TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import DirectorySink
from lowwater.spark.sources import PartitionedLogSource

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]


def _upper(record: dict[str, object]) -> str:
    return str(record["key"]).upper()


def run(spark: SparkSession, log: str, checkpoint: str, out: str, kind: str) -> tuple[str, str]:
    """Runs one kind; returns the path the job took and its accounting line."""
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    result = (
        env.from_source(PartitionedLogSource(log, FIELDS, max_files_per_trigger=2),
                        WatermarkStrategy.for_bounded_out_of_orderness(500).with_timestamp_assigner("ts"))
        .key_by("key" if kind == "native" else _upper)
        .window(TumblingEventTimeWindows.of(2000) if kind == "native" else EventTimeSessionWindows.with_gap(1000))
        .allowed_lateness(1000).side_output_late_data(late).sum("value")
    )
    result.add_sink(DirectorySink(f"{out}/results", "parquet"))
    result.get_side_output(late).add_sink(DirectorySink(f"{out}/late", "parquet"))
    job = SparkRuntime(checkpoint, spark=spark, path="native" if kind == "native" else "keyed",
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
