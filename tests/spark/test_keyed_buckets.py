"""Stage B's buckets: one Spark partition (one task) per bucket, never two buckets in one task."""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.spark.keyed import bucket_column, bucket_labels, spark_hash_int


def test_spark_hash_int_is_the_hash_spark_computes(spark: Any) -> None:
    values = [0, 1, 2, 7, 12, 255, -1, -5, 2**31 - 1, -(2**31), 123_456_789]
    rows = spark.createDataFrame([(v,) for v in values], "x INT").selectExpr("x", "hash(x) AS h").collect()
    assert {int(r["x"]): int(r["h"]) for r in rows} == {v: spark_hash_int(v) for v in values}


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_each_bucket_gets_a_partition_of_its_own(spark: Any, n: int) -> None:
    """Keys spread over ``n`` buckets, hash-partitioned by the bucket as stage B's cogroup is: every
    partition holds exactly one bucket. (Buckets numbered 0..n-1 collide: with n = 4, two
    partitions held all the keys.)"""
    keys = spark.range(4_000).selectExpr("concat('k', id) AS _kb").select("_kb", bucket_column(n))
    placed = keys.repartition(n, "_b").selectExpr("spark_partition_id() AS p", "_b").groupBy("p").agg(
        {"_b": "collect_set"}).collect()
    labels = bucket_labels(n)
    assert len(placed) == n, f"{n - len(placed)} of {n} partitions got no key"
    assert sorted((int(r["p"]), sorted(r[1])) for r in placed) == [(i, [labels[i]]) for i in range(n)]
