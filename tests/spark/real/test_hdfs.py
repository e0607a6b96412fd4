"""A real HDFS (MiniDFSCluster, hadoop-hdfs at pyspark's Hadoop version) under Spark.

What runs on HDFS here: Spark's streaming checkpoint (offsets, commits, sources) for a query
reading a real Kafka topic, resumed from HDFS by a second query; and a Delta table written
with DeltaSink. lowwater's own state (``<checkpoint>/lowwater``) still needs a local path until
it moves onto Hadoop's FileSystem (docs/cluster.md), so this test does not run SparkRuntime with
an ``hdfs://`` checkpoint.
"""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.core.windows.events import WindowResult
from lowwater.spark.kafka import KafkaSource
from lowwater.spark.sinks.delta import DeltaSink
from tests.hdfs_server import HdfsCluster
from tests.kafka_server import KafkaBroker, new_topic, produce

pytestmark = pytest.mark.spark


def _hdfs_list(spark: Any, uri: str) -> list[str]:
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    return sorted(str(s.getPath().getName()) for s in fs.listStatus(path))


def test_spark_checkpoint_and_a_delta_table_on_hdfs(spark: Any, hdfs: HdfsCluster, kafka: KafkaBroker) -> None:
    topic = new_topic(kafka, "hdfs", 2)
    checkpoint = f"{hdfs.uri}/jobs/hdfs-test/spark"
    seen: list[tuple[int, int, int]] = []

    def run() -> None:
        df = KafkaSource(kafka.bootstrap_servers, [topic], [("n", "BIGINT")]).spark_stream(spark)
        q = (df.writeStream.foreachBatch(lambda b, i: seen.extend((i, r._partition, r.n) for r in b.collect()))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        q.awaitTermination()

    produce(kafka, topic, [(p, {"n": n}, None) for n in range(3) for p in range(2)])
    run()
    produce(kafka, topic, [(p, {"n": n}, None) for n in range(3, 5) for p in range(2)])
    run()  # a new query: resumes from the offsets and commits on HDFS
    assert sorted((p, n) for _b, p, n in seen) == sorted((p, n) for n in range(5) for p in range(2))
    assert sorted({b for b, _p, _n in seen}) == [0, 1]  # one batch per run, ids continued from HDFS
    assert {"commits", "offsets", "metadata", "sources"} <= set(_hdfs_list(spark, checkpoint))
    assert _hdfs_list(spark, f"{checkpoint}/commits") == ["0", "1"]

    table = f"{hdfs.uri}/tables/totals"
    sink = DeltaSink(table)
    sink.write_batch(0, [WindowResult("ann", 0, 10, 3, 0)])
    sink.write_batch(0, [WindowResult("ann", 0, 10, 3, 0)])  # replayed: nothing added
    rows = spark.read.format("delta").load(table).collect()
    assert [(r.key, r.value, r.batch_id) for r in rows] == [("ann", 3.0, 0)]
    assert "_delta_log" in _hdfs_list(spark, table)
