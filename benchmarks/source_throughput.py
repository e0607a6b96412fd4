"""How fast Spark reads a partitioned log: lowwater's Python data source against Spark's JSON file source.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/source_throughput.py [--rows 1000000]

Both read the same JSON-lines log (``--partitions`` partitions, segments of ``--segment``
records, three fields) as one ``available_now`` micro-batch into a ``count`` per
partition, and both parse every field:

* ``lowwater``: :func:`lowwater.spark.log_stream.log_stream`, the source
  :class:`~lowwater.spark.sources.PartitionedLogSource` uses (Python decoding with the
  :class:`~lowwater.io.PartitionedLogReader` codec, Arrow batches to the JVM);
* ``spark-json``: ``spark.readStream.json`` with the same schema, the source lowwater used
  before (it cannot check a line against the layout, see docs/reliability.md).

Each is run ``--repeat`` times after one warm-up run; the best and median wall times are
printed as rows per second.

``--batches N`` measures the cost of a micro-batch instead: ``N`` one-record segments per
partition, read one segment per partition per batch (``segments_per_batch=1``, and
``maxFilesPerTrigger`` = partitions with the segments' mtimes in order for the JSON source).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

FIELDS = [("user", "STRING"), ("ts", "BIGINT"), ("amount", "BIGINT")]


def write_log(root: Path, rows: int, partitions: int, segment: int) -> None:
    from lowwater.io import PartitionedLogWriter

    w = PartitionedLogWriter(root, fsync=False)
    per = rows // partitions
    for p in range(partitions):
        for start in range(0, per, segment):
            n = min(segment, per - start)
            w.append(p, [{"user": f"u{(start + i) % 1000}", "ts": 1_700_000_000_000 + start + i, "amount": i % 7}
                         for i in range(n)])


SEGMENTS_PER_BATCH: int | None = None
FILES_PER_TRIGGER: int | None = None


def _lowwater(spark: Any, root: Path) -> Any:
    from lowwater.io.log_batches import LogBatching
    from lowwater.spark.log_stream import log_stream

    return log_stream(spark, str(root), FIELDS, LogBatching(None, SEGMENTS_PER_BATCH))


def _spark_json(spark: Any, root: Path) -> Any:
    from pyspark.sql import functions as F

    struct = ", ".join(f"`{n}`: {t}" for n, t in FIELDS)
    reader = spark.readStream
    if FILES_PER_TRIGGER is not None:
        reader = reader.option("maxFilesPerTrigger", FILES_PER_TRIGGER)
    df = (reader.option("recursiveFileLookup", "true").option("pathGlobFilter", "segment-*.jsonl")
          .schema(f"partition INT, offset BIGINT, timestamp BIGINT, value STRUCT<{struct}>, _corrupt_record STRING")
          .option("columnNameOfCorruptRecord", "_corrupt_record").json(str(root)))
    return df.select(F.col("partition").alias("_partition"), F.col("offset").alias("_offset"), "value.*",
                     "_corrupt_record")


def run_once(spark: Any, root: Path, make: Any, rows: int) -> tuple[float, int]:
    counted: list[int] = []

    def on_batch(df: Any, batch_id: int) -> None:
        counted.append(sum(r["n"] for r in df.groupBy("_partition").agg({"amount": "count"})
                           .withColumnRenamed("count(amount)", "n").collect()))

    ck = Path(tempfile.mkdtemp(prefix="lw-src-ck-"))
    try:
        started = time.perf_counter()
        q = make(spark, root).writeStream.foreachBatch(on_batch).trigger(availableNow=True) \
            .option("checkpointLocation", str(ck)).start()
        q.awaitTermination()
        elapsed = time.perf_counter() - started
    finally:
        shutil.rmtree(ck, ignore_errors=True)
    if sum(counted) != rows:
        raise SystemExit(f"counted {sum(counted)} rows, expected {rows}")
    return elapsed, len(counted)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--segment", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batches", type=int, default=0)
    args = parser.parse_args(argv)
    global SEGMENTS_PER_BATCH, FILES_PER_TRIGGER
    if args.batches:
        args.rows, args.segment = args.batches * args.partitions, 1
        SEGMENTS_PER_BATCH, FILES_PER_TRIGGER = 1, args.partitions

    from lowwater.spark.session import get_or_create_session

    spark = get_or_create_session(app_name="lowwater source throughput")
    root = Path(tempfile.mkdtemp(prefix="lw-src-log-")) / "log"
    try:
        write_log(root, args.rows, args.partitions, args.segment)
        if args.batches:  # the JSON source reads files in mtime order: round by round
            import os

            for i, f in enumerate(sorted(root.glob("partition=*/segment-*"), key=lambda f: (f.name, f.parent.name))):
                os.utime(f, (1_000_000 + i, 1_000_000 + i))
        rows = args.rows // args.partitions * args.partitions
        for name, make in (("lowwater", _lowwater), ("spark-json", _spark_json)):
            run_once(spark, root, make, rows)  # warm-up
            runs = [run_once(spark, root, make, rows) for _ in range(args.repeat)]
            times, batches = [t for t, _ in runs], runs[0][1]
            print(f"{name:11s} {rows} rows in {batches} batches: best {rows / min(times):,.0f} rows/s "
                  f"({min(times):.2f} s), median {rows / statistics.median(times):,.0f} rows/s "
                  f"({statistics.median(times):.2f} s)", flush=True)
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
