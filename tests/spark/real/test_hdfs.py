"""A real HDFS (MiniDFSCluster, hadoop-hdfs at pyspark's Hadoop version) under Spark.

What runs on HDFS here: Spark's streaming checkpoint (offsets, commits, sources) for a query
reading a real Kafka topic, resumed from HDFS by a second query; and a Delta table written
with DeltaSink; and ``lowwater run``, ``status`` and ``plot`` on a pipeline whose whole checkpoint
is on HDFS (test_hdfs_crash_series.py runs the SIGKILL series there).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from lowwater.core.windows.events import WindowResult
from lowwater.spark.kafka import KafkaSource
from lowwater.spark.sinks.delta import DeltaSink
from tests.hdfs_server import HdfsCluster
from tests.kafka_server import KafkaBroker, new_topic, produce
from tests.spark.real.uri_cli import PIPELINE, run_status_and_plot

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


def test_lowwater_run_status_and_plot_on_a_checkpoint_on_hdfs(
        spark: Any, hdfs: HdfsCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI as a user on a cluster drives it, the checkpoint on HDFS: ``status`` and ``plot``
    used to refuse the URI ("no such directory")."""
    from lowwater.cli import main

    run_status_and_plot(tmp_path, f"{hdfs.uri}/jobs/cli", ".print()", capsys)
    assert main(["status", f"{hdfs.uri}/jobs/none"]) == 2
    assert "is not a lowwater checkpoint (nothing there)" in capsys.readouterr().err
    from lowwater.spark.fs import checkpoint_fs

    checkpoint_fs(f"{hdfs.uri}/jobs/afile", spark).write_atomic(f"{hdfs.uri}/jobs/afile", b"x")
    assert main(["status", f"{hdfs.uri}/jobs/afile"]) == 2  # said as for a local file, not "no lowwater/ there"
    assert "jobs/afile is a file, not a checkpoint directory" in capsys.readouterr().err


def test_plain_paths_are_on_the_default_file_system_as_spark_s_own_are(
        spark: Any, hdfs: HdfsCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a cluster whose ``fs.defaultFS`` is HDFS, ``--checkpoint /jobs/x`` and a sink's
    ``/out/x`` are HDFS paths, for Spark's checkpoint and window store as for lowwater's own
    files. lowwater used to keep its control plane, the window store's deletes and the sink's
    renames on the driver's local disk at that path while Spark wrote beside them on HDFS: the
    sink failed, and the window store's deletes missed Spark's files."""
    from lowwater.cli import main
    from lowwater.io import PartitionedLogWriter

    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    writer.append(0, [{"user": "u", "ts": 1_000 * i, "n": 1} for i in range(25)])
    writer.append(1, [{"user": "v", "ts": 1_000 * i + 500, "n": 2} for i in range(25)])
    ck, out = tmp_path / "jobs" / "plain", tmp_path / "out"  # plain paths, as a user on a cluster gives them
    pipeline = tmp_path / "p.py"
    sink = f".sink_to(DirectorySink({str(out)!r}, 'json'))"
    pipeline.write_text(textwrap.dedent(PIPELINE.format(log=str(log), sink=sink)))
    spark.conf.set("fs.defaultFS", hdfs.uri)
    try:
        assert main(["run", str(pipeline), "--checkpoint", str(ck), "--end-of-input"]) == 0
        printed = capsys.readouterr().out
        results = spark.read.json(f"{hdfs.uri}{out}/batch=*").collect()
    finally:
        spark.conf.unset("fs.defaultFS")
    assert f"spark, checkpoint {hdfs.uri}{ck}," in printed
    assert f"next: lowwater status {hdfs.uri}{ck};" in printed
    assert not ck.exists() and not out.exists()  # nothing on the driver's disk
    assert {"lowwater", "spark"} <= set(_hdfs_list(spark, f"{hdfs.uri}{ck}"))
    assert {"batches", "state", "windows", "pipeline.json"} <= set(_hdfs_list(spark, f"{hdfs.uri}{ck}/lowwater"))
    assert sorted((r.key, r.value) for r in results) == [("u", 5.0), ("u", 10.0), ("u", 10.0),
                                                         ("v", 10.0), ("v", 20.0), ("v", 20.0)]
    assert main(["status", f"{hdfs.uri}{ck}"]) == 0
    assert "50 rows in = 50 windowed + 0 late + 0 dead-lettered (balanced)" in capsys.readouterr().out
    assert main(["status", str(ck)]) == 2  # the plain path, where nothing is on this machine
    assert "pass the URI `lowwater run` printed (hdfs://...)" in capsys.readouterr().err
