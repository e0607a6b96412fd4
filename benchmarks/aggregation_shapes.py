"""The native path's batch aggregation in four shapes, on a static input: what the per-partition
figures cost, and what the ways around ``GROUPING SETS`` would save.

    .venv/bin/python benchmarks/aggregation_shapes.py --keys 1000
    .venv/bin/python benchmarks/aggregation_shapes.py --keys 100000

Writes 1M rows in ``--partitions`` Parquet files (one per source partition, every key in every
partition) to ``/tmp/lowwater-aggregation-shapes/``, once, then runs each shape ``--runs`` times
per round into Spark's ``noop`` sink, in one ``local[2]`` session, and prints per shape and
round the median wall and JVM CPU ms (``/proc``) of the runs after the first three:

* ``A``: the native path's shape, ``GROUPING SETS ((partition, last start), (key, start))``
  (``NativeProcessor._aggregate_sql``, tumbling windows);
* ``B``: the (key, start) grouping alone, a lower bound (the generators would get nothing);
* ``C``: the (key, start) grouping with the per-partition figures as ``3 * partitions``
  conditional aggregates of each group (the per-partition rows would then be global aggregates
  over the groups: ``observe()``);
* ``D``: grouped by (partition, key, start), the per-partition figures left to a second level;
* ``E``: ``B`` with ``observe()`` of three global aggregates over the elements, below the
  grouping: a lower bound for any design that gathers the per-partition figures as metrics of the
  elements (one aggregate function of its own over ``(partition, last start)``, say) in place of the
  ``Expand``.

The SQL mirrors the native path's layers (``_element_layers``), not its exact text.
"""

from __future__ import annotations

import argparse
import os
import time

ROWS = 1_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=12)
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    n_p = args.partitions
    path = f"/tmp/lowwater-aggregation-shapes/{args.keys}-{n_p}"
    if not os.path.exists(path):
        (spark.range(ROWS).selectExpr(
            f"CAST(id % {n_p} AS INT) AS _partition", "id AS _offset", "id AS _seq",
            f"concat('k', CAST(hash(id) % {args.keys} AS STRING)) AS key",
            f"1700000000000 + (id * 10000 / {ROWS}) + CAST(rand(1) * 800 AS BIGINT) AS ts",
            "CAST(rand(2) * 100 AS BIGINT) AS value").repartition(n_p, "_partition").write.parquet(path))
    spark.read.parquet(path).createOrReplaceTempView("batch")
    elements = ("SELECT _partition, _seq, _offset, TRY_CAST(ts AS BIGINT) AS _ts, key AS _k, value AS _lw_value "
                "FROM batch")
    elements = (f"SELECT *, (_ts IS NULL OR _k IS NULL OR _lw_value IS NULL) AS _bad, (_ts IS NOT NULL) AS _tsok "
                f"FROM ({elements})")
    elements = f"SELECT *, (NOT _bad AND (_ts > 9e18 OR _ts < -9e18)) AS _edge FROM ({elements})"
    elements = (f"SELECT *, CASE WHEN NOT _bad AND NOT _edge THEN _lw_value END AS _v, "
                f"CASE WHEN NOT _bad AND NOT _edge THEN _ts - pmod(_ts, 60000) END AS _last FROM ({elements})")
    sums = "sum(shiftright(CAST(_v AS BIGINT), 32)) AS acc_hi, sum(CAST(_v AS BIGINT) & 4294967295) AS acc_lo"
    per_partition = ", ".join(
        f"max(CASE WHEN _partition = {p} AND _tsok THEN _ts END) AS m{p}, "
        f"count(CASE WHEN _partition = {p} AND NOT _bad THEN 1 END) AS n{p}, "
        f"count(CASE WHEN _partition = {p} AND _bad THEN 1 END) AS b{p}" for p in range(n_p))
    shapes = {
        "A grouping sets": (
            "SELECT CAST(grouping(_k) AS INT) AS g, _partition, _last, _k, "
            "max(CASE WHEN _tsok THEN _ts END) AS max_ts, "
            f"count(CASE WHEN NOT _bad THEN 1 END) AS n, count(CASE WHEN _bad THEN 1 END) AS n_bad, {sums} "
            f"FROM ({elements}) GROUP BY GROUPING SETS ((_partition, _last), (_k, _last))"),
        "B (key, start) alone": f"SELECT _k, _last, count(1) AS n, {sums} FROM ({elements}) GROUP BY _k, _last",
        "C per-partition columns": (f"SELECT _k, _last, count(1) AS n, {sums}, {per_partition} FROM ({elements}) "
                                    "GROUP BY _k, _last"),
        "D (partition, key, start)": (f"SELECT _partition, _k, _last, count(1) AS n, max(_ts) AS m, {sums} "
                                      f"FROM ({elements}) GROUP BY _partition, _k, _last"),
    }
    from pyspark.sql import functions as F

    spark.sql(elements).observe(
        "elements", F.expr("max(CASE WHEN _tsok THEN _ts END)").alias("m"),
        F.expr("count(CASE WHEN NOT _bad THEN 1 END)").alias("n"),
        F.expr("count(CASE WHEN _bad THEN 1 END)").alias("b")).createOrReplaceTempView("observed")
    shapes["E (key, start), the elements observed"] = (f"SELECT _k, _last, count(1) AS n, {sums} FROM observed "
                                                       "GROUP BY _k, _last")
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[attr-defined]
    tick = os.sysconf("SC_CLK_TCK")

    def cpu_ms() -> float:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / tick

    def run(sql: str) -> tuple[float, float]:
        got = []
        for _ in range(args.runs):
            c0, t0 = cpu_ms(), time.monotonic()
            spark.sql(sql).write.format("noop").mode("overwrite").save()
            got.append(((time.monotonic() - t0) * 1000, cpu_ms() - c0))
        kept = sorted(got[3:])
        return kept[len(kept) // 2]

    results: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for name, sql in shapes.items():
            results.setdefault(name, []).append(run(sql))
    for name, rounds in results.items():
        print(f"{args.keys} keys, {name}: " + " | ".join(f"{w:.0f} ms / {c:.0f} CPU ms" for w, c in rounds))


if __name__ == "__main__":
    main()
