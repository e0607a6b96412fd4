"""What ``foreachBatch``'s boundary costs the native path's aggregation, on a static input.

    .venv/bin/python benchmarks/batch_boundary.py

A streaming query hands ``foreachBatch`` its micro-batch as a ``LogicalRDD`` over the streaming
plan's rows (Spark's ``ForeachBatchSink``): the batch's own plan ends there, so the columns are
copied out of it (``RDDScanExec``'s projection) and none is pruned. This measures that copy where
it weighs most, a Kafka-like source whose JSON ``from_json`` parses in the JVM: 1M records in 4
Parquet files (``partition, offset, value``, the value a JSON text with ``key, ts, value``, 1,000
keys), written once to ``/tmp/lowwater-batch-boundary/``, read and parsed as
``benchmarks/harness.py``'s ``files`` source reads the log, with the columns a ``DataFrameSource``
gives the engine. Each shape runs ``--runs`` times per round into Spark's ``noop`` sink, in one
``local[2]`` session; printed per shape and round, the median wall and JVM CPU ms (``/proc``) of
the runs after the first two:

* ``agg``: the native path's aggregation (``GROUPING SETS ((partition, last start), (key,
  start))``, its layers abridged), over the parsed batch itself;
* ``agg-rdd``: the same over the batch as ``foreachBatch`` gives it (``LogicalRDD.fromDataset``,
  as ``ForeachBatchSink`` builds it);
* ``spark-rdd``: Spark's ``groupBy(window, key).sum`` over the ``LogicalRDD``;
* ``noop``, ``noop-rdd``: the read and parse alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

ROWS, KEYS = 1_000_000, 1_000

AGG = """SELECT CAST(grouping(_k) AS INT) AS g, _partition, _last, _k, _last AS _ws,
  max(CASE WHEN NOT _bad THEN _ts END) AS max_ts, count(CASE WHEN NOT _bad THEN 1 END) AS n,
  count(CASE WHEN _bad THEN 1 END) AS n_bad, sum(shiftright(_v, 32)) AS hi, sum(_v & 4294967295) AS lo
FROM (SELECT *, CASE WHEN NOT _bad THEN _ts - pmod(_ts, 60000) END AS _last,
             CASE WHEN NOT _bad THEN value END AS _v
      FROM (SELECT _partition, ts AS _ts, key AS _k, value,
                   (ts IS NULL OR key IS NULL OR value IS NULL) AS _bad FROM {view}))
GROUP BY GROUPING SETS ((_partition, _last), (_k, _last))"""
SPARK = "SELECT window(timestamp_millis(ts), '60 seconds') AS w, key, sum(value) FROM {view} GROUP BY 1, 2"
NOOP = "SELECT * FROM {view}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark._jvm
    path = "/tmp/lowwater-batch-boundary"
    if not os.path.exists(path):
        (spark.range(ROWS).selectExpr(
            "CAST(id % 4 AS INT) AS partition", "id AS offset",
            f"to_json(named_struct('key', concat('k', CAST(abs(hash(id)) % {KEYS} AS STRING)), "
            f"'ts', 1700000000000 + CAST(id * 10000 / {ROWS} AS BIGINT) + CAST(rand(1) * 800 AS BIGINT), "
            "'value', CAST(rand(2) * 100 AS BIGINT))) AS value")
         .repartition(4, "partition").write.parquet(path))
    parsed = (spark.read.parquet(path)
              .select("partition", "offset", F.from_json("value", "key STRING, ts BIGINT, value BIGINT").alias("v"))
              .select("partition", "offset", "v.*"))
    none = F.lit(None).cast("long")
    batch = parsed.select(F.col("partition").alias("_partition"), F.col("offset").alias("_offset"),
                          none.alias("_source_ts"), none.alias("_seq"), "key", "ts", "value")

    def as_foreach_batch_gives_it(df: DataFrame) -> DataFrame:
        jdf = df._jdf
        module = getattr(getattr(jvm.org.apache.spark.sql.execution, "LogicalRDD$"), "MODULE$")
        node = module.fromDataset(jdf.queryExecution().toRdd(), jdf, False)
        return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(jdf.sparkSession(), node), spark)

    pid = int(jvm.ProcessHandle.current().pid())
    tick = 1000 / os.sysconf("SC_CLK_TCK")

    def cpu_ms() -> float:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()  # noqa: SIM115
        return (int(fields[11]) + int(fields[12])) * tick

    def run(df: DataFrame, sql: str) -> tuple[float, float]:
        df.createOrReplaceTempView("batch")
        query = spark.sql(sql.format(view="batch"))
        c0, t0 = cpu_ms(), time.perf_counter()
        query.write.format("noop").mode("overwrite").save()
        return (time.perf_counter() - t0) * 1000, cpu_ms() - c0

    shapes: dict[str, Callable[[], tuple[Any, str]]] = {
        "agg": lambda: (batch, AGG), "agg-rdd": lambda: (as_foreach_batch_gives_it(batch), AGG),
        "spark-rdd": lambda: (as_foreach_batch_gives_it(batch), SPARK),
        "noop": lambda: (batch, NOOP), "noop-rdd": lambda: (as_foreach_batch_gives_it(batch), NOOP),
    }
    for r in range(args.rounds):
        for name, shape in shapes.items():
            got = [run(*shape()) for _ in range(args.runs)][2:]
            print(f"round {r} {name:10} {statistics.median(w for w, _ in got):6.0f} ms "
                  f"{statistics.median(c for _, c in got):6.0f} CPU ms", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
