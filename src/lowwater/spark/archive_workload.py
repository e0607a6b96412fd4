"""The workload whose classes go into a driver's class archive (:mod:`lowwater.spark.class_archive`).

    python -m lowwater.spark.archive_workload FOLDER [--jar PATH ...]

Run by ``class_archive.build`` in a child whose JVM writes the archive when it exits.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

__all__ = ["run"]


def run(folder: str, jars: list[str]) -> None:
    """Load what lowwater's drivers load: a streaming file source with ``foreachBatch``, grouped
    and cogrouped Arrow functions, Parquet and JSON reads and writes (each once, on tiny data)."""
    import pyarrow as pa

    from lowwater.spark.session import get_or_create_session

    spark = get_or_create_session(app_name="lowwater class archive", jars=jars, conf={"spark.ui.enabled": "false"})
    src = os.path.join(folder, "in")
    spark.range(40).selectExpr("CAST(id % 4 AS INT) AS p", "id AS ts", "CAST(id % 5 AS STRING) AS key") \
        .write.json(src)

    def per_group(table: pa.Table) -> pa.Table:
        return pa.table({"key": table.column("key").slice(0, 1), "n": pa.array([table.num_rows], pa.int64())})

    def per_pair(left: pa.Table, right: pa.Table) -> pa.Table:
        return pa.table({"n": pa.array([left.num_rows + right.num_rows], pa.int64())})

    def batch(df: object, batch_id: int) -> None:
        from pyspark.sql import DataFrame

        assert isinstance(df, DataFrame)
        grouped = df.groupBy("p").applyInArrow(per_group, "key STRING, n BIGINT").persist()
        grouped.write.mode("overwrite").parquet(os.path.join(folder, "state"))
        stored = spark.read.parquet(os.path.join(folder, "state"))
        paired = df.groupBy("key").cogroup(stored.groupBy("key")).applyInArrow(per_pair, "n BIGINT")
        paired.join(grouped.select("n"), "n", "left_semi").collect()
        text = spark.createDataFrame([('{"a": 1}',)], "value STRING")
        spark.read.json(text.rdd.map(lambda r: r.value)).write.mode("overwrite").json(os.path.join(folder, "out"))
        grouped.unpersist()

    query = (spark.readStream.schema("p INT, ts BIGINT, key STRING").json(src).writeStream
             .foreachBatch(batch).option("checkpointLocation", os.path.join(folder, "ck"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    jvm: Any = spark.sparkContext._jvm
    print(f"jvm-class-path={jvm.java.lang.System.getProperty('java.class.path')}", flush=True)
    print(f"jvm-pid={spark.sparkContext._gateway.proc.pid}", flush=True)  # type: ignore[union-attr]
    spark.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--jar", action="append", default=[])
    args = parser.parse_args(argv)
    run(args.folder, args.jar)


if __name__ == "__main__":
    main()
